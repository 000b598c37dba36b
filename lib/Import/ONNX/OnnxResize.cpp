//===- OnnxResize.cpp - ONNX Resize and Not -------------------------------===//
//
// Resize is separable: each resized axis becomes an index_select of the
// source positions (nearest), or two and a blend with per-position weights
// (linear), all computed here from the sizes, which are known at import.
// Cubic, antialiased downsampling, exclude_outside and tf_crop_and_resize
// take the general form: every output position weighs n taps (the n input
// positions nearest its source coordinate, clamped to the edge) by
// coefficients of its fraction, one index_select and multiply per tap.
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
    return out == 1 ? -0.5 : (double(o) + 0.5) / scale - 0.5;
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

/// The taps' coefficients for a source coordinate `ratio` past the tap
/// before it (0 < ratio <= 1), at `scale`: ONNX's kernels for nearest,
/// linear and cubic (with `a`), widened by 1 / scale and normalized when
/// antialiasing a downsample.
std::vector<double> tapCoefficients(const NodeContext &ctx, const std::string &mode,
                                    const std::string &rule, bool antialias, double a,
                                    double ratio, double scale) {
  if (mode == "nearest") {
    if (ratio == 1.0)
      return {0, 1};
    if (rule == "round_prefer_floor")
      return {double(ratio <= 0.5), double(ratio > 0.5)};
    if (rule == "round_prefer_ceil")
      return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (rule == "floor")
      return {1, 0};
    if (rule == "ceil")
      return {0, 1};
    ctx.fail("nearest_mode '" + rule + "' is not supported",
             "use round_prefer_floor, round_prefer_ceil, floor or ceil");
  }
  bool cubic = mode == "cubic";
  auto kernel = [&](double x) {
    x = std::abs(x);
    if (!cubic)
      return std::clamp(1 - x, 0.0, 1.0);
    if (x <= 1)
      return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2)
      return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
  };
  if (!antialias) {
    if (!cubic)
      return {1 - ratio, ratio};
    return {kernel(ratio + 1), kernel(ratio), kernel(1 - ratio), kernel(2 - ratio)};
  }
  double s = std::min(scale, 1.0), support = cubic ? 2.0 : 1.0;
  int64_t start = int64_t(std::floor(-support / s)) + 1, count = 2 - 2 * start;
  std::vector<double> c(static_cast<size_t>(count));
  double total = 0;
  for (int64_t i = 0; i < count; ++i)
    total += c[size_t(i)] = kernel(double(start + i - ratio) * s);
  for (double &v : c)
    v /= total;
  return c;
}

/// Where the general form reads along one axis: per output position, its
/// taps' input positions (clamped) and coefficients, and whether it lies
/// outside the input (tf_crop_and_resize's extrapolation).
struct Taps {
  std::vector<std::vector<int64_t>> at;
  std::vector<std::vector<double>> weight;
  std::vector<bool> outside;
};

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
/// `x` resized along `axis` to `size` positions by weighted taps.
Tensor resizeByTaps(const Tensor &x, int64_t axis, const Taps &taps, float extrapolation) {
  const size_t rank = x.shape().size(), count = taps.weight.front().size();
  const int64_t size = int64_t(taps.at.size());
  Shape along(rank, 1);
  along[size_t(axis)] = size;
  std::optional<Tensor> y;
  for (size_t t = 0; t < count; ++t) {
    std::vector<int64_t> at;
    std::vector<float> weight;
    for (int64_t o = 0; o < size; ++o) {
      at.push_back(taps.at[size_t(o)][t]);
      weight.push_back(float(taps.weight[size_t(o)][t]));
    }
    Tensor part = index_select(x, axis, at) * Tensor::from(std::move(weight), along);
    y = y ? *y + part : part;
  }
  if (std::find(taps.outside.begin(), taps.outside.end(), true) == taps.outside.end())
    return *y;
  std::vector<float> outside(taps.outside.begin(), taps.outside.end());
  Tensor mask = ne(Tensor::from(std::move(outside), along), Tensor::scalar(0.0f));
  return where(mask, Tensor::full_like(*y, extrapolation), *y);
}
} // namespace

std::vector<Value> onnx_import::resize(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const Shape &shape = x.shape();
  const size_t rank = shape.size();
  std::string mode = ctx.attrString("mode", "nearest");
  std::string transform = ctx.attrString("coordinate_transformation_mode", "half_pixel");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    ctx.fail("mode '" + mode + "' is not supported",
             "Kiln resizes with nearest, linear or cubic");
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
  bool antialias = ctx.attrInt("antialias", 0) != 0, cropping = transform == "tf_crop_and_resize";
  if (antialias && mode == "nearest")
    ctx.fail("antialias with mode 'nearest'", "ONNX defines antialias for linear and cubic only");
  bool excludeOutside = ctx.attrInt("exclude_outside", 0) != 0;
  // tf_crop_and_resize's region per dimension, as fractions of the input.
  std::vector<double> roiLow(rank, 0.0), roiHigh(rank, 1.0);
  if (cropping) {
    std::vector<float> roi = ctx.has(1) ? ctx.constantFloats(1) : std::vector<float>{};
    if (roi.size() != 2 * axes.size())
      ctx.fail("'roi' has " + std::to_string(roi.size()) + " values for " +
               std::to_string(axes.size()) + " axes; tf_crop_and_resize needs a start and an "
               "end for each");
    for (size_t i = 0; i < axes.size(); ++i) {
      roiLow[size_t(axes[i])] = roi[i];
      roiHigh[size_t(axes[i])] = roi[axes.size() + i];
    }
  }
  std::string rule = ctx.attrString("nearest_mode", "round_prefer_floor");
  double cubicA = ctx.attrFloat("cubic_coeff_a", -0.75f);
  float extrapolation = ctx.attrFloat("extrapolation_value", 0.0f);
  DType computed = x.dtype();
  for (size_t d = 0; d < rank; ++d) {
    bool cropped = roiLow[d] != 0.0 || roiHigh[d] != 1.0;
    if (out[d] == shape[d] && scales[d] == 1.0 && !cropped)
      continue;
    int64_t axis = int64_t(d), in = shape[d];
    if (mode == "cubic" || cropping || excludeOutside || (antialias && scales[d] < 1.0)) {
      Taps taps;
      const double width = double(in) * scales[d];
      for (int64_t o = 0; o < out[d]; ++o) {
        double c = !cropping ? sourceCoordinate(ctx, transform, o, in, scales[d])
                   : width == 1
                       ? (roiHigh[d] - roiLow[d]) * double(in - 1) / 2 + roiLow[d] * double(in - 1)
                       : double(o) * (roiHigh[d] - roiLow[d]) * double(in - 1) / (width - 1) +
                             roiLow[d] * double(in - 1);
        double whole = std::floor(c), ratio = c == whole ? 1.0 : c - whole;
        std::vector<double> w =
            tapCoefficients(ctx, mode, rule, antialias, cubicA, ratio, scales[d]);
        // The n (even) positions nearest c, the lower ones winning a tie.
        int64_t n = int64_t(w.size());
        int64_t first = int64_t(whole) - n / 2 + (c == whole ? 0 : 1);
        std::vector<int64_t> at;
        double total = 0;
        for (int64_t t = 0; t < n; ++t) {
          int64_t i = first + t;
          if (excludeOutside && (i < 0 || i >= in))
            w[size_t(t)] = 0;
          total += w[size_t(t)];
          at.push_back(std::clamp<int64_t>(i, 0, in - 1));
        }
        if (excludeOutside && total != 0)
          for (double &v : w)
            v /= total;
        taps.at.push_back(std::move(at));
        taps.weight.push_back(std::move(w));
        taps.outside.push_back(cropping && (c < 0 || c > double(in - 1)));
      }
      // Computed in f32 (ONNX's reference computes in f64) and rounded once.
      x = resizeByTaps(x.dtype() == DType::f32 ? x : x.to(DType::f32), axis, taps,
                       extrapolation);
      continue;
    }
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
  return {Value::of(x.dtype() == computed ? x : x.to(computed))};
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
