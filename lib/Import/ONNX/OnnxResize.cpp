//===- OnnxResize.cpp - ONNX Resize (nearest and linear) and Not ----------===//
//
// Resize is separable: each resized axis becomes an index_select of the
// source positions (nearest), or two and a blend with per-position weights
// (linear), all computed here from the sizes, which are known at import.
// Cubic and tf_crop_and_resize are refused with the node's name.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include "kiln/NetworkOps.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// Output position `o`'s coordinate in the input (of size `in`) at `scale`
/// under ONNX's coordinate_transformation_mode. As ONNX defines it, the
/// output's length here is in x scale, before rounding down.
double sourceCoordinate(const NodeContext &ctx, const std::string &mode, int64_t o, int64_t in,
                        double scale) {
  const double out = double(in) * scale;
  if (mode == "half_pixel")
    return (double(o) + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel")
    return out > 1 ? (double(o) + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners")
    return out == 1 ? 0.0 : double(o) * double(in - 1) / (out - 1);
  if (mode == "asymmetric")
    return double(o) / scale;
  if (mode == "tf_half_pixel_for_nn")
    return (double(o) + 0.5) / scale;
  if (mode == "half_pixel_symmetric") {
    // (Resize-19) half_pixel about the input's centre, for an output whose
    // length was rounded down from in x scale.
    double adjustment = std::floor(out) / out, centre = double(in) / 2;
    return centre * (1 - adjustment) + (double(o) + 0.5) / scale - 0.5;
  }
  ctx.fail("coordinate_transformation_mode '" + mode + "' is not supported",
           "use half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners or "
           "asymmetric");
}

int64_t nearestIndex(const NodeContext &ctx, const std::string &rule, double x, int64_t in) {
  double r;
  if (rule == "round_prefer_floor")
    r = (x - std::floor(x) == 0.5) ? std::floor(x) : std::round(x);
  else if (rule == "round_prefer_ceil")
    r = (x - std::floor(x) == 0.5) ? std::ceil(x) : std::round(x);
  else if (rule == "floor")
    r = std::floor(x);
  else if (rule == "ceil")
    r = std::ceil(x);
  else
    ctx.fail("nearest_mode '" + rule + "' is not supported",
             "use round_prefer_floor, round_prefer_ceil, floor or ceil");
  return std::clamp<int64_t>(int64_t(r), 0, in - 1);
}
} // namespace

std::vector<Value> onnx_import::resize(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const Shape &shape = x.shape();
  const size_t rank = shape.size();
  std::string mode = ctx.attrString("mode", "nearest");
  std::string transform = ctx.attrString("coordinate_transformation_mode", "half_pixel");
  if (mode != "nearest" && mode != "linear")
    ctx.fail("mode '" + mode + "' is not supported", "Kiln resizes with nearest or linear");
  if (transform == "tf_crop_and_resize")
    ctx.fail("coordinate_transformation_mode 'tf_crop_and_resize' is not supported",
             "crop with Slice first, then resize");
  // Opset 11+: X, roi, scales, sizes (opset 10's X, scales is before the
  // opsets Kiln imports). Resize-18 adds `axes` (scales and sizes name only
  // those axes), `keep_aspect_ratio_policy` and `antialias`.
  std::vector<int64_t> axes(rank);
  std::iota(axes.begin(), axes.end(), 0);
  if (std::optional<std::vector<int64_t>> given = ctx.attrInts("axes")) {
    axes = *given;
    for (int64_t &a : axes)
      a = normalizeAxis(ctx, a, int64_t(rank));
  }
  std::vector<double> scales(rank, 1.0);
  Shape out = shape;
  bool bySizes = ctx.has(3) && ctx.input(3).shape != Shape{0} && !ctx.ints(3).empty();
  if (bySizes) {
    const std::vector<int64_t> &sizes = ctx.ints(3);
    if (sizes.size() != axes.size())
      ctx.fail("'sizes' has " + std::to_string(sizes.size()) + " values for " +
               std::to_string(axes.size()) + " axes");
    std::string policy = ctx.attrString("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      ctx.fail("keep_aspect_ratio_policy '" + policy + "' is not one of stretch, not_larger, "
                                                       "not_smaller");
    // One scale for every named axis under the two aspect-keeping policies.
    double kept = policy == "not_larger" ? INFINITY : 0.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (sizes[i] < 1)
        ctx.fail("'sizes' must be positive");
      double s = double(sizes[i]) / double(shape[size_t(axes[i])]);
      kept = policy == "not_larger" ? std::min(kept, s) : std::max(kept, s);
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      size_t d = size_t(axes[i]);
      if (policy == "stretch") {
        out[d] = sizes[i];
        scales[d] = double(sizes[i]) / double(shape[d]);
      } else {
        out[d] = std::max<int64_t>(1, int64_t(std::floor(kept * double(shape[d]) + 0.5)));
        scales[d] = kept;
      }
    }
  } else {
    if (!ctx.has(2))
      ctx.fail("neither 'scales' nor 'sizes' is given");
    std::vector<float> given = ctx.constantFloats(2);
    if (given.size() != axes.size())
      ctx.fail("'scales' has " + std::to_string(given.size()) + " values for " +
               std::to_string(axes.size()) + " axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      size_t d = size_t(axes[i]);
      if (!(given[i] > 0.0f))
        ctx.fail("'scales' must be positive");
      scales[d] = given[i];
      out[d] = int64_t(std::floor(double(shape[d]) * given[i]));
      if (out[d] < 1)
        ctx.fail("'scales' leaves dimension " + std::to_string(d) + " empty");
    }
  }
  if (ctx.attrInt("antialias", 0))
    for (size_t d = 0; d < rank; ++d)
      if (scales[d] < 1.0)
        ctx.fail("antialias = 1 while downsampling is not supported",
                 "export without antialias (antialias=False in torch's interpolate)");
  std::string rule = ctx.attrString("nearest_mode", "round_prefer_floor");
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == shape[d] && scales[d] == 1.0)
      continue;
    int64_t axis = int64_t(d), in = shape[d];
    if (mode == "nearest") {
      std::vector<int64_t> pick;
      for (int64_t o = 0; o < out[d]; ++o)
        pick.push_back(nearestIndex(
            ctx, rule, sourceCoordinate(ctx, transform, o, in, scales[d]), in));
      x = index_select(x, axis, pick);
      continue;
    }
    // Linear: the two neighbours of each position and the weight of the
    // second, positions clamped into the input.
    std::vector<int64_t> lo, hi;
    std::vector<float> weight;
    for (int64_t o = 0; o < out[d]; ++o) {
      double c = std::clamp(sourceCoordinate(ctx, transform, o, in, scales[d]), 0.0,
                            double(in - 1));
      int64_t i0 = int64_t(std::floor(c));
      lo.push_back(i0);
      hi.push_back(std::min(i0 + 1, in - 1));
      weight.push_back(float(c - double(i0)));
    }
    Shape weightShape(rank, 1);
    weightShape[d] = out[d];
    Tensor w = Tensor::from(std::move(weight), weightShape);
    Tensor a = index_select(x, axis, lo), b = index_select(x, axis, hi);
    x = a + (b - a) * w;
  }
  return {Value::of(x)};
}

std::vector<Value> onnx_import::logicalNot(const NodeContext &ctx) {
  if (std::optional<Value> folded =
          foldInts({&ctx.input(0)}, [](const int64_t *v) -> int64_t { return v[0] == 0; }))
    return {*folded};
  Tensor x = ctx.tensor(0);
  // Booleans known at import arrive as 0 and 1, inputs as bool or f32.
  if (x.dtype() == DType::boolean)
    x = x.to(DType::f32);
  return {Value::of(eq(x, scalarLike(x, 0.0f)))};
}
