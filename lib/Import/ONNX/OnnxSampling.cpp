//===- OnnxSampling.cpp - GridSample and AffineGrid -----------------------===//
//
// GridSample (nearest, linear and cubic; zeros, border and reflection
// padding; 2-D and 3-D) reads the input at coordinates computed at run
// time: each tap of the interpolation is one gather of rows by computed
// indices (index_select), weighted and summed. AffineGrid makes the grid
// from the transform and a size known at import.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include <cmath>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
Tensor constant(float v) { return Tensor::scalar(v); }

/// Reflects `x` into [lo, hi] by its near border until it is inside, as
/// ONNX's reference (and PyTorch) do.
Tensor reflect(const Tensor &x, float lo, float hi) {
  float span = hi - lo;
  if (span <= 0)
    return Tensor::full_like(x, lo);
  Tensor below = lt(x, constant(lo)), above = gt(x, constant(hi));
  Tensor dx = where(below, constant(lo) - x, x - constant(hi));
  Tensor n = floor(dx / constant(span));
  Tensor r = dx - n * constant(span);
  Tensor even = eq(n - constant(2.0f) * floor(n / constant(2.0f)), constant(0.0f));
  Tensor fromLow = where(even, constant(lo) + r, constant(hi) - r);
  Tensor fromHigh = where(even, constant(hi) - r, constant(lo) + r);
  return where(below, fromLow, where(above, fromHigh, x));
}

/// One tap along one dimension: the integer index it reads (as f32), its
/// weight, and 1 or 0 for whether it lies inside (zeros padding).
struct Tap {
  Tensor index, weight, inside;
};

/// Keys' cubic convolution weights (A = -0.75) for offset t in [0, 1), for
/// the taps at -1, 0, 1 and 2.
std::vector<Tensor> cubicWeights(const Tensor &t) {
  const float a = -0.75f;
  auto outer = [&](const Tensor &x) { // 1 < |x| < 2
    return ((constant(a) * x - constant(5 * a)) * x + constant(8 * a)) * x - constant(4 * a);
  };
  auto inner = [&](const Tensor &x) { // |x| <= 1
    return ((constant(a + 2) * x - constant(a + 3)) * x) * x + constant(1.0f);
  };
  Tensor one = constant(1.0f);
  return {outer(t + one), inner(t), inner(one - t), outer(constant(2.0f) - t)};
}

std::vector<Value> gridSample(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0), grid = ctx.tensorAs(1, x);
  std::string mode = ctx.attrString("mode", ctx.version >= 20 ? "linear" : "bilinear");
  if (mode == "bilinear")
    mode = "linear";
  if (mode == "bicubic")
    mode = "cubic";
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    ctx.fail("mode '" + mode + "' (nearest, linear or cubic)");
  std::string padding = ctx.attrString("padding_mode", "zeros");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    ctx.fail("padding_mode '" + padding + "' (zeros, border or reflection)");
  bool corners = ctx.attrInt("align_corners", 0) != 0;
  const Shape &xs = x.shape(), &gs = grid.shape();
  int64_t k = int64_t(xs.size()) - 2;
  if (k < 1 || int64_t(gs.size()) != k + 2 || gs.back() != k || gs[0] != xs[0])
    ctx.fail("input " + detail::shapeText(xs) + " and grid " + detail::shapeText(gs) +
             "; want [N, C, D1..Dk] and [N, O1..Ok, k]");
  int64_t n = xs[0], c = xs[1], places = 1, outs = 1;
  Shape dims(xs.begin() + 2, xs.end());
  for (int64_t d : dims)
    places *= d;
  for (int64_t i = 1; i <= k; ++i)
    outs *= gs[size_t(i)];
  // Rows of the input, one per (batch, place): [N * P, C].
  Tensor rows = asF32(x).reshape({n, c, places}).permute({0, 2, 1}).reshape({n * places, c});
  Tensor g = asF32(grid).reshape({n, outs, k});
  std::vector<float> batchStart(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b)
    batchStart[size_t(b)] = float(b * places);
  Tensor base = Tensor::from(std::move(batchStart), {n, 1});

  // Per dimension (the grid's last axis lists them innermost first: x is
  // the last dimension), its taps.
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    float size = float(dims[size_t(i)]);
    Tensor v = g.slice(2, k - 1 - i, k - i).reshape({n, outs});
    // Normalized [-1, 1] to the input's coordinates.
    Tensor pos = corners ? (v + constant(1.0f)) * constant(0.5f * (size - 1))
                         : ((v + constant(1.0f)) * constant(size) - constant(1.0f)) *
                               constant(0.5f);
    float lo = corners ? 0.0f : -0.5f, hi = corners ? size - 1 : size - 0.5f;
    if (mode == "nearest")
      pos = round(pos); // half to even, as PyTorch
    Tensor outside = where(lt(pos, constant(lo)), constant(1.0f),
                           where(gt(pos, constant(hi)), constant(1.0f), constant(0.0f)));
    if (padding == "border")
      pos = where(gt(outside, constant(0.5f)),
                  minimum(maximum(pos, constant(0.0f)), constant(size - 1)), pos);
    else if (padding == "reflection")
      pos = reflect(pos, lo, hi);
    // Where a tap reads: inside, clamped, reflected; or outside (zeros).
    auto tap = [&](const Tensor &index, const Tensor &weight) {
      Tensor at = index;
      if (padding == "border")
        at = minimum(maximum(at, constant(0.0f)), constant(size - 1));
      else if (padding == "reflection") {
        at = reflect(at, lo, hi);
        at = where(lt(at, constant(0.0f)), ceil(at), floor(at)); // toward zero
      }
      Tensor inside = where(lt(at, constant(0.0f)), constant(0.0f),
                            where(gt(at, constant(size - 1)), constant(0.0f), constant(1.0f)));
      return Tap{minimum(maximum(at, constant(0.0f)), constant(size - 1)), weight, inside};
    };
    std::vector<Tap> &list = taps[size_t(i)];
    if (mode == "nearest") {
      list.push_back(tap(pos, constant(1.0f)));
    } else {
      Tensor first = floor(pos), t = pos - first;
      if (mode == "linear") {
        list.push_back(tap(first, constant(1.0f) - t));
        list.push_back(tap(first + constant(1.0f), t));
      } else {
        std::vector<Tensor> w = cubicWeights(t);
        for (int j = 0; j < 4; ++j)
          list.push_back(tap(first + constant(float(j - 1)), w[size_t(j)]));
      }
    }
  }
  // Every combination of the dimensions' taps: one gather each.
  std::vector<int64_t> strides(static_cast<size_t>(k), 1);
  for (int64_t i = k - 2; i >= 0; --i)
    strides[size_t(i)] = strides[size_t(i + 1)] * dims[size_t(i + 1)];
  std::vector<size_t> pick(static_cast<size_t>(k), 0);
  std::optional<Tensor> sum;
  while (true) {
    Tensor flat = base, weight = constant(1.0f);
    for (int64_t i = 0; i < k; ++i) {
      const Tap &t = taps[size_t(i)][pick[size_t(i)]];
      flat = flat + t.index * constant(float(strides[size_t(i)]));
      weight = weight * t.weight * (padding == "zeros" ? t.inside : constant(1.0f));
    }
    Tensor read = index_select(rows, 0, flat.reshape({n * outs}).to(DType::i32));
    Tensor term = read * weight.reshape({n * outs, 1});
    sum = sum ? *sum + term : term;
    size_t i = size_t(k);
    while (i > 0 && ++pick[i - 1] == taps[i - 1].size())
      pick[--i] = 0;
    if (i == 0)
      break;
  }
  Shape out{n, c};
  out.insert(out.end(), gs.begin() + 1, gs.end() - 1);
  Tensor y = sum->reshape({n, outs, c}).permute({0, 2, 1}).reshape(out);
  return single(y.dtype() == x.dtype() ? y : y.to(x.dtype()));
}

std::vector<Value> affineGrid(const NodeContext &ctx) {
  Tensor theta = ctx.tensor(0);
  std::vector<int64_t> size = ctx.ints(1);
  bool corners = ctx.attrInt("align_corners", 0) != 0;
  int64_t k = int64_t(size.size()) - 2;
  if ((k != 2 && k != 3) || theta.shape() != Shape{size[0], k, k + 1})
    ctx.fail("theta " + detail::shapeText(theta.shape()) + " for size " +
             detail::shapeText(size) + "; want [N, 2, 3] for [N, C, H, W] or [N, 3, 4] for "
             "[N, C, D, H, W]");
  Shape spatial(size.begin() + 2, size.end());
  int64_t places = 1;
  for (int64_t d : spatial)
    places *= d;
  // The homogeneous coordinates of every place, x (the last dimension)
  // first: [P, k + 1].
  std::vector<float> coords(static_cast<size_t>(places * (k + 1)));
  for (int64_t p = 0; p < places; ++p) {
    int64_t rest = p;
    for (int64_t i = k - 1; i >= 0; --i) {
      int64_t d = spatial[size_t(i)], at = rest % d;
      rest /= d;
      double v = corners ? (d == 1 ? -1.0 : -1.0 + 2.0 * double(at) / double(d - 1))
                         : -1.0 + (2.0 * double(at) + 1.0) / double(d);
      coords[size_t(p * (k + 1) + (k - 1 - i))] = float(v);
    }
    coords[size_t(p * (k + 1) + k)] = 1.0f;
  }
  Tensor homogeneous = Tensor::from(std::move(coords), {places, k + 1});
  Tensor t = asF32(theta);
  Tensor grid = matmul(homogeneous, t.transpose(1, 2)); // [N, P, k]
  Shape out{size[0]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  out.push_back(k);
  grid = grid.reshape(out);
  return single(grid.dtype() == theta.dtype() ? grid : grid.to(theta.dtype()));
}
} // namespace

void onnx_import::addSamplingConverters(ConverterTable &table) {
  table["GridSample"] = gridSample;
  table["AffineGrid"] = affineGrid;
}
