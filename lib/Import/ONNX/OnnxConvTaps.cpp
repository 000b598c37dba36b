//===- OnnxConvTaps.cpp - 3-D convolution and ConvTranspose ---------------===//
//
// Convolutions that conv2d does not express by itself. A 3-D Conv is a sum
// over the filter's depth taps of 2-D convolutions: each tap picks the
// input depths it reads, folds them into the batch and convolves them with
// that depth's slice of the filter. ConvTranspose (1-D, 2-D or 3-D) is the
// convolution it is the gradient of: the input spread by the stride, padded
// by the window less one, convolved with the filter flipped and its
// channels swapped, then cut to the pads. In 3-D each depth tap is such a
// 2-D ConvTranspose, placed at its output depths by a gather.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include <array>
#include <numeric>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// A spatial attribute with one value per dimension (`count`), else `fill`.
std::vector<int64_t> perDimension(const NodeContext &ctx, const std::string &name, size_t count,
                                  int64_t fill) {
  std::vector<int64_t> v = ctx.attrInts(name).value_or(std::vector<int64_t>(count, fill));
  if (v.size() != count)
    ctx.fail("'" + name + "' must give " + std::to_string(count) + " values for " +
             std::to_string(count / (name == "pads" ? 2 : 1)) + "-D windows");
  return v;
}

/// `x` [N, C, D, H, W] (padded already) convolved by `w` [O, C/g, kd, kh,
/// kw] without padding.
Tensor convolve3d(const NodeContext &ctx, const Tensor &x, const Tensor &w,
                  const std::vector<int64_t> &strides, const std::vector<int64_t> &dil,
                  int64_t groups) {
  const Shape in = x.shape(), k = w.shape();
  int64_t depth = (in[2] - (k[2] - 1) * dil[0] - 1) / strides[0] + 1;
  if (in[2] < (k[2] - 1) * dil[0] + 1 || depth < 1)
    ctx.fail("the window is deeper than the padded input");
  std::optional<Tensor> y;
  for (int64_t kd = 0; kd < k[2]; ++kd) {
    std::vector<int64_t> depths;
    for (int64_t d = 0; d < depth; ++d)
      depths.push_back(d * strides[0] + kd * dil[0]);
    Tensor slices = index_select(x, 2, depths)
                        .permute({0, 2, 1, 3, 4})
                        .reshape({in[0] * depth, in[1], in[3], in[4]});
    Tensor f = w.slice(2, kd, kd + 1).reshape({k[0], k[1], k[3], k[4]});
    Tensor part = conv2d(slices, f, {strides[1], strides[2]}, {0, 0}, {dil[1], dil[2]}, groups);
    y = y ? *y + part : part;
  }
  const Shape &flat = y->shape();
  return y->reshape({in[0], depth, flat[1], flat[2], flat[3]}).permute({0, 2, 1, 3, 4});
}
} // namespace

Tensor onnx_import::convolution3d(const NodeContext &ctx, const Tensor &x, const Tensor &w) {
  if (w.shape().size() != 5)
    ctx.fail("the filter must have rank 5 (OIDHW) for a 3-D input");
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (auto given = ctx.attrInts("kernel_shape"); given && *given != kernel)
    ctx.fail("'kernel_shape' disagrees with the filter's shape");
  std::vector<int64_t> strides = perDimension(ctx, "strides", 3, 1),
                       dil = perDimension(ctx, "dilations", 3, 1),
                       pads = perDimension(ctx, "pads", 6, 0);
  for (size_t i = 0; i < 3; ++i)
    if (strides[i] < 1 || dil[i] < 1 || pads[i] < 0 || pads[i + 3] < 0)
      ctx.fail("strides and dilations must be positive and pads not negative");
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  std::vector<int64_t> low(5, 0), high(5, 0);
  for (size_t i = 0; i < 3; ++i) {
    int64_t size = x.shape()[i + 2], span = (kernel[i] - 1) * dil[i] + 1;
    if (autoPad == "NOTSET") {
      low[i + 2] = pads[i];
      high[i + 2] = pads[i + 3];
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t total =
          std::max<int64_t>(0, ((size + strides[i] - 1) / strides[i] - 1) * strides[i] + span - size);
      low[i + 2] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      high[i + 2] = total - low[i + 2];
    } else if (autoPad != "VALID") {
      ctx.fail("auto_pad '" + autoPad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
    }
  }
  int64_t groups = ctx.attrInt("group", 1);
  if (groups < 1 || x.shape()[1] != w.shape()[1] * groups || w.shape()[0] % groups)
    ctx.fail("the filter's " + std::to_string(w.shape()[1]) + " input channels per group do not "
             "fit the input's " + std::to_string(x.shape()[1]) + " in " +
             std::to_string(groups) + " groups");
  bool padded = std::any_of(low.begin(), low.end(), [](int64_t v) { return v; }) ||
                std::any_of(high.begin(), high.end(), [](int64_t v) { return v; });
  return convolve3d(ctx, padded ? kiln::pad(x, low, high) : x, w, strides, dil, groups);
}

namespace {
/// The full 2-D ConvTranspose of `x` [N, Cin, H, W] by `w` [Cin, Cout/g,
/// kh, kw] (no pads, no output padding): the input spread by the stride
/// (zeros between its elements), convolved with the filter flipped in
/// space and its channels swapped, padded by the dilated window less one.
Tensor transposed2d(const Tensor &x, const Tensor &w, std::array<int64_t, 2> stride,
                    std::array<int64_t, 2> dilation, int64_t groups) {
  const Shape in = x.shape(), k = w.shape();
  Tensor spread = x;
  if (stride[0] > 1 || stride[1] > 1)
    spread = kiln::pad(x.reshape({in[0], in[1], in[2], 1, in[3], 1}), {0, 0, 0, 0, 0, 0},
                       {0, 0, 0, stride[0] - 1, 0, stride[1] - 1})
                 .reshape({in[0], in[1], in[2] * stride[0], in[3] * stride[1]})
                 .slice(2, 0, (in[2] - 1) * stride[0] + 1)
                 .slice(3, 0, (in[3] - 1) * stride[1] + 1);
  Tensor f = w.reshape({groups, k[0] / groups, k[1], k[2], k[3]})
                 .permute({0, 2, 1, 3, 4})
                 .reshape({k[1] * groups, k[0] / groups, k[2], k[3]});
  for (int64_t axis = 2; axis < 4; ++axis) {
    std::vector<int64_t> reversed(static_cast<size_t>(k[size_t(axis)]));
    std::iota(reversed.rbegin(), reversed.rend(), 0);
    if (reversed.size() > 1)
      f = index_select(f, axis, reversed);
  }
  return conv2d(spread, f, {1, 1}, {(k[2] - 1) * dilation[0], (k[3] - 1) * dilation[1]},
                dilation, groups);
}

std::vector<Value> convTranspose(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0), w = ctx.tensorAs(1, x);
  bool oneD = x.shape().size() == 3;
  if (oneD) { // [N, C, L] as [N, C, 1, L]
    x = x.reshape({x.shape()[0], x.shape()[1], 1, x.shape()[2]});
    if (w.shape().size() == 3)
      w = w.reshape({w.shape()[0], w.shape()[1], 1, w.shape()[2]});
  }
  size_t rank = x.shape().size();
  if (rank != 4 && rank != 5)
    ctx.fail("an input of rank " + std::to_string(x.shape().size()) +
             "; ConvTranspose takes 1-D, 2-D and 3-D images (rank 3 to 5)");
  if (w.shape().size() != rank)
    ctx.fail("a filter of rank " + std::to_string(w.shape().size()) + " for an input of rank " +
             std::to_string(rank));
  size_t dims = rank - 2, given = oneD ? 1 : dims;
  // An attribute per spatial dimension; a 1-D one gains the height's.
  auto spatial = [&](const std::string &name, int64_t fill) {
    size_t count = name == "pads" ? 2 * given : given;
    std::vector<int64_t> v = perDimension(ctx, name, count, fill);
    if (oneD)
      v = name == "pads" ? std::vector<int64_t>{0, v[0], 0, v[1]}
                         : std::vector<int64_t>{name == "output_shape" ? 1 : fill, v[0]};
    return v;
  };
  std::vector<int64_t> stride = spatial("strides", 1), dilation = spatial("dilations", 1);
  std::vector<int64_t> extra = spatial("output_padding", 0);
  for (size_t i = 0; i < dims; ++i)
    if (stride[i] < 1 || dilation[i] < 1)
      ctx.fail("'strides' and 'dilations' must be at least 1");
  int64_t groups = ctx.attrInt("group", 1);
  const Shape in = x.shape(), k = w.shape();
  if (groups < 1 || in[1] != k[0] || k[0] % groups)
    ctx.fail("the filter's " + std::to_string(k[0]) + " input channels do not fit the input's " +
             std::to_string(in[1]) + " in " + std::to_string(groups) + " groups");
  int64_t outChannels = k[1] * groups;
  // Pads: given, or from output_shape / auto_pad.
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    ctx.fail("auto_pad '" + autoPad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  bool shaped = ctx.attribute("output_shape") != nullptr;
  std::vector<int64_t> wanted = shaped ? spatial("output_shape", 0) : std::vector<int64_t>{};
  std::vector<int64_t> pads = autoPad == "NOTSET" ? spatial("pads", 0)
                                                  : std::vector<int64_t>(2 * dims, 0);
  std::vector<int64_t> full(dims), begin(dims), end(dims);
  for (size_t i = 0; i < dims; ++i) {
    full[i] = stride[i] * (in[2 + i] - 1) + extra[i] + (k[2 + i] - 1) * dilation[i] + 1;
    begin[i] = pads[i];
    end[i] = pads[dims + i];
    if (shaped || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t out = shaped ? wanted[i] : in[2 + i] * stride[i];
      int64_t total = full[i] - out;
      if (total < 0) { // a larger output: the rest as output padding
        extra[i] -= total;
        full[i] -= total;
        total = 0;
      }
      begin[i] = autoPad != "SAME_LOWER" ? total / 2 : total - total / 2;
      end[i] = total - begin[i];
    }
    if (begin[i] < 0 || end[i] < 0 || begin[i] + end[i] >= full[i])
      ctx.fail("pads leave no output");
  }
  // The output padding (zeros at the end), then the cut to the pads.
  auto finish = [&](Tensor t, size_t from, size_t to) {
    std::vector<int64_t> low(t.shape().size(), 0), high(t.shape().size(), 0);
    for (size_t i = from; i < to; ++i)
      high[i + 2 - from] = extra[i];
    if (std::any_of(high.begin(), high.end(), [](int64_t v) { return v; }))
      t = kiln::pad(t, low, high);
    for (size_t i = from; i < to; ++i)
      t = t.slice(int64_t(i + 2 - from), begin[i], full[i] - end[i]);
    return t;
  };
  Tensor y = [&] {
    if (dims == 2)
      return finish(transposed2d(x, w, {stride[0], stride[1]}, {dilation[0], dilation[1]}, groups),
                    0, 2);
    // 3-D: the depths folded into the batch, one 2-D ConvTranspose per
    // depth tap, each placed at the output depths it reaches (i stride +
    // tap dilation, within the pads) by a gather that reads a slab of
    // zeros elsewhere. (Cutting the 5-D result instead took minutes to
    // compile on the CPU.)
    int64_t n = in[0], depth = in[2];
    Tensor planes = x.permute({0, 2, 1, 3, 4}).reshape({n * depth, in[1], in[3], in[4]});
    std::optional<Tensor> sum;
    for (int64_t kd = 0; kd < k[2]; ++kd) {
      Tensor part = finish(transposed2d(planes,
                                        w.slice(2, kd, kd + 1).reshape({k[0], k[1], k[3], k[4]}),
                                        {stride[1], stride[2]}, {dilation[1], dilation[2]}, groups),
                           1, 3);
      const Shape &ps = part.shape();
      part = part.reshape({n, depth, ps[1], ps[2], ps[3]});
      part = concat({part, Tensor::zeros_like(part.slice(1, 0, 1))}, 1);
      std::vector<int64_t> from;
      for (int64_t o = begin[0]; o < full[0] - end[0]; ++o) {
        int64_t r = o - kd * dilation[0];
        from.push_back(r >= 0 && r % stride[0] == 0 && r / stride[0] < depth ? r / stride[0]
                                                                              : depth);
      }
      part = index_select(part, 1, from);
      sum = sum ? *sum + part : part;
    }
    return sum->permute({0, 2, 1, 3, 4});
  }();
  if (ctx.has(2)) {
    Shape along(rank, 1);
    along[1] = outChannels;
    y = y + ctx.tensorAs(2, y).reshape(along);
  }
  if (oneD)
    y = y.reshape({y.shape()[0], y.shape()[1], y.shape()[3]});
  return single(y);
}
} // namespace

void onnx_import::addConvTransposeConverter(ConverterTable &table) {
  table["ConvTranspose"] = convTranspose;
}
