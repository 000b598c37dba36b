//===- OnnxConstruct.cpp - ONNX tensors made from positions ---------------===//
//
// Operators whose result depends on element positions: Range, EyeLike and
// the Hann, Hamming and Blackman windows (constants, from values known at
// import), Trilu (a triangle kept by a
// mask), Tile (a broadcast) and Size (a count known at import); and the
// data movement CenterCropPad and ReverseSequence.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include <cmath>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// Range(start, limit, delta), all known at import: integers stay folded,
/// floats become a constant.
std::vector<Value> range(const NodeContext &ctx) {
  bool integers = ctx.input(0).ints && ctx.input(1).ints && ctx.input(2).ints;
  std::vector<float> start = ctx.constantFloats(0), limit = ctx.constantFloats(1),
                     delta = ctx.constantFloats(2);
  if (start.size() != 1 || limit.size() != 1 || delta.size() != 1)
    ctx.fail("start, limit and delta must be scalars");
  if (integers) {
    int64_t s = ctx.ints(0)[0], l = ctx.ints(1)[0], d = ctx.ints(2)[0];
    if (d == 0)
      ctx.fail("a delta of 0");
    int64_t n = std::max<int64_t>(0, int64_t(std::ceil(double(l - s) / double(d))));
    checkedElements({n}, ctx.where());
    std::vector<int64_t> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      out[size_t(i)] = s + i * d;
    return {Value::ofInts(std::move(out), {n})};
  }
  if (delta[0] == 0.0f)
    ctx.fail("a delta of 0");
  double n = std::ceil((double(limit[0]) - double(start[0])) / double(delta[0]));
  int64_t count = n > 0 ? int64_t(n) : 0;
  checkedElements({count}, ctx.where());
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) // as ONNX computes it, in the input's type
    out[size_t(i)] = start[0] + float(i) * delta[0];
  const Value &first = ctx.input(0);
  DType dtype = first.tensor ? first.tensor->dtype() : DType::f32;
  return {Value::ofConstant(Tensor::from(std::move(out), {count}, dtype))};
}

/// 1 where column - row == k in a matrix of the input's shape.
std::vector<Value> eyeLike(const NodeContext &ctx) {
  const Value &x = ctx.input(0);
  if (x.shape.size() != 2)
    ctx.fail("the input must have rank 2");
  int64_t k = ctx.attrInt("k", 0), rows = x.shape[0], cols = x.shape[1];
  std::vector<int64_t> ones(size_t(rows * cols), 0);
  for (int64_t r = 0; r < rows; ++r)
    if (r + k >= 0 && r + k < cols)
      ones[size_t(r * cols + r + k)] = 1;
  int64_t to = ctx.attrInt("dtype", 0);
  bool integers = to ? (to != onnx::TensorProto::FLOAT && to != onnx::TensorProto::FLOAT16 &&
                        to != onnx::TensorProto::BFLOAT16 && to != onnx::TensorProto::DOUBLE)
                     : x.ints.has_value();
  if (integers)
    return {Value::ofInts(std::move(ones), x.shape)};
  DType dtype = to == onnx::TensorProto::FLOAT16    ? DType::f16
                : to == onnx::TensorProto::BFLOAT16 ? DType::bf16
                : !to && x.tensor                   ? x.tensor->dtype()
                                                    : DType::f32;
  return {Value::ofConstant(
      Tensor::from(std::vector<float>(ones.begin(), ones.end()), x.shape, dtype))};
}

/// The upper (column - row >= k) or lower (<= k) triangle of the last two
/// dimensions, the rest zero.
std::vector<Value> trilu(const NodeContext &ctx) {
  const Value &x = ctx.input(0);
  if (x.shape.size() < 2)
    ctx.fail("the input must have rank 2 or more");
  int64_t k = 0;
  if (ctx.has(1)) {
    const std::vector<int64_t> &given = ctx.ints(1);
    if (given.size() != 1)
      ctx.fail("'k' must be one value");
    k = given[0];
  }
  bool upper = ctx.attrInt("upper", 1) != 0;
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  auto kept = [&](int64_t r, int64_t c) { return upper ? c - r >= k : c - r <= k; };
  if (x.ints) {
    std::vector<int64_t> out = *x.ints;
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t within = int64_t(i) % (rows * cols);
      if (!kept(within / cols, within % cols))
        out[i] = 0;
    }
    return {Value::ofInts(std::move(out), x.shape)};
  }
  std::vector<float> mask(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      mask[size_t(r * cols + c)] = kept(r, c) ? 1.0f : 0.0f;
  Tensor t = *x.tensor;
  if (t.dtype() == DType::i32 || t.dtype() == DType::boolean)
    ctx.fail("a Trilu of integers computed at run time is not supported");
  Tensor keep = ne(Tensor::from(std::move(mask), {rows, cols}), Tensor::scalar(0.0f));
  return single(where(keep, t, Tensor::zeros_like(t)));
}

/// Tile: each axis copied `repeats[d]` times, joined along it.
std::vector<Value> tile(const NodeContext &ctx) {
  const Value &x = ctx.input(0);
  const std::vector<int64_t> &repeats = ctx.ints(1);
  if (repeats.size() != x.shape.size())
    ctx.fail("'repeats' has " + std::to_string(repeats.size()) + " values for a rank-" +
             std::to_string(x.shape.size()) + " input");
  Shape out = x.shape;
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 1)
      ctx.fail("a repeat of " + std::to_string(repeats[d]) + " (Kiln makes no empty tensors)");
    out[d] *= repeats[d];
  }
  checkedElements(out, ctx.where());
  if (x.ints) {
    if (x.shape.size() != 1)
      ctx.fail("tiling integers known at import is supported on rank 1 only");
    std::vector<int64_t> joined;
    for (int64_t r = 0; r < repeats[0]; ++r)
      joined.insert(joined.end(), x.ints->begin(), x.ints->end());
    return {Value::ofInts(std::move(joined), out)};
  }
  // [a, b] -> [1, a, 1, b] broadcast to [ra, a, rb, b] -> [ra a, rb b].
  Shape split, spread;
  for (size_t d = 0; d < repeats.size(); ++d) {
    split.insert(split.end(), {1, x.shape[d]});
    spread.insert(spread.end(), {repeats[d], x.shape[d]});
  }
  return single(x.tensor->reshape(split).broadcast_to(spread).reshape(out));
}
/// The Hann, Hamming and Blackman windows: sum_k a_k cos(2 pi k n / N')
/// with N' the size (periodic) or the size less one (symmetric).
Converter window(std::vector<double> terms) {
  return [terms](const NodeContext &ctx) -> std::vector<Value> {
    const std::vector<int64_t> &given = ctx.ints(0);
    if (given.size() != 1 || given[0] < 1)
      ctx.fail("'size' must be one positive value");
    int64_t size = given[0];
    if (ctx.attrInt("output_datatype", onnx::TensorProto::FLOAT) != onnx::TensorProto::FLOAT)
      ctx.fail("output_datatype other than float is not supported");
    double span = ctx.attrInt("periodic", 1) ? double(size) : double(size - 1);
    std::vector<float> out(static_cast<size_t>(size));
    for (int64_t n = 0; n < size; ++n) {
      double v = 0;
      for (size_t k = 0; k < terms.size(); ++k)
        v += terms[k] * (span > 0 ? std::cos(2 * M_PI * double(k) * double(n) / span) : 1.0);
      out[size_t(n)] = float(v);
    }
    return {Value::ofConstant(Tensor::from(std::move(out), {size}))};
  };
}
} // namespace

namespace {
/// CenterCropPad: each listed axis cropped or zero-padded to its size in
/// `shape`, centred (an odd difference puts the extra element at the end).
std::vector<Value> centerCropPad(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const std::vector<int64_t> &sizes = ctx.ints(1);
  int64_t rank = int64_t(x.shape().size());
  std::vector<int64_t> axes = ctx.attrInts("axes").value_or(std::vector<int64_t>());
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  if (axes.size() != sizes.size())
    ctx.fail("'shape' gives " + std::to_string(sizes.size()) + " sizes for " +
             std::to_string(axes.size()) + " axes");
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = normalizeAxis(ctx, axes[i], rank), have = x.shape()[size_t(axis)];
    int64_t want = sizes[i];
    if (want < 0)
      ctx.fail("a negative size in 'shape'");
    if (want < have) {
      int64_t start = (have - want) / 2;
      x = x.slice(axis, start, start + want);
    } else if (want > have) {
      std::vector<int64_t> low(size_t(rank), 0), high(size_t(rank), 0);
      low[size_t(axis)] = (want - have) / 2;
      high[size_t(axis)] = want - have - low[size_t(axis)];
      x = kiln::pad(x, low, high);
    }
  }
  return single(x);
}

/// ReverseSequence: along time_axis, the first sequence_lens[b] elements
/// of each batch entry b reversed, the rest kept (lengths known at import).
std::vector<Value> reverseSequence(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const std::vector<int64_t> &lengths = ctx.ints(1);
  int64_t rank = int64_t(x.shape().size());
  int64_t batchAxis = normalizeAxis(ctx, ctx.attrInt("batch_axis", 1), rank);
  int64_t timeAxis = normalizeAxis(ctx, ctx.attrInt("time_axis", 0), rank);
  int64_t batch = x.shape()[size_t(batchAxis)], steps = x.shape()[size_t(timeAxis)];
  if (batchAxis == timeAxis || int64_t(lengths.size()) != batch)
    ctx.fail("sequence_lens must give one length per batch entry, on another axis than time");
  std::vector<Tensor> parts;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t n = lengths[size_t(b)];
    if (n < 0 || n > steps)
      ctx.fail("sequence length " + std::to_string(n) + " outside 0 to " + std::to_string(steps));
    std::vector<int64_t> order(static_cast<size_t>(steps));
    for (int64_t t = 0; t < steps; ++t)
      order[size_t(t)] = t < n ? n - 1 - t : t;
    parts.push_back(index_select(x.slice(batchAxis, b, b + 1), timeAxis, order));
  }
  return single(parts.size() == 1 ? parts.front() : concat(parts, batchAxis));
}
} // namespace

void onnx_import::addConstructConverters(ConverterTable &table) {
  table["CenterCropPad"] = centerCropPad;
  table["ReverseSequence"] = reverseSequence;
  table["HannWindow"] = window({0.5, -0.5});
  table["HammingWindow"] = window({25.0 / 46, -21.0 / 46});
  table["BlackmanWindow"] = window({0.42, -0.5, 0.08});
  table["Range"] = range;
  table["EyeLike"] = eyeLike;
  table["Trilu"] = trilu;
  table["Tile"] = tile;
  table["Size"] = [](const NodeContext &c) -> std::vector<Value> {
    return {Value::ofInts({checkedElements(c.input(0).shape, c.where())}, {})};
  };
}
