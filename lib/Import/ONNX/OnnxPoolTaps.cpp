//===- OnnxPoolTaps.cpp - pooling of any rank as a reduction of taps ------===//
//
// MaxPool and AveragePool that the 2-D pooling ops do not express (3-D
// windows with dilations or ceil_mode, dilated averages). A window's
// maximum or sum is separable, so each dimension in turn takes the
// maximum or sum of its taps, each a pick of the padded input's rows (k1 +
// k2 + k3 picks, not k1 k2 k3; strided slices fused into one kernel of
// every tap instead). An average divides by the taps that count, found the
// same way from a mask of ones: the input alone, or the input and its
// explicit pads (count_include_pad), never the extra end of ceil_mode.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include "dialects/Kiln/WindowRules.h"

#include <limits>

using namespace kiln;
using namespace kiln::onnx_import;

Tensor onnx_import::poolByTaps(const NodeContext &ctx, bool isMax, const Tensor &x,
                               bool divideByKernel) {
  const Shape &in = x.shape();
  size_t k = in.size() - 2;
  auto list = [&](const char *name, int64_t fill, size_t count) {
    std::vector<int64_t> v = ctx.attrInts(name).value_or(std::vector<int64_t>(count, fill));
    if (v.size() != count)
      ctx.fail(std::string("'") + name + "' must give " + std::to_string(count) + " values for " +
               std::to_string(k) + "-D windows");
    return v;
  };
  std::vector<int64_t> kernel = list("kernel_shape", 0, k), strides = list("strides", 1, k),
                       dil = list("dilations", 1, k), pads = list("pads", 0, 2 * k);
  for (size_t i = 0; i < k; ++i)
    if (kernel[i] < 1 || strides[i] < 1 || dil[i] < 1)
      ctx.fail("kernel_shape, strides and dilations must be positive");
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  bool ceilMode = ctx.attrInt("ceil_mode", 0) != 0;
  std::vector<int64_t> begin(k), end(k), spans(k), outs(k), extra(k);
  for (size_t i = 0; i < k; ++i) {
    spans[i] = (kernel[i] - 1) * dil[i] + 1;
    begin[i] = pads[i];
    end[i] = pads[i + k];
    if (autoPad == "VALID") {
      begin[i] = end[i] = 0;
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t total = std::max<int64_t>(
          0, ((in[i + 2] + strides[i] - 1) / strides[i] - 1) * strides[i] + spans[i] - in[i + 2]);
      begin[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[i] = total - begin[i];
    } else if (autoPad != "NOTSET") {
      ctx.fail("auto_pad '" + autoPad + "' (NOTSET, VALID, SAME_UPPER or SAME_LOWER)");
    }
    outs[i] = windowCount(in[i + 2], spans[i], strides[i], begin[i], end[i], ceilMode);
    if (outs[i] < 1)
      ctx.fail("the window is larger than the padded input");
    // ceil_mode's last window may reach past the end padding.
    extra[i] = std::max<int64_t>(
        0, (outs[i] - 1) * strides[i] + spans[i] - (in[i + 2] + begin[i] + end[i]));
  }
  auto padded = [&](const Tensor &t, float fill, float endFill) {
    std::vector<int64_t> low(k + 2, 0), high(k + 2, 0), more(k + 2, 0);
    for (size_t i = 0; i < k; ++i) {
      low[i + 2] = begin[i];
      high[i + 2] = end[i];
      more[i + 2] = extra[i];
    }
    return kiln::pad(kiln::pad(t, low, high, fill), std::vector<int64_t>(k + 2, 0), more,
                     endFill);
  };
  // The window is separable: one dimension at a time, each tap a strided
  // slice (k1 + k2 + k3 slices, not k1 k2 k3).
  auto reduce = [&](Tensor t) {
    for (size_t i = 0; i < k; ++i) {
      std::optional<Tensor> y;
      for (int64_t a = 0; a < kernel[i]; ++a) {
        std::vector<int64_t> picked;
        for (int64_t o = 0; o < outs[i]; ++o)
          picked.push_back(a * dil[i] + o * strides[i]);
        Tensor tap = index_select(t, int64_t(i + 2), picked);
        y = !y ? tap : isMax ? maximum(*y, tap) : *y + tap;
      }
      t = *y;
    }
    return t;
  };
  float lowest = -std::numeric_limits<float>::infinity();
  if (isMax)
    return reduce(padded(x, lowest, lowest));
  Tensor sum = reduce(padded(x, 0.0f, 0.0f));
  int64_t window = 1;
  for (int64_t s : kernel)
    window *= s;
  if (divideByKernel)
    return sum / scalarLike(sum, float(window));
  Shape plane(k + 2, 1);
  for (size_t i = 0; i < k; ++i)
    plane[i + 2] = in[i + 2];
  bool includePad = ctx.attrInt("count_include_pad", 0) != 0;
  Tensor counted = reduce(padded(Tensor::full(plane, 1.0f), includePad ? 1.0f : 0.0f, 0.0f));
  return sum / (counted.dtype() == sum.dtype() ? counted : counted.to(sum.dtype()));
}
