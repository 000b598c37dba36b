//===- OnnxReductions.cpp - ONNX reductions as Tensor API calls -----------===//
//
// The Reduce* family (axes an attribute, then an input: ReduceSum-13, the
// others 18), ArgMax/ArgMin, TopK, CumSum, CumProd and Hardmax.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// What a reduction computes after its axes are known: x, the axes
/// (normalized), keepdims.
using Reduction = std::function<Tensor(const Tensor &, const std::vector<int64_t> &, bool)>;

/// A Reduce* operator whose axes became an input in version `axesInputSince`.
/// Over an empty axis it gives `empty` where set (ONNX's reduction of an
/// empty set: -inf for ReduceMax), else whatever `fn` gives.
Converter reduction(int64_t axesInputSince, Reduction fn, std::optional<float> empty = {}) {
  return [axesInputSince, fn, empty](const NodeContext &ctx) -> std::vector<Value> {
    Tensor x = ctx.tensor(0);
    int64_t rank = int64_t(x.shape().size());
    bool keep = ctx.attrInt("keepdims", 1) != 0;
    std::optional<std::vector<int64_t>> axes =
        ctx.version >= axesInputSince ? (ctx.has(1) ? std::optional(ctx.ints(1)) : std::nullopt)
                                      : ctx.attrInts("axes");
    if (!axes || axes->empty()) {
      if (ctx.attrInt("noop_with_empty_axes", 0))
        return single(x);
      axes = std::vector<int64_t>(size_t(rank));
      std::iota(axes->begin(), axes->end(), 0);
    }
    for (int64_t &a : *axes)
      a = normalizeAxis(ctx, a, rank);
    bool overEmpty = std::any_of(axes->begin(), axes->end(),
                                 [&](int64_t a) { return x.shape()[size_t(a)] == 0; });
    if (overEmpty && empty) {
      Shape out;
      for (int64_t d = 0; d < rank; ++d)
        if (std::find(axes->begin(), axes->end(), d) == axes->end())
          out.push_back(x.shape()[size_t(d)]);
        else if (keep)
          out.push_back(1);
      // The identity where the type has it, else the type's least (or most)
      // value: false for a boolean ReduceMax.
      const Value &in = ctx.input(0);
      bool boolean = (in.ints && in.elemType == onnx::TensorProto::BOOL) ||
                     x.dtype() == DType::boolean;
      bool infinite = std::isinf(*empty);
      float fill = boolean && infinite ? (*empty < 0 ? 0.0f : 1.0f) : *empty;
      if (in.ints) {
        int64_t n = 1, value = int64_t(fill);
        for (int64_t d : out)
          n *= d;
        if (infinite && !boolean) {
          auto range = integerRange(in.elemType);
          value = *empty < 0 ? (range ? range->first : std::numeric_limits<int64_t>::min())
                             : (range ? range->second : std::numeric_limits<int64_t>::max());
        }
        Value v = Value::ofInts(std::vector<int64_t>(static_cast<size_t>(n), value), out);
        v.elemType = in.elemType;
        return {v};
      }
      return single(Tensor::full(out, fill).to(x.dtype()));
    }
    return single(fn(x, *axes, keep));
  };
}

Converter plain(Tensor (*fn)(const Tensor &, std::vector<int64_t>, bool, std::source_location),
                int64_t axesInputSince, std::optional<float> empty = {}) {
  return reduction(
      axesInputSince,
      [fn](const Tensor &x, const std::vector<int64_t> &axes, bool keep) {
        return fn(x, axes, keep, std::source_location::current());
      },
      empty);
}

std::vector<Value> argReduce(const NodeContext &ctx, bool isMax) {
  Tensor x = ctx.tensor(0);
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), int64_t(x.shape().size()));
  bool keep = ctx.attrInt("keepdims", 1) != 0;
  int64_t last = x.shape()[size_t(axis)] - 1; // an index: 0 <= v <= last
  if (!ctx.attrInt("select_last_index", 0))
    return {Value::ofBounded(isMax ? argmax(x, axis, keep) : argmin(x, axis, keep), 0, last)};
  // The last of equal values: the first in the reversed axis, counted back.
  int64_t n = x.shape()[size_t(axis)];
  std::vector<int64_t> reversed(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    reversed[size_t(i)] = n - 1 - i;
  Tensor flipped = index_select(x, axis, reversed);
  Tensor at = isMax ? argmax(flipped, axis, keep) : argmin(flipped, axis, keep);
  return {Value::ofBounded((Tensor::scalar(float(n - 1)) - at.to(DType::f32)).to(DType::i32), 0,
                           last)};
}

/// `x` with `axis` moved last, and the order that moves it back.
std::pair<Tensor, std::vector<int64_t>> axisLast(const Tensor &x, int64_t axis) {
  int64_t rank = int64_t(x.shape().size());
  std::vector<int64_t> order, back(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      order.push_back(d);
  order.push_back(axis);
  for (int64_t d = 0; d < rank; ++d)
    back[size_t(order[size_t(d)])] = d;
  return {axis == rank - 1 ? x : x.permute(order), back};
}

/// CumSum as a product with a triangular matrix of ones along the axis
/// (`exclusive` leaves the diagonal out, `reverse` sums from the end);
/// integers known at import are summed here.
/// CumProd: a scan of log2(n) steps, each multiplying by the running
/// products shifted by a doubling distance (padded with ones).
std::vector<Value> cumProd(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const std::vector<int64_t> &axisValue = ctx.ints(1);
  if (axisValue.size() != 1)
    ctx.fail("'axis' must hold one value");
  int64_t rank = int64_t(x.shape().size());
  int64_t axis = normalizeAxis(ctx, axisValue[0], rank);
  bool exclusive = ctx.attrInt("exclusive", 0) != 0, reverse = ctx.attrInt("reverse", 0) != 0;
  int64_t n = x.shape()[size_t(axis)];
  // `t` shifted by `s` along the axis (towards the end, or the start when
  // reversed), the vacated places 1.
  auto shifted = [&](const Tensor &t, int64_t s) {
    Shape onesShape = t.shape();
    onesShape[size_t(axis)] = std::min(s, n);
    Tensor ones = Tensor::full(onesShape, 1.0f);
    if (ones.dtype() != t.dtype())
      ones = ones.to(t.dtype());
    if (s >= n)
      return ones;
    return reverse ? concat({t.slice(axis, s, n), ones}, axis)
                   : concat({ones, t.slice(axis, 0, n - s)}, axis);
  };
  if (n == 0)
    return single(x);
  Tensor y = exclusive ? shifted(x, 1) : x;
  for (int64_t s = 1; s < n; s *= 2)
    y = y * shifted(y, s);
  return single(y);
}

std::vector<Value> cumSum(const NodeContext &ctx) {
  const Value &in = ctx.input(0);
  const std::vector<int64_t> &axisValue = ctx.ints(1);
  if (axisValue.size() != 1)
    ctx.fail("'axis' must hold one value");
  int64_t rank = int64_t(in.shape.size());
  int64_t axis = normalizeAxis(ctx, axisValue[0], rank);
  bool exclusive = ctx.attrInt("exclusive", 0) != 0, reverse = ctx.attrInt("reverse", 0) != 0;
  int64_t n = in.shape[size_t(axis)];
  auto counts = [&](int64_t from, int64_t to) { // does position `from` add into `to`
    return reverse ? (exclusive ? from > to : from >= to) : (exclusive ? from < to : from <= to);
  };
  if (in.ints) {
    int64_t inner = 1, outer = 1;
    for (int64_t d = axis + 1; d < rank; ++d)
      inner *= in.shape[size_t(d)];
    for (int64_t d = 0; d < axis; ++d)
      outer *= in.shape[size_t(d)];
    std::vector<int64_t> out(in.ints->size(), 0);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t to = 0; to < n; ++to)
        for (int64_t from = 0; from < n; ++from)
          if (counts(from, to))
            for (int64_t k = 0; k < inner; ++k)
              out[size_t((o * n + to) * inner + k)] += (*in.ints)[size_t((o * n + from) * inner + k)];
    return {Value::ofInts(std::move(out), in.shape)};
  }
  if (n > 4096) // the triangle holds n^2 weights
    ctx.fail("a CumSum along an axis of " + std::to_string(n) +
             " computed at run time is not supported (up to 4096)");
  std::vector<float> triangle(static_cast<size_t>(n * n));
  for (int64_t from = 0; from < n; ++from)
    for (int64_t to = 0; to < n; ++to)
      triangle[size_t(from * n + to)] = counts(from, to) ? 1.0f : 0.0f;
  if (in.tensor->dtype() == DType::i32 || in.tensor->dtype() == DType::boolean)
    ctx.fail("a CumSum of integers computed at run time is not supported");
  auto [last, back] = axisLast(ctx.tensor(0), axis);
  Tensor weights = Tensor::from(std::move(triangle), {n, n}, last.dtype());
  Tensor y = matmul(last, weights);
  return single(axis == rank - 1 ? y : y.permute(back));
}

/// Hardmax: 1 where the first largest element along `axis` is, else 0.
std::vector<Value> hardmax(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  int64_t rank = int64_t(x.shape().size());
  if (ctx.version < 13)
    ctx.fail("Hardmax before opset 13 (over flattened dimensions) is not supported");
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", -1), rank);
  int64_t n = x.shape()[size_t(axis)];
  std::vector<float> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), 0.0f);
  Shape along(size_t(rank), 1);
  along[size_t(axis)] = n;
  Tensor at = argmax(x, axis, true).to(DType::f32);
  Tensor hit = eq(Tensor::from(std::move(positions), along), at);
  return single(hit.to(x.dtype()));
}
/// TopK as k rounds of an arg-reduction: each round takes the first largest
/// (or smallest) element left along the axis and masks it out, so equal
/// values come in index order, as ONNX wants.
std::vector<Value> topK(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  int64_t rank = int64_t(x.shape().size());
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", -1), rank);
  const std::vector<int64_t> &kValue = ctx.ints(1);
  int64_t n = x.shape()[size_t(axis)];
  if (kValue.size() != 1 || kValue[0] < 1 || kValue[0] > n)
    ctx.fail("k must be one value from 1 to the axis' " + std::to_string(n));
  int64_t k = kValue[0];
  bool largest = ctx.attrInt("largest", 1) != 0;
  std::vector<float> positions(static_cast<size_t>(n));
  std::iota(positions.begin(), positions.end(), 0.0f);
  Shape along(size_t(rank), 1);
  along[size_t(axis)] = n;
  Tensor iota = Tensor::from(std::move(positions), along);
  Tensor gone = Tensor::scalar(largest ? -INFINITY : INFINITY);
  std::vector<Tensor> values, indices;
  Tensor left = x.to(DType::f32);
  for (int64_t round = 0; round < k; ++round) {
    Tensor at = largest ? argmax(left, axis, true) : argmin(left, axis, true);
    Tensor hit = eq(iota, at.to(DType::f32));
    values.push_back(sum(where(hit, left, Tensor::zeros_like(left)), {axis}, true));
    indices.push_back(at.to(DType::f32)); // (concat takes floats; exact below 2^24)
    left = where(hit, gone, left);
  }
  Tensor v = k == 1 ? values[0] : concat(values, axis);
  Tensor i = (k == 1 ? indices[0] : concat(indices, axis)).to(DType::i32);
  return {Value::of(v.dtype() == x.dtype() ? v : v.to(x.dtype())), Value::of(i)};
}
} // namespace

void onnx_import::addReductionConverters(ConverterTable &table) {
  table["TopK"] = topK;
  const float inf = std::numeric_limits<float>::infinity();
  table["ReduceMax"] = plain(amax, 18, -inf);
  table["ReduceMean"] = plain(mean, 18);
  table["ReduceMin"] = plain(amin, 18, inf);
  table["ReduceSum"] = plain(sum, 13);
  table["ReduceProd"] = plain(prod, 18);
  table["ReduceL1"] = reduction(18, [](const Tensor &x, const std::vector<int64_t> &a, bool k) {
    return sum(abs(x), a, k);
  });
  table["ReduceL2"] = reduction(18, [](const Tensor &x, const std::vector<int64_t> &a, bool k) {
    return sqrt(sum(x * x, a, k));
  });
  table["ReduceSumSquare"] = reduction(18, [](const Tensor &x, const std::vector<int64_t> &a,
                                              bool k) { return sum(x * x, a, k); });
  table["ReduceLogSum"] = reduction(18, [](const Tensor &x, const std::vector<int64_t> &a,
                                           bool k) { return log(sum(x, a, k)); });
  table["ReduceLogSumExp"] = reduction(18, [](const Tensor &x, const std::vector<int64_t> &a,
                                              bool k) {
    // Shifted by the largest element, so exp cannot overflow.
    Tensor m = amax(x, a, true);
    Tensor y = log(sum(exp(x - m), a, true)) + m;
    if (k)
      return y;
    Shape kept;
    for (int64_t d = 0; d < int64_t(x.shape().size()); ++d)
      if (std::find(a.begin(), a.end(), d) == a.end())
        kept.push_back(x.shape()[size_t(d)]);
    return y.reshape(kept);
  }, -inf);
  table["ArgMax"] = [](const NodeContext &c) { return argReduce(c, true); };
  table["ArgMin"] = [](const NodeContext &c) { return argReduce(c, false); };
  table["CumSum"] = cumSum;
  table["CumProd"] = cumProd;
  table["Hardmax"] = hardmax;
}
