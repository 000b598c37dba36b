//===- OnnxOps.cpp - ONNX operators as Tensor API calls -------------------===//
//
// One converter per supported operator of the default domain, opsets 11 to
// 28: each reads its node by the operator's version that the opset means
// (ctx.version: ReduceMean-18 takes its axes as an input, ReduceMean-13 as
// an attribute).
// Integer values known at import (shapes, axes) are folded here instead of
// becoming kernels. What a converter cannot express exactly is an error
// naming the attribute, never an approximation.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"
#include "kiln/Import.h"

#include "dialects/Kiln/WindowRules.h"
#include "lib/Frontend/OpRecording.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
using Values = std::vector<Value>;

int64_t product(const Shape &s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i)
    n *= s[i];
  return n;
}

Values one(Tensor t) { return {Value::of(std::move(t))}; }

/// Elementwise on one input; integers known at import fold through `fold`
/// where there is one (Neg and Abs of shape arithmetic).
Converter unary(Tensor (*fn)(const Tensor &, std::source_location),
                int64_t (*fold)(int64_t) = nullptr) {
  return [fn, fold](const NodeContext &ctx) -> Values {
    const Value &x = ctx.input(0);
    if (fold && x.ints) {
      std::vector<int64_t> out(x.ints->size());
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = fold((*x.ints)[i]);
      return {Value::ofInts(std::move(out), x.shape)};
    }
    return one(fn(ctx.tensor(0), std::source_location::current()));
  };
}

/// The values `v` can hold, where known: integers known at import, a
/// boolean (0 or 1), or a bounded integer tensor.
std::optional<std::pair<int64_t, int64_t>> valueBounds(const Value &v) {
  if (v.ints && !v.ints->empty()) {
    auto [low, high] = std::minmax_element(v.ints->begin(), v.ints->end());
    return std::pair<int64_t, int64_t>{*low, *high};
  }
  if (v.tensor && v.tensor->dtype() == DType::boolean)
    return std::pair<int64_t, int64_t>{0, 1};
  return v.bounds;
}

/// Integer arithmetic at run time. Kiln computes ONNX's integers as i32
/// through f32, which is exact below 2^24: the result's values must be
/// provably inside that (each operand's bounds, `fold` at their corners:
/// Add, Sub and Mul are monotone in each operand), else it is an error.
Values integerArithmetic(const NodeContext &ctx,
                         Tensor (*fn)(const Tensor &, const Tensor &, std::source_location),
                         int64_t (*fold)(int64_t, int64_t)) {
  constexpr int64_t kExact = int64_t(1) << 24;
  auto a = valueBounds(ctx.input(0)), b = valueBounds(ctx.input(1));
  if (!a || !b)
    ctx.fail("integer arithmetic at run time on values Kiln cannot bound (input " +
                 std::to_string(a ? 1 : 0) + " comes from an integer model input or a cast from "
                 "float)",
             "Kiln computes ONNX's integers as int32 through f32, exact below 2^24, so it converts "
             "integer Add, Sub and Mul only where it can prove their values fit; compute it in "
             "float in the model, or export with the value known");
  int64_t low = INT64_MAX, high = INT64_MIN;
  for (int64_t x : {a->first, a->second})
    for (int64_t y : {b->first, b->second}) {
      int64_t v = fold(x, y);
      low = std::min(low, v);
      high = std::max(high, v);
    }
  if (low <= -kExact || high >= kExact)
    ctx.fail("integer arithmetic at run time whose values may reach " +
                 std::to_string(low <= -kExact ? low : high) +
                 ", past the 2^24 that Kiln's int32-through-f32 integers hold exactly",
             "compute it in float in the model");
  auto wide = [](const Tensor &t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); };
  Tensor y = fn(wide(ctx.tensor(0)), wide(ctx.tensor(1)), std::source_location::current());
  return {Value::ofBounded(y.to(DType::i32), low, high)};
}

/// Elementwise on two inputs; on integers known at import (shape
/// arithmetic) it folds, with numpy broadcasting of a scalar. With
/// `integers`, integer tensors at run time go through integerArithmetic.
Converter binary(Tensor (*fn)(const Tensor &, const Tensor &, std::source_location),
                 int64_t (*fold)(int64_t, int64_t), bool integers = false) {
  return [fn, fold, integers](const NodeContext &ctx) -> Values {
    const Value &a = ctx.input(0), &b = ctx.input(1);
    if (fold)
      if (std::optional<Value> folded =
              foldInts({&a, &b}, [fold](const int64_t *v) { return fold(v[0], v[1]); }))
        return {*folded};
    bool runTimeInts = (a.tensor && a.tensor->dtype() == DType::i32) ||
                       (b.tensor && b.tensor->dtype() == DType::i32);
    if (runTimeInts && integers && fold)
      return integerArithmetic(ctx, fn, fold);
    if (runTimeInts)
      ctx.fail("integer " + ctx.node.op_type() + " at run time is not converted",
               "Kiln converts integer Add, Sub and Mul at run time, where their values provably "
               "fit; compute it in float in the model");
    Tensor x = ctx.tensor(0), other = ctx.tensorAs(1, x);
    if (a.constant)
      x = ctx.tensorAs(0, other);
    return one(fn(x, other, std::source_location::current()));
  };
}

/// Axes from the attribute (before opset 13, or always for some ops) or
/// from input `input` (opset 13 on); none when neither is given.
std::optional<std::vector<int64_t>> axesOf(const NodeContext &ctx, size_t input) {
  if (ctx.has(input))
    return ctx.ints(input);
  return ctx.attrInts("axes");
}

std::vector<int64_t> normalized(const NodeContext &ctx, std::vector<int64_t> axes, int64_t rank) {
  for (int64_t &a : axes)
    a = normalizeAxis(ctx, a, rank);
  return axes;
}

/// Strides, dilations and window sizes are at least 1 (a fuzzed stride of
/// 0 divided by zero).
void positiveSizes(const NodeContext &ctx, const std::string &name, const std::vector<int64_t> &v) {
  for (int64_t x : v)
    if (x < 1 || x > (int64_t(1) << 31))
      ctx.fail("'" + name + "' holds " + std::to_string(x) + ", not a size of at least 1");
}

/// The spatial begin/end padding of a Conv or pool over input `in` (NCHW):
/// explicit `pads`, or from auto_pad.
struct Padding {
  int64_t top = 0, left = 0, bottom = 0, right = 0;
  bool symmetric() const { return top == bottom && left == right; }
};

/// (`oneD`: a 1-D window as a 2-D one of height 1, its 2 pads on the
/// width.)
Padding paddingOf(const NodeContext &ctx, const Shape &in, const std::vector<int64_t> &kernel,
                  const std::vector<int64_t> &strides, const std::vector<int64_t> &dilations,
                  bool oneD = false) {
  Padding p;
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    size_t count = oneD ? 2 : 4;
    std::vector<int64_t> pads = ctx.attrInts("pads").value_or(std::vector<int64_t>(count, 0));
    if (pads.size() != count)
      ctx.fail("'pads' must have " + std::to_string(count) + " values for a " +
               (oneD ? "1-D" : "2-D") + " window");
    for (int64_t v : pads)
      if (v < 0)
        ctx.fail("negative 'pads' are not supported");
    if (oneD)
      return {0, pads[0], 0, pads[1]};
    return {pads[0], pads[1], pads[2], pads[3]};
  }
  if (autoPad == "VALID")
    return p;
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    ctx.fail("auto_pad '" + autoPad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  int64_t begin[2], end[2];
  for (int i = 0; i < 2; ++i) {
    int64_t size = in[size_t(2 + i)], s = strides[size_t(i)];
    int64_t out = (size + s - 1) / s;
    int64_t total = std::max<int64_t>(0, (out - 1) * s + (kernel[size_t(i)] - 1) * dilations[size_t(i)] + 1 - size);
    begin[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    end[i] = total - begin[i];
  }
  return {begin[0], begin[1], end[0], end[1]};
}

std::vector<int64_t> pairAttr(const NodeContext &ctx, const std::string &name, int64_t otherwise) {
  std::vector<int64_t> v = ctx.attrInts(name).value_or(std::vector<int64_t>{otherwise, otherwise});
  if (v.size() != 2)
    ctx.fail("'" + name + "' must have 2 values", "only 2-D (NCHW) windows are supported");
  positiveSizes(ctx, name, v);
  return v;
}

void requireRank4(const NodeContext &ctx, const Tensor &x) {
  if (x.shape().size() != 4)
    ctx.fail("input of rank " + std::to_string(x.shape().size()) + ": only 2-D (NCHW) inputs are "
                                                                  "supported");
}

} // namespace

Tensor onnx_import::convolution(const NodeContext &ctx, Tensor x, const Tensor &wIn) {
  if (x.shape().size() == 5)
    return convolution3d(ctx, x, wIn);
  // A 1-D convolution (NCL) is a 2-D one of height 1.
  bool oneD = x.shape().size() == 3 && wIn.shape().size() == 3;
  Tensor w = wIn;
  if (oneD) {
    x = x.reshape({x.shape()[0], x.shape()[1], 1, x.shape()[2]});
    w = w.reshape({w.shape()[0], w.shape()[1], 1, w.shape()[2]});
  }
  requireRank4(ctx, x);
  if (w.shape().size() != 4)
    ctx.fail("the filter must have rank 4 (OIHW)");
  std::vector<int64_t> kernel = {w.shape()[2], w.shape()[3]};
  std::vector<int64_t> given = oneD ? std::vector<int64_t>{kernel[1]} : kernel;
  if (auto attr = ctx.attrInts("kernel_shape"); attr && *attr != given)
    ctx.fail("'kernel_shape' disagrees with the filter's shape");
  auto sizes = [&](const char *name) {
    if (!oneD)
      return pairAttr(ctx, name, 1);
    std::vector<int64_t> v = ctx.attrInts(name).value_or(std::vector<int64_t>{1});
    if (v.size() != 1)
      ctx.fail(std::string("'") + name + "' must have 1 value for a 1-D input");
    positiveSizes(ctx, name, v);
    return std::vector<int64_t>{1, v[0]};
  };
  std::vector<int64_t> strides = sizes("strides"), dil = sizes("dilations");
  Padding p = paddingOf(ctx, x.shape(), kernel, strides, dil, oneD);
  if (!p.symmetric()) {
    x = kiln::pad(x, {0, 0, p.top, p.left}, {0, 0, p.bottom, p.right});
    p = {};
  }
  Tensor y = conv2d(x, w, {strides[0], strides[1]}, {p.top, p.left}, {dil[0], dil[1]},
                    ctx.attrInt("group", 1));
  if (oneD)
    y = y.reshape({y.shape()[0], y.shape()[1], y.shape()[3]});
  return y;
}

namespace {
/// Whether a 16-bit float input meets f32 weights written in the model (an
/// exporter's batch norm folded in f32 beside bf16 activations): the op
/// then computes in f32, as its weights were written, and rounds once.
bool widensToWeights(const NodeContext &ctx, const Tensor &x, size_t weight) {
  const Value &w = ctx.input(weight);
  return (x.dtype() == DType::f16 || x.dtype() == DType::bf16) && w.constant && w.tensor &&
         w.tensor->dtype() == DType::f32;
}

Values conv(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const DType given = x.dtype();
  bool wide = widensToWeights(ctx, x, 1);
  if (wide)
    x = x.to(DType::f32);
  Tensor w = ctx.tensorAs(1, x);
  Tensor y = convolution(ctx, x, w);
  if (ctx.has(2)) {
    Shape along(y.shape().size(), 1);
    along[1] = w.shape()[0];
    y = y + ctx.tensorAs(2, y).reshape(along);
  }
  return one(wide ? y.to(given) : y);
}

/// 3-D pooling ([N, C, D, H, W]) as 2-D pooling of each window depth's
/// slices, combined: the largest, or the sum over the count of elements
/// inside (count_include_pad = 0) or over the window (1). Explicit pads,
/// no dilation, no ceil_mode.
Values pool3d(const NodeContext &ctx, bool isMax, Tensor x, bool includePad) {
  const Shape in = x.shape();
  std::optional<std::vector<int64_t>> kernel = ctx.attrInts("kernel_shape");
  if (!kernel || kernel->size() != 3)
    ctx.fail("'kernel_shape' must give 3 sizes for a 3-D input");
  positiveSizes(ctx, "kernel_shape", *kernel);
  std::vector<int64_t> strides = ctx.attrInts("strides").value_or(std::vector<int64_t>(3, 1));
  std::vector<int64_t> pads = ctx.attrInts("pads").value_or(std::vector<int64_t>(6, 0));
  std::vector<int64_t> dil = ctx.attrInts("dilations").value_or(std::vector<int64_t>(3, 1));
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  if (strides.size() != 3 || pads.size() != 6 || dil.size() != 3)
    ctx.fail("'strides' and 'dilations' must give 3 sizes and 'pads' 6 for a 3-D input");
  positiveSizes(ctx, "strides", strides);
  if (ctx.node.output_size() > 1 && !ctx.node.output(1).empty())
    ctx.fail("the Indices output of a 3-D MaxPool is not supported");
  if (dil != std::vector<int64_t>(3, 1) || ctx.attrInt("ceil_mode", 0) ||
      (autoPad != "NOTSET" && autoPad != "VALID"))
    return one(poolByTaps(ctx, isMax, x, includePad));
  if (autoPad == "VALID")
    pads.assign(6, 0);
  float fill = isMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  auto padded = [&](const Tensor &t) {
    return kiln::pad(t, {0, 0, pads[0], pads[1], pads[2]}, {0, 0, pads[3], pads[4], pads[5]},
                     fill);
  };
  Tensor xp = padded(x);
  int64_t out[3];
  for (int i = 0; i < 3; ++i) {
    out[i] = (xp.shape()[size_t(2 + i)] - (*kernel)[size_t(i)]) / strides[size_t(i)] + 1;
    if (out[i] < 1)
      ctx.fail("the window is larger than the padded input");
  }
  // Per window depth: the slices it reads, pooled as images.
  auto combined = [&](const Tensor &t) {
    std::optional<Tensor> y;
    for (int64_t kd = 0; kd < (*kernel)[0]; ++kd) {
      std::vector<int64_t> depths;
      for (int64_t d = 0; d < out[0]; ++d)
        depths.push_back(d * strides[0] + kd);
      Tensor s = index_select(t, 2, depths);
      Shape flat = {s.shape()[0], s.shape()[1] * out[0], s.shape()[3], s.shape()[4]};
      std::array<int64_t, 2> k2 = {(*kernel)[1], (*kernel)[2]}, s2 = {strides[1], strides[2]};
      Tensor p = isMax ? max_pool2d(s.reshape(flat), k2, s2)
                       : avg_pool2d(s.reshape(flat), k2, s2) * float(k2[0] * k2[1]);
      p = p.reshape({s.shape()[0], s.shape()[1], out[0], out[1], out[2]});
      y = !y ? p : isMax ? maximum(*y, p) : *y + p;
    }
    return *y;
  };
  Tensor y = combined(xp);
  if (isMax)
    return one(y);
  if (includePad || ctx.attrInt("count_include_pad", 0))
    return one(y / float((*kernel)[0] * (*kernel)[1] * (*kernel)[2]));
  Tensor ones = Tensor::full({1, 1, in[2], in[3], in[4]}, 1.0f);
  return one(y / combined(padded(ones)));
}

/// MaxPool and AveragePool of input 0, or of `input` (LpPool's |x|^p);
/// `includePad` counts the padding in every average.
Values pool(const NodeContext &ctx, bool isMax, std::optional<Tensor> input = {},
            bool includePad = false) {
  Tensor x = input ? *input : ctx.tensor(0);
  const Tensor original = x;
  if (x.shape().size() == 5)
    return pool3d(ctx, isMax, x, includePad);
  // 1-D pooling ([N, C, L]) is 2-D pooling of [N, C, 1, L].
  bool oneD = x.shape().size() == 3;
  if (oneD)
    x = x.reshape({x.shape()[0], x.shape()[1], 1, x.shape()[2]});
  requireRank4(ctx, x);
  auto attr2 = [&](const std::string &name, int64_t otherwise, int64_t first) {
    std::optional<std::vector<int64_t>> v = ctx.attrInts(name);
    if (oneD && v && v->size() == 1)
      v->insert(v->begin(), first);
    if (oneD && v && v->size() == 2 && name == "pads")
      v = std::vector<int64_t>{0, (*v)[0], 0, (*v)[1]};
    return v ? *v : std::vector<int64_t>(name == "pads" ? 4 : 2, otherwise);
  };
  std::optional<std::vector<int64_t>> kernel = ctx.attrInts("kernel_shape");
  if (oneD && kernel && kernel->size() != 1)
    ctx.fail("'kernel_shape' must give 1 size for a 1-D input");
  if (oneD && kernel)
    kernel->insert(kernel->begin(), 1);
  if (!kernel || kernel->size() != 2)
    ctx.fail("'kernel_shape' must give 2 sizes");
  positiveSizes(ctx, "kernel_shape", *kernel);
  std::vector<int64_t> strides = oneD ? attr2("strides", 1, 1) : pairAttr(ctx, "strides", 1);
  std::vector<int64_t> dil = oneD ? attr2("dilations", 1, 1) : pairAttr(ctx, "dilations", 1);
  // (A fuzzed MaxPool with an empty 'strides' list read past it.)
  if (strides.size() != 2 || dil.size() != 2)
    ctx.fail(std::string("'strides' and 'dilations' must give ") +
             (oneD ? "1 size each for a 1-D input" : "2 sizes each"));
  positiveSizes(ctx, "strides", strides);
  positiveSizes(ctx, "dilations", dil);
  bool dilated = dil != std::vector<int64_t>{1, 1};
  if (dilated && !isMax)
    return one(poolByTaps(ctx, false, original, includePad));
  const bool wantIndices = isMax && ctx.node.output_size() > 1 && !ctx.node.output(1).empty();
  if (wantIndices && x.numel() > (int64_t(1) << 24))
    ctx.fail("MaxPool's Indices output is supported up to 2^24 input elements (the indices are "
             "computed exactly in f32)");
  Padding p;
  if (oneD && ctx.attrString("auto_pad", "NOTSET") == "NOTSET") {
    std::vector<int64_t> pads = attr2("pads", 0, 0);
    if (pads.size() != 4)
      ctx.fail("'pads' must have 2 values for a 1-D window");
    p = {pads[0], pads[1], pads[2], pads[3]};
  } else {
    p = paddingOf(ctx, x.shape(), *kernel, strides, dil);
  }
  auto finish = [&](Tensor y) {
    return one(oneD ? y.reshape({y.shape()[0], y.shape()[1], y.shape()[3]}) : y);
  };
  std::array<int64_t, 2> k2 = {(*kernel)[0], (*kernel)[1]}, s2 = {strides[0], strides[1]};
  bool ceilMode = ctx.attrInt("ceil_mode", 0) != 0;
  // Max pooling takes ceil_mode itself when its padding is the op's own
  // (symmetric, at most half the window): one kernel, no padded copy.
  if (isMax && ceilMode && !dilated && !wantIndices && p.symmetric() && p.top <= k2[0] / 2 &&
      p.left <= k2[1] / 2)
    return finish(max_pool2d(x, k2, s2, {p.top, p.left}, true));
  bool ceilExtra = false;
  // ceil_mode: one more window where a partial one starts inside the image
  // or the leading padding (PyTorch's and ONNX's rule), made by padding the
  // end further.
  if (ceilMode) {
    int64_t *ends[2] = {&p.bottom, &p.right};
    int64_t begins[2] = {p.top, p.left};
    for (int i = 0; i < 2; ++i) {
      int64_t in = x.shape()[size_t(2 + i)], s = strides[size_t(i)];
      int64_t k = ((*kernel)[size_t(i)] - 1) * dil[size_t(i)] + 1; // the dilated window
      int64_t out = windowCount(in, k, s, begins[i], *ends[i], /*ceilMode=*/true);
      int64_t extra = std::max<int64_t>(0, (out - 1) * s + k - (in + begins[i] + *ends[i]));
      *ends[i] += extra;
      ceilExtra = ceilExtra || extra > 0;
    }
  }
  // The pooling ops take symmetric padding of at most half the window;
  // other padding is made explicit first.
  bool direct = p.symmetric() && p.top <= k2[0] / 2 && p.left <= k2[1] / 2;
  if (isMax && (dilated || wantIndices)) {
    // Each tap of the (dilated) window is a strided pick of the padded
    // image; the result is the largest of the taps, the first one on ties,
    // and with Indices its flat position in the input (row-major, or
    // column-major within each image plane for storage_order 1).
    Tensor xp = kiln::pad(x, {0, 0, p.top, p.left}, {0, 0, p.bottom, p.right},
                          -std::numeric_limits<float>::infinity());
    int64_t spans[2], outs[2];
    for (int i = 0; i < 2; ++i) {
      spans[i] = (k2[size_t(i)] - 1) * dil[size_t(i)] + 1;
      outs[i] = (xp.shape()[size_t(2 + i)] - spans[i]) / s2[size_t(i)] + 1;
      if (outs[i] < 1)
        ctx.fail("the dilated window is larger than the padded input");
    }
    const int64_t H = x.shape()[2], W = x.shape()[3];
    const bool columnMajor = ctx.attrInt("storage_order", 0) != 0;
    std::optional<Tensor> y, at;
    for (int64_t a = 0; a < k2[0]; ++a) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < outs[0]; ++i)
        rows.push_back(a * dil[0] + i * s2[0]);
      Tensor picked = index_select(xp, 2, rows);
      for (int64_t b = 0; b < k2[1]; ++b) {
        std::vector<int64_t> cols;
        for (int64_t j = 0; j < outs[1]; ++j)
          cols.push_back(b * dil[1] + j * s2[1]);
        Tensor tap = index_select(picked, 3, cols);
        if (!wantIndices) {
          y = y ? maximum(*y, tap) : tap;
          continue;
        }
        // This tap's position in its image plane, per output (padding
        // never wins: it reads -inf).
        std::vector<float> position;
        for (int64_t i = 0; i < outs[0]; ++i)
          for (int64_t j = 0; j < outs[1]; ++j) {
            int64_t h = rows[size_t(i)] - p.top, w = cols[size_t(j)] - p.left;
            position.push_back(float(columnMajor ? w * H + h : h * W + w));
          }
        Tensor tapAt = Tensor::from(std::move(position), {1, 1, outs[0], outs[1]});
        if (!y) {
          y = tap;
          at = tapAt;
          continue;
        }
        Tensor better = gt(tap, *y);
        y = where(better, tap, *y);
        at = where(better, tapAt, *at);
      }
    }
    if (wantIndices) {
      // Plus the plane's offset: (n C + c) H W.
      int64_t planes = x.shape()[0] * x.shape()[1];
      std::vector<float> offsets;
      for (int64_t q = 0; q < planes; ++q)
        offsets.push_back(float(q * H * W));
      Tensor index = (*at + Tensor::from(std::move(offsets), {x.shape()[0], x.shape()[1], 1, 1}))
                         .to(DType::i32);
      Values out = finish(*y);
      out.push_back(finish(index)[0]);
      return out;
    }
    return finish(*y);
  }
  if (isMax) {
    if (!direct) {
      x = kiln::pad(x, {0, 0, p.top, p.left}, {0, 0, p.bottom, p.right},
                    -std::numeric_limits<float>::infinity());
      p = {};
    }
    return finish(max_pool2d(x, k2, s2, {p.top, p.left}));
  }
  bool countPad = includePad || ctx.attrInt("count_include_pad", 0) != 0;
  if (direct && (countPad || (!p.top && !p.left)))
    return finish(avg_pool2d(x, k2, s2, {p.top, p.left}));
  auto padded = [&](const Tensor &t) {
    return kiln::pad(t, {0, 0, p.top, p.left}, {0, 0, p.bottom, p.right});
  };
  if (countPad) {
    if (ceilExtra)
      ctx.fail("count_include_pad = 1 with ceil_mode is not supported");
    return finish(avg_pool2d(padded(x), k2, s2)); // the padding's zeros count
  }
  // Divide each window's sum by its elements inside the image.
  Tensor ones = Tensor::full({1, 1, x.shape()[2], x.shape()[3]}, 1.0f);
  return finish(avg_pool2d(padded(x), k2, s2) / avg_pool2d(padded(ones), k2, s2));
}

Values gemm(const NodeContext &ctx) {
  Tensor a = ctx.tensor(0);
  const DType given = a.dtype();
  bool wide = widensToWeights(ctx, a, 1);
  if (wide)
    a = a.to(DType::f32);
  Tensor b = ctx.tensorAs(1, a);
  if (a.shape().size() != 2 || b.shape().size() != 2)
    ctx.fail("Gemm takes rank-2 A and B");
  if (ctx.attrInt("transA", 0))
    a = a.transpose(0, 1);
  if (ctx.attrInt("transB", 0))
    b = b.transpose(0, 1);
  Tensor y = matmul(a, b);
  float alpha = ctx.attrFloat("alpha", 1.0f), beta = ctx.attrFloat("beta", 1.0f);
  if (alpha != 1.0f)
    y = y * scalarLike(y, alpha);
  if (ctx.has(2))
    y = y + (beta == 1.0f ? ctx.tensorAs(2, y) : ctx.tensorAs(2, y) * scalarLike(y, beta));
  return one(wide ? y.to(given) : y);
}

} // namespace

Tensor onnx_import::matrixProduct(Tensor a, Tensor b) {
  bool vecA = a.shape().size() == 1, vecB = b.shape().size() == 1;
  if (vecA)
    a = a.reshape({1, a.shape()[0]});
  if (vecB)
    b = b.reshape({b.shape()[0], 1});
  Tensor y = matmul(a, b);
  Shape s = y.shape();
  if (vecB)
    s.pop_back();
  if (vecA)
    s.erase(s.end() - (vecB ? 1 : 2));
  return s == y.shape() ? y : y.reshape(s);
}

namespace {
Values matMul(const NodeContext &ctx) {
  Tensor a = ctx.tensor(0);
  return one(matrixProduct(a, ctx.tensorAs(1, a)));
}

Values reshape(const NodeContext &ctx) {
  const Value &x = ctx.input(0);
  std::vector<int64_t> spec = ctx.ints(1);
  bool allowZero = ctx.attrInt("allowzero", 0) != 0;
  Shape out;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowZero) {
      if (i >= x.shape.size())
        ctx.fail("shape entry 0 copies dimension " + std::to_string(i) + ", which the input lacks");
      d = x.shape[i];
    }
    if (d == -1) {
      if (infer >= 0)
        ctx.fail("the shape has two -1 entries");
      infer = int64_t(i);
      out.push_back(1);
      continue;
    }
    if (d < 0)
      ctx.fail("shape entry " + std::to_string(d) + " is not a size");
    out.push_back(d);
    known *= d;
  }
  int64_t total = product(x.shape);
  if (infer >= 0) {
    if (known == 0 || total % known)
      ctx.fail("cannot infer the -1 entry: " + std::to_string(total) + " elements");
    out[size_t(infer)] = total / known;
  }
  checkedElements(out, ctx.where() + ": the new shape");
  if (product(out) != total)
    ctx.fail("the new shape holds " + std::to_string(product(out)) + " elements, the input " +
             std::to_string(total));
  if (x.ints)
    return {Value::ofInts(*x.ints, out)};
  return one(x.tensor->reshape(out));
}

Values flatten(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  int64_t rank = int64_t(x.shape().size());
  int64_t axis = ctx.attrInt("axis", 1);
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis > rank)
    ctx.fail("axis " + std::to_string(axis) + " is outside 0.." + std::to_string(rank));
  return one(x.reshape({product(x.shape(), 0, size_t(axis)), product(x.shape(), size_t(axis))}));
}

Values transpose(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  size_t rank = x.shape().size();
  std::vector<int64_t> perm(rank);
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (auto given = ctx.attrInts("perm"))
    perm = *given;
  if (perm.size() != rank)
    ctx.fail("'perm' has " + std::to_string(perm.size()) + " entries for a rank-" +
             std::to_string(rank) + " input");
  return one(x.permute(perm));
}

Values squeeze(const NodeContext &ctx) {
  const Value &x = ctx.input(0);
  int64_t rank = int64_t(x.shape.size());
  std::optional<std::vector<int64_t>> axes = axesOf(ctx, 1);
  std::vector<bool> drop(size_t(rank), false);
  if (axes) {
    for (int64_t a : normalized(ctx, *axes, rank)) {
      if (x.shape[size_t(a)] != 1)
        ctx.fail("axis " + std::to_string(a) + " has size " + std::to_string(x.shape[size_t(a)]) +
                 ", not 1");
      drop[size_t(a)] = true;
    }
  } else {
    for (int64_t a = 0; a < rank; ++a)
      drop[size_t(a)] = x.shape[size_t(a)] == 1;
  }
  Shape out;
  for (int64_t a = 0; a < rank; ++a)
    if (!drop[size_t(a)])
      out.push_back(x.shape[size_t(a)]);
  if (x.ints)
    return {Value::ofInts(*x.ints, out)};
  return one(x.tensor->reshape(out));
}

Values unsqueeze(const NodeContext &ctx) {
  const Value &x = ctx.input(0);
  std::optional<std::vector<int64_t>> axes = axesOf(ctx, 1);
  if (!axes)
    ctx.fail("no axes given");
  int64_t rank = int64_t(x.shape.size() + axes->size());
  std::vector<int64_t> at = normalized(ctx, *axes, rank);
  std::vector<bool> inserted(size_t(rank), false);
  for (int64_t a : at)
    inserted[size_t(a)] = true;
  Shape out;
  size_t next = 0;
  for (int64_t a = 0; a < rank; ++a)
    out.push_back(inserted[size_t(a)] ? 1 : x.shape[next++]);
  if (x.ints)
    return {Value::ofInts(*x.ints, out)};
  return one(x.tensor->reshape(out));
}

Values concatOp(const NodeContext &ctx) {
  int64_t rank = int64_t(ctx.input(0).shape.size());
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), rank);
  bool allInts = true;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    allInts = allInts && ctx.input(i).ints;
  if (allInts && rank == 1) {
    std::vector<int64_t> out;
    for (size_t i = 0; i < ctx.numInputs(); ++i)
      out.insert(out.end(), ctx.input(i).ints->begin(), ctx.input(i).ints->end());
    int64_t n = int64_t(out.size());
    return {Value::ofInts(std::move(out), {n})};
  }
  std::vector<Tensor> parts;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    parts.push_back(ctx.tensor(i));
  return one(concat(parts, axis));
}

/// Gather with indices the model computes or takes as an input (token ids
/// into an embedding): index_select along `axis` of the flattened indices,
/// negative ones counting from the end (exact in f32 below 2^24).
Values gatherAtRunTime(const NodeContext &ctx) {
  Tensor data = ctx.tensor(0), indices = ctx.tensor(1);
  const Shape &shape = data.shape();
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), int64_t(shape.size()));
  int64_t size = shape[size_t(axis)];
  if (indices.dtype() != DType::i32)
    ctx.fail("indices of type " + std::string(dtype_name(indices.dtype())) + "; ONNX's are integers");
  if (size >= (int64_t(1) << 24))
    ctx.fail("an axis of " + std::to_string(size) + " entries; Kiln gathers at run time from axes "
             "below 2^24");
  // Ids the model takes as an input are checked before each run (ONNX
  // counts negative ones from the end); computed ones are clamped.
  detail::restrictValues(indices, -size, size,
                         "the " + std::to_string(size) + " entries of axis " +
                             std::to_string(axis) + " of " + ctx.where(),
                         std::source_location::current());
  Tensor f = indices.to(DType::f32).reshape({indices.numel()});
  Tensor flat = where(lt(f, Tensor::scalar(0.0f)), f + Tensor::scalar(float(size)), f).to(DType::i32);
  Shape out(shape.begin(), shape.begin() + axis);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), shape.begin() + axis + 1, shape.end());
  Tensor y = index_select(data, axis, flat);
  return one(y.shape() == out ? y : y.reshape(out));
}

Values gather(const NodeContext &ctx) {
  const Value &data = ctx.input(0);
  if (!ctx.input(1).ints)
    return gatherAtRunTime(ctx);
  const std::vector<int64_t> &indices = ctx.ints(1);
  const Shape &indexShape = ctx.input(1).shape;
  int64_t rank = int64_t(data.shape.size());
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), rank);
  int64_t size = data.shape[size_t(axis)];
  std::vector<int64_t> picked;
  for (int64_t i : indices) {
    int64_t j = i < 0 ? i + size : i;
    if (j < 0 || j >= size)
      ctx.fail("index " + std::to_string(i) + " is outside the " + std::to_string(size) +
               " entries of axis " + std::to_string(axis));
    picked.push_back(j);
  }
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), indexShape.begin(), indexShape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (data.ints) {
    int64_t inner = product(data.shape, size_t(axis) + 1), outer = product(data.shape, 0, size_t(axis));
    std::vector<int64_t> result;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j : picked)
        for (int64_t k = 0; k < inner; ++k)
          result.push_back((*data.ints)[size_t((o * size + j) * inner + k)]);
    return {Value::ofInts(std::move(result), out)};
  }
  Tensor y = index_select(*data.tensor, axis, picked);
  return one(y.shape() == out ? y : y.reshape(out));
}

Values shapeOp(const NodeContext &ctx) {
  const Shape &s = ctx.input(0).shape;
  int64_t rank = int64_t(s.size());
  int64_t start = ctx.attrInt("start", 0), end = ctx.attrInt("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<int64_t> dims(s.begin() + start, s.begin() + std::max(start, end));
  int64_t n = int64_t(dims.size());
  return {Value::ofInts(std::move(dims), {n})};
}

Values constant(const NodeContext &ctx) {
  if (const onnx::AttributeProto *a = ctx.attribute("value"))
    return {valueOfTensorProto(a->t(), ctx.where() + ": 'value'")};
  if (const onnx::AttributeProto *a = ctx.attribute("value_float"))
    return {Value::ofConstant(Tensor::full({}, a->f()))};
  if (const onnx::AttributeProto *a = ctx.attribute("value_floats"))
    return {Value::ofConstant(Tensor::from(
        std::vector<float>(a->floats().begin(), a->floats().end()), {int64_t(a->floats_size())}))};
  if (const onnx::AttributeProto *a = ctx.attribute("value_int"))
    return {Value::ofInts({a->i()}, {})};
  if (const onnx::AttributeProto *a = ctx.attribute("value_ints"))
    return {Value::ofInts(std::vector<int64_t>(a->ints().begin(), a->ints().end()),
                          {int64_t(a->ints_size())})};
  ctx.fail("no value attribute Kiln reads (value, value_float(s), value_int(s))");
}

Values constantOfShape(const NodeContext &ctx) {
  Shape shape = ctx.ints(0);
  int64_t elements = checkedElements(shape, ctx.where());
  Value fill = Value::of(Tensor::scalar(0.0f));
  if (const onnx::AttributeProto *a = ctx.attribute("value"))
    fill = valueOfTensorProto(a->t(), ctx.where() + ": 'value'");
  if ((fill.ints ? fill.ints->size() : size_t(checkedElements(fill.shape, ctx.where()))) != 1)
    ctx.fail("'value' must hold one element");
  if (fill.ints) {
    if (elements > (int64_t(1) << 24))
      ctx.fail("an integer tensor of " + std::to_string(elements) +
               " elements is too large to fold at import");
    return {Value::ofInts(std::vector<int64_t>(size_t(elements), fill.ints->at(0)), shape)};
  }
  std::vector<float> one = fill.tensor->to_vector<float>(); // an attribute: known at import
  return {Value::ofConstant(Tensor::full(shape, one.at(0)))};
}

Values cast(const NodeContext &ctx) {
  return castValue(ctx, ctx.input(0), int(ctx.attrInt("to", 0)), ctx.attrInt("saturate", 1) != 0);
}

Values slice(const NodeContext &ctx) {
  const Value &x = ctx.input(0);
  std::vector<int64_t> starts = ctx.ints(1), ends = ctx.ints(2);
  int64_t rank = int64_t(x.shape.size());
  std::vector<int64_t> axes(starts.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (ctx.has(3))
    axes = normalized(ctx, ctx.ints(3), rank);
  std::vector<int64_t> steps(starts.size(), 1);
  if (ctx.has(4))
    steps = ctx.ints(4);
  if (axes.size() != starts.size() || ends.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("starts, ends, axes and steps differ in length");
  Value out = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t size = out.shape[size_t(axes[i])], step = steps[i];
    if (step == 0)
      ctx.fail("a step of 0");
    if (step != 1) {
      // Any other step picks its indices: ONNX's clamping rules, then
      // start, start + step, ... short of end.
      auto clampIndex = [&](int64_t v, int64_t lo, int64_t hi) {
        return std::clamp<int64_t>(v < 0 ? v + size : v, lo, hi);
      };
      int64_t b = step > 0 ? clampIndex(starts[i], 0, size) : clampIndex(starts[i], -1, size - 1);
      int64_t e = step > 0 ? clampIndex(ends[i], 0, size) : clampIndex(ends[i], -1, size - 1);
      if (step < 0 && ends[i] < -size)
        e = -1;
      std::vector<int64_t> picked;
      for (int64_t j = b; step > 0 ? j < e : j > e; j += step)
        picked.push_back(j);
      if (picked.empty() || out.ints)
        ctx.fail("a step other than 1 on integers known at import, or selecting nothing, is not "
                 "supported");
      out = Value::of(index_select(*out.tensor, axes[i], picked));
      continue;
    }
    auto clampIndex = [&](int64_t v) {
      return std::clamp<int64_t>(v < 0 ? v + size : v, 0, size);
    };
    int64_t b = clampIndex(starts[i]), e = std::max(b, clampIndex(ends[i]));
    if (out.ints) {
      if (rank != 1)
        ctx.fail("slicing integers known at import is supported on rank 1 only");
      std::vector<int64_t> part(out.ints->begin() + b, out.ints->begin() + e);
      out = Value::ofInts(std::move(part), {e - b});
    } else {
      out = Value::of(out.tensor->slice(axes[i], b, e));
    }
  }
  return {out};
}

Values padOp(const NodeContext &ctx) {
  std::string mode = ctx.attrString("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
    ctx.fail("pad mode '" + mode + "' is not one of constant, edge, reflect, wrap");
  Tensor x = ctx.tensor(0);
  std::vector<int64_t> pads = ctx.has(1) ? ctx.ints(1) : ctx.attrInts("pads").value_or(std::vector<int64_t>{});
  size_t rank = x.shape().size();
  if (ctx.has(3)) {
    // Pad-18: the pads of the axes named, the others none.
    std::vector<int64_t> axes = normalized(ctx, ctx.ints(3), int64_t(rank));
    if (pads.size() != 2 * axes.size())
      ctx.fail("'pads' has " + std::to_string(pads.size()) + " values for " +
               std::to_string(axes.size()) + " axes");
    std::vector<int64_t> all(2 * rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      all[size_t(axes[i])] = pads[i];
      all[rank + size_t(axes[i])] = pads[axes.size() + i];
    }
    pads = std::move(all);
  }
  if (pads.size() != 2 * rank)
    ctx.fail("'pads' has " + std::to_string(pads.size()) + " values for a rank-" +
             std::to_string(rank) + " input");
  for (int64_t v : pads)
    if (v < 0)
      ctx.fail("negative pads are not supported");
  std::vector<int64_t> low(pads.begin(), pads.begin() + rank), high(pads.begin() + rank, pads.end());
  if (mode != "constant") {
    // Each padded axis gathers its source indices: repeated (edge) or
    // mirrored without the border (reflect).
    for (size_t d = 0; d < rank; ++d) {
      if (!low[d] && !high[d])
        continue;
      int64_t n = x.shape()[d];
      if (mode == "reflect" && (n < 2 || low[d] >= n || high[d] >= n))
        ctx.fail("reflect padding of " + std::to_string(std::max(low[d], high[d])) +
                 " on an axis of " + std::to_string(n));
      std::vector<int64_t> picked;
      for (int64_t i = -low[d]; i < n + high[d]; ++i) {
        int64_t j = i;
        if (mode == "edge")
          j = std::clamp<int64_t>(i, 0, n - 1);
        else if (mode == "wrap") // (Pad-19)
          j = ((i % n) + n) % n;
        else if (i < 0)
          j = -i;
        else if (i >= n)
          j = 2 * (n - 1) - i;
        picked.push_back(j);
      }
      x = index_select(x, int64_t(d), picked);
    }
    return one(x);
  }
  const Value *given = ctx.has(2) ? &ctx.input(2) : nullptr;
  if (!given || given->ints || given->constant) {
    std::vector<float> value = given ? ctx.constantFloats(2) : std::vector<float>{0.0f};
    if (value.size() != 1)
      ctx.fail("the constant value must be one number");
    return one(kiln::pad(x, low, high, value[0]));
  }
  // A value the model takes at run time, selected where the padding is (a
  // product would turn an -inf value into 0 * -inf = NaN inside).
  Tensor inside = gt(kiln::pad(Tensor::full(x.shape(), 1.0f), low, high), Tensor::scalar(0.0f));
  Tensor value = ctx.tensor(2).reshape({});
  if (value.dtype() != x.dtype())
    value = value.to(x.dtype());
  return one(where(inside, kiln::pad(x, low, high), value));
}

Values softmaxOp(const NodeContext &ctx, bool log) {
  Tensor x = ctx.tensor(0);
  int64_t rank = int64_t(x.shape().size());
  auto apply = [&](const Tensor &t, int64_t axis) { return log ? log_softmax(t, axis) : softmax(t, axis); };
  if (ctx.version >= 13)
    return one(apply(x, normalizeAxis(ctx, ctx.attrInt("axis", -1), rank)));
  // Before opset 13: over the flattened dimensions from `axis` on.
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 1), rank);
  if (axis == rank - 1)
    return one(apply(x, axis));
  Tensor flat = x.reshape({product(x.shape(), 0, size_t(axis)), product(x.shape(), size_t(axis))});
  return one(apply(flat, 1).reshape(x.shape()));
}

Values clip(const NodeContext &ctx) {
  Tensor y = ctx.tensor(0);
  if (ctx.version < 11) {
    y = maximum(y, scalarLike(y, ctx.attrFloat("min", -std::numeric_limits<float>::infinity())));
    return one(minimum(y, scalarLike(y, ctx.attrFloat("max", std::numeric_limits<float>::infinity()))));
  }
  if (ctx.has(1))
    y = maximum(y, ctx.tensor(1));
  if (ctx.has(2))
    y = minimum(y, ctx.tensor(2));
  return one(y);
}

Values hardSigmoid(const Tensor &x, float alpha, float beta) {
  Tensor y = x * scalarLike(x, alpha) + scalarLike(x, beta);
  return one(minimum(maximum(y, scalarLike(x, 0.0f)), scalarLike(x, 1.0f)));
}

Values batchNorm(const NodeContext &ctx) {
  if (ctx.attrInt("training_mode", 0))
    ctx.fail("training_mode = 1 is not supported", "export the model in eval() mode");
  for (int i = 1; i < ctx.node.output_size(); ++i)
    if (!ctx.node.output(i).empty())
      ctx.fail("the running-statistics outputs are training outputs", "export in eval() mode");
  return one(batch_norm(ctx.tensor(0), ctx.tensor(3), ctx.tensor(4), ctx.tensor(1), ctx.tensor(2),
                        ctx.attrFloat("epsilon", 1e-5f)));
}

Values layerNorm(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const Shape shape = x.shape();
  int64_t rank = int64_t(shape.size());
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", -1), rank);
  float eps = ctx.attrFloat("epsilon", 1e-5f);
  // Normalized over the axes from `axis` on: seen as rows x columns.
  int64_t rows = product(shape, 0, size_t(axis)), cols = product(shape, size_t(axis));
  Tensor flat = x.reshape({rows, cols});
  Tensor scale = ctx.tensor(1).broadcast_to(Shape(shape.begin() + axis, shape.end())).reshape({cols});
  Tensor bias = ctx.has(2) ? ctx.tensor(2).broadcast_to(Shape(shape.begin() + axis, shape.end())).reshape({cols})
                           : Tensor::zeros({cols});
  Values out = one(layer_norm(flat, scale, bias, eps).reshape(shape));
  // Mean and 1 / std, of the input's shape with the normalized axes 1.
  if (ctx.node.output_size() > 1) {
    Shape kept(shape.begin(), shape.begin() + axis);
    kept.resize(size_t(rank), 1);
    Tensor m = mean(flat, {1}, true);
    out.push_back(Value::of(m.reshape(kept)));
    Tensor centered = flat - m;
    Tensor inv = rsqrt(mean(centered * centered, {1}, true) + scalarLike(centered, eps));
    out.push_back(Value::of(inv.reshape(kept)));
  }
  return out;
}

/// RMSNormalization-23: x / sqrt(mean(x^2) + epsilon) * scale over the
/// axes from `axis` on, computed in f32 (stash_type 1) for any input.
Values rmsNorm(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  int64_t rank = int64_t(x.shape().size());
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", -1), rank);
  if (ctx.attrInt("stash_type", 1) != 1)
    ctx.fail("stash_type other than 1 (float) is not supported");
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d)
    axes.push_back(d);
  Tensor wide = x.dtype() == DType::f32 ? x : x.to(DType::f32);
  Tensor y = wide * rsqrt(mean(wide * wide, axes, true) +
                          Tensor::scalar(ctx.attrFloat("epsilon", 1e-5f)));
  if (y.dtype() != x.dtype())
    y = y.to(x.dtype());
  return one(y * ctx.tensor(1));
}

Values split(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  int64_t rank = int64_t(x.shape().size());
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), rank);
  int64_t size = x.shape()[size_t(axis)], parts = ctx.node.output_size();
  std::vector<int64_t> sizes = ctx.has(1) ? ctx.ints(1) : ctx.attrInts("split").value_or(std::vector<int64_t>{});
  if (int64_t n = ctx.attrInt("num_outputs", 0); sizes.empty() && n) {
    // Split-18: n parts of ceil(size / n), the last one what is left.
    if (n != parts || n > size)
      ctx.fail("num_outputs = " + std::to_string(n) + " for " + std::to_string(parts) +
               " outputs and an axis of " + std::to_string(size));
    int64_t chunk = (size + n - 1) / n;
    for (int64_t at = 0; at < size; at += chunk)
      sizes.push_back(std::min(chunk, size - at));
    if (int64_t(sizes.size()) != n)
      ctx.fail("an axis of " + std::to_string(size) + " does not split into " +
               std::to_string(n) + " parts of " + std::to_string(chunk));
  } else if (sizes.empty()) {
    if (size % parts)
      ctx.fail(std::to_string(size) + " does not split into " + std::to_string(parts) + " equal parts");
    sizes.assign(size_t(parts), size / parts);
  }
  if (int64_t(sizes.size()) != parts || std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != size)
    ctx.fail("the split sizes do not add up to the axis' " + std::to_string(size));
  Values out;
  int64_t at = 0;
  const Value &in = ctx.input(0);
  for (int64_t s : sizes) {
    if (in.ints) { // integers known at import (a shape) stay folded
      int64_t inner = 1, outer = 1;
      for (int64_t d = 0; d < rank; ++d)
        if (d < axis)
          outer *= x.shape()[size_t(d)];
        else if (d > axis)
          inner *= x.shape()[size_t(d)];
      std::vector<int64_t> part;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = at; i < at + s; ++i)
          for (int64_t j = 0; j < inner; ++j)
            part.push_back((*in.ints)[size_t((o * size + i) * inner + j)]);
      Shape shape = x.shape();
      shape[size_t(axis)] = s;
      Value v = Value::ofInts(std::move(part), shape);
      v.elemType = in.elemType;
      out.push_back(v);
    } else {
      out.push_back(Value::of(x.slice(axis, at, at + s)));
    }
    at += s;
  }
  return out;
}

Values expand(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  std::vector<int64_t> shape = ctx.ints(1);
  Shape in = x.shape();
  size_t rank = std::max(in.size(), shape.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i + in.size() >= rank ? in[i + in.size() - rank] : 1;
    int64_t b = i + shape.size() >= rank ? shape[i + shape.size() - rank] : 1;
    if (a != b && a != 1 && b != 1)
      ctx.fail("shape " + std::to_string(b) + " does not broadcast with " + std::to_string(a));
    out[i] = a == 1 ? b : a;
  }
  int64_t elements = checkedElements(out, ctx.where());
  const Value &given = ctx.input(0);
  if (given.ints && elements <= (int64_t(1) << 20)) { // indices known at import stay folded
    Value shapeOnly = Value::ofInts(std::vector<int64_t>(static_cast<size_t>(elements), 0), out);
    if (std::optional<Value> folded =
            foldInts({&given, &shapeOnly}, [](const int64_t *v) { return v[0]; })) {
      folded->elemType = given.elemType;
      return {*folded};
    }
  }
  return one(x.broadcast_to(out));
}

/// Max (`larger`) or Min of any number of inputs, broadcast; integers
/// known at import (CenterCropPad's shape arithmetic) fold.
Converter extreme(bool larger) {
  return [larger](const NodeContext &ctx) -> Values {
    std::vector<const Value *> inputs;
    for (size_t i = 0; i < ctx.numInputs(); ++i)
      inputs.push_back(&ctx.input(i));
    if (std::optional<Value> folded = foldInts(inputs, [&](const int64_t *v) {
          int64_t best = v[0];
          for (size_t i = 1; i < inputs.size(); ++i)
            best = larger ? std::max(best, v[i]) : std::min(best, v[i]);
          return best;
        }))
      return {*folded};
    Tensor y = ctx.tensor(0);
    for (size_t i = 1; i < ctx.numInputs(); ++i)
      y = larger ? maximum(y, ctx.tensor(i)) : minimum(y, ctx.tensor(i));
    return one(y);
  };
}

/// a^b on integers (wrapping like int64 arithmetic), by squaring; a
/// negative power truncates toward zero as 1 / a^|b| does.
int64_t integerPower(int64_t a, int64_t b) {
  if (b < 0)
    return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
  uint64_t result = 1, base = uint64_t(a);
  for (uint64_t e = uint64_t(b); e; e >>= 1, base *= base)
    if (e & 1)
      result *= base;
  return int64_t(result);
}

/// Gelu-20: the exact (erf) form, or the tanh approximation.
Values geluOp(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  std::string approximate = ctx.attrString("approximate", "none");
  if (approximate == "none")
    return one(kiln::gelu(x));
  if (approximate != "tanh")
    ctx.fail("approximate '" + approximate + "' is not one of none, tanh");
  auto c = [&](float v) { return detail::scalarLike(v, x, std::source_location::current()); };
  Tensor inner = c(0.7978845608028654f) * (x + c(0.044715f) * x * x * x);
  return one(c(0.5f) * x * (c(1.0f) + kiln::tanh(inner)));
}

Values passThrough(const NodeContext &ctx) {
  for (int i = 1; i < ctx.node.output_size(); ++i)
    if (!ctx.node.output(i).empty())
      ctx.fail("only the first output is supported (Dropout's mask is a training output)");
  return {ctx.input(0)};
}
} // namespace

std::vector<Value> onnx_import::castValue(const NodeContext &ctx, const Value &x, int to,
                                          bool saturate) {
  std::optional<DType> dtype = computedDType(to);
  if (!dtype || to == onnx_type::kFloat8E8M0)
    ctx.fail("a cast to " + dataTypeName(to) + ", which Kiln does not compute",
             "Kiln computes float, float16, bfloat16, double (as f32), integers of up to 64 bits "
             "(as int32), bool, and the float8 and float4 types but float8e8m0 (as f32)");
  bool narrowInt = integerBits(to) > 0 && integerBits(to) < 32;
  if (x.ints) {
    // Integers known at import stay folded (wrapped to the type), or become
    // constants.
    if (*dtype == DType::i32 || *dtype == DType::boolean) {
      std::vector<int64_t> v(x.ints->size());
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = *dtype == DType::boolean ? (*x.ints)[i] != 0 : wrapInteger((*x.ints)[i], to);
      Value out = Value::ofInts(std::move(v), x.shape);
      out.elemType = narrowInt ? to : 0;
      return {out};
    }
    Tensor t = Tensor::from(std::vector<float>(x.ints->begin(), x.ints->end()), x.shape, *dtype);
    if (!isNarrowFloat(to))
      return {Value::ofConstant(t)};
    Value out = Value::of(roundToNarrowFloat(ctx, t, to, saturate));
    out.elemType = to;
    return {out};
  }
  Tensor t = *x.tensor;
  if (isNarrowFloat(to)) {
    Value out = Value::of(roundToNarrowFloat(ctx, t, to, saturate));
    out.elemType = to;
    return {out};
  }
  if (narrowInt) {
    // A value already inside the type's range needs no wrapping.
    std::optional<std::pair<int64_t, int64_t>> range = integerRange(to);
    bool fits = t.dtype() == DType::boolean ||
                (x.bounds && x.bounds->first >= range->first && x.bounds->second <= range->second);
    Value out = Value::of(fits ? (t.dtype() == DType::i32 ? t : t.to(DType::i32))
                               : castToInteger(t, to));
    out.bounds = fits && x.bounds ? x.bounds : range;
    if (t.dtype() == DType::boolean)
      out.bounds = std::pair<int64_t, int64_t>{0, 1};
    out.elemType = to;
    return {out};
  }
  Values out = one(t.dtype() == *dtype ? t : t.to(*dtype));
  out[0].constant = x.constant; // a cast constant stays one (Pad's value)
  // Integers keep what is known of their values: a boolean is 0 or 1.
  if (*dtype == DType::i32) {
    if (t.dtype() == DType::boolean)
      out[0].bounds = std::pair<int64_t, int64_t>{0, 1};
    else if (t.dtype() == DType::i32)
      out[0].bounds = x.bounds;
  }
  return out;
}

const ConverterTable &onnx_import::converters() {
  static const ConverterTable table = [] {
  ConverterTable table = {
      {"Abs", unary(abs, [](int64_t v) { return v < 0 ? -v : v; })},
      {"Add", binary(add, [](int64_t a, int64_t b) { return a + b; }, true)},
      {"AveragePool", [](const NodeContext &c) { return pool(c, false); }},
      {"BatchNormalization", batchNorm},
      {"Cast", cast},
      {"Clip", clip},
      {"Concat", concatOp},
      {"Constant", constant},
      {"ConstantOfShape", constantOfShape},
      {"Conv", conv},
      {"Div", binary(div, [](int64_t a, int64_t b) { return b ? a / b : int64_t(0); })},
      {"Dropout",
       [](const NodeContext &c) -> Values {
         if (c.has(2) && (c.input(2).ints ? c.input(2).ints->at(0) != 0 : true))
           c.fail("training_mode must be false (a constant)", "export the model in eval() mode");
         // Inference: the data unchanged, and a mask that keeps everything.
         Tensor x = c.tensor(0);
         return {Value::of(x), Value::of(eq(Tensor::zeros_like(x), scalarLike(x, 0.0f)))};
       }},
      {"Equal", binary(eq, [](int64_t a, int64_t b) -> int64_t { return a == b; })},
      {"Erf", unary(kiln::erf)},
      {"Exp", unary(exp)},
      {"Expand", expand},
      {"Flatten", flatten},
      {"Gather", gather},
      {"Gemm", gemm},
      {"GreaterOrEqual", binary(ge, [](int64_t a, int64_t b) -> int64_t { return a >= b; })},
      {"GlobalAveragePool", [](const NodeContext &c) { return one(global_avg_pool2d(c.tensor(0))); }},
      {"GlobalMaxPool", [](const NodeContext &c) { return one(amax(c.tensor(0), {2, 3}, true)); }},
      {"Greater", binary(gt, [](int64_t a, int64_t b) -> int64_t { return a > b; })},
      {"HardSigmoid",
       [](const NodeContext &c) {
         return hardSigmoid(c.tensor(0), c.attrFloat("alpha", 0.2f), c.attrFloat("beta", 0.5f));
       }},
      {"HardSwish",
       [](const NodeContext &c) {
         Tensor x = c.tensor(0);
         return one(x * *hardSigmoid(x, 1.0f / 6.0f, 0.5f)[0].tensor);
       }},
      {"Gelu", geluOp},
      {"Identity", passThrough},
      {"LayerNormalization", layerNorm},
      {"LeakyRelu",
       [](const NodeContext &c) {
         Tensor x = c.tensor(0);
         Tensor scaled = x * scalarLike(x, c.attrFloat("alpha", 0.01f));
         return one(where(gt(x, scalarLike(x, 0.0f)), x, scaled));
       }},
      {"Less", binary(lt, [](int64_t a, int64_t b) -> int64_t { return a < b; })},
      {"LessOrEqual", binary(le, [](int64_t a, int64_t b) -> int64_t { return a <= b; })},
      {"Log", unary(log)},
      {"LogSoftmax", [](const NodeContext &c) { return softmaxOp(c, true); }},
      {"MatMul", matMul},
      {"Max", extreme(true)},
      {"MaxPool", [](const NodeContext &c) { return pool(c, true); }},
      {"LpPool",
       [](const NodeContext &c) -> Values {
         // (sum over the window of |x|^p)^(1/p): the average of |x|^p over
         // the whole window (padding's zeros included), times its size.
         Tensor x = c.tensor(0);
         float p = float(c.attrInt("p", 2));
         if (p < 1)
           c.fail("p = " + std::to_string(int64_t(p)) + " (at least 1)");
         std::optional<std::vector<int64_t>> kernel = c.attrInts("kernel_shape");
         if (!kernel)
           c.fail("'kernel_shape' is missing");
         int64_t size = 1;
         for (int64_t k : *kernel)
           size *= k;
         Tensor powered = p == 1 ? abs(x) : p == 2 ? x * x : pow(abs(x), scalarLike(x, p));
         Tensor avg = *pool(c, false, powered, true)[0].tensor;
         Tensor sum = avg * scalarLike(avg, float(size));
         return one(p == 1 ? sum : p == 2 ? sqrt(sum) : pow(sum, scalarLike(sum, 1.0f / p)));
       }},
      {"Min", extreme(false)},
      {"Mul", binary(mul, [](int64_t a, int64_t b) { return a * b; }, true)},
      {"Neg", unary(neg, [](int64_t v) { return -v; })},
      {"Not", logicalNot},
      {"Pad", padOp},
      {"Pow",
       [](const NodeContext &c) -> Values {
         // A float base squared by a constant exponent (layer norm's
         // variance as exported by PyTorch) is x * x: powf is a libm call
         // per element on the CPU (the encoder's norms ran at 0.8 GFLOP/s).
         const Value &e = c.input(1);
         if (!c.input(0).ints && (e.constant || e.ints) && e.shape.size() <= 1 &&
             c.constantFloats(1).size() == 1 && c.constantFloats(1)[0] == 2.0f &&
             c.input(0).tensor && c.input(0).tensor->dtype() == DType::f32)
           return one(c.tensor(0) * c.tensor(0));
         Values y = binary(kiln::pow, integerPower)(c);
         // An integer base keeps its type (ONNX's T): the f32 power rounded
         // to the nearest integer, so 3^6 is 729 and not 729.0002 on a GPU.
         if (!c.input(0).ints || y[0].ints)
           return y;
         Tensor p = *y[0].tensor;
         Tensor half = where(ge(p, Tensor::scalar(0.0f)), Tensor::scalar(0.5f),
                             Tensor::scalar(-0.5f));
         return one((p + half).to(DType::i32));
       }},
      {"Reciprocal", [](const NodeContext &c) { Tensor x = c.tensor(0);
         return one(scalarLike(x, 1.0f) / x); }},
      {"Relu", unary(relu)},
      {"Reshape", reshape},
      {"RMSNormalization", rmsNorm},
      {"Resize", resize},
      {"Shape", shapeOp},
      {"Sigmoid", unary(sigmoid)},
      {"Slice", slice},
      {"Softmax", [](const NodeContext &c) { return softmaxOp(c, false); }},
      {"Split", split},
      {"Sqrt", unary(sqrt)},
      {"Squeeze", squeeze},
      {"Sub", binary(sub, [](int64_t a, int64_t b) { return a - b; }, true)},
      {"Tanh", unary(tanh)},
      {"Transpose", transpose},
      {"Unsqueeze", unsqueeze},
      {"Where",
       [](const NodeContext &c) -> Values {
         if (std::optional<Value> folded = foldInts(
                 {&c.input(0), &c.input(1), &c.input(2)},
                 [](const int64_t *v) { return v[0] ? v[1] : v[2]; }))
           return {*folded}; // integers known at import
         Tensor cond = c.tensor(0);
         if (cond.dtype() != DType::boolean) // booleans known at import arrive as 0 and 1
           cond = ne(cond, scalarLike(cond, 0.0f));
         return one(where(cond, c.tensor(1), c.tensor(2)));
       }},
  };
  addElementwiseConverters(table);
  addReductionConverters(table);
  addConstructConverters(table);
  addIndexingConverters(table);
  addLossConverters(table);
  addImageConverters(table);
  addConvTransposeConverter(table);
  addEinsumConverter(table);
  addRecurrentConverters(table);
  addQuantizeConverters(table);
  addControlFlowConverters(table);
  addAttentionConverters(table);
  addStateConverters(table);
  addSamplingConverters(table);
  addSignalConverters(table);
  addLinalgConverters(table);
  addOptimizerConverters(table);
  return table;
  }();
  return table;
}

std::vector<std::string> kiln::onnx_operators() {
  std::vector<std::string> names;
  for (const auto &entry : onnx_import::converters())
    names.push_back(entry.first);
  return names;
}
