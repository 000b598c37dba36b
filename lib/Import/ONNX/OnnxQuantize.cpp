//===- OnnxQuantize.cpp - ONNX's linear quantization operators ------------===//
//
// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear, and the
// integer products MatMulInteger, ConvInteger, QLinearMatMul and
// QLinearConv. Kiln has no 8-bit types: quantized values are integers
// (int32 through f32, exact below 2^24) and the products run in f32 on
// integer values, exact while every sum stays below 2^24, which the
// importer checks from the operands' bounds. Scales may be per tensor, per
// axis or per block (block_size); float8 and float4 results are f32 values rounded to the format.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"
#include "lib/Frontend/OpRecording.h"

#include <algorithm>
#include <cmath>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
using Values = std::vector<Value>;

/// Input `i` as f32 (integers known at import or computed).
Tensor wide(const NodeContext &ctx, size_t i) {
  return asF32(ctx.tensor(i));
}

/// A scale or zero point laid along `x`'s shape: a scalar as it is, a 1-D
/// one along `axis`, a blocked one (x's rank, `block` elements of x per
/// element along `axis`) repeated and cut to x's length.
Tensor alongAxis(const NodeContext &ctx, const Tensor &s, const Shape &x, int64_t axis,
                 int64_t block, const char *what) {
  int64_t rank = int64_t(x.size());
  int64_t n = 1;
  for (int64_t d : s.shape())
    n *= d;
  if (s.shape().empty() || n == 1)
    return s.shape().empty() ? s : s.reshape({});
  if (axis < -rank || axis >= rank)
    ctx.fail("axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
  axis = axis < 0 ? axis + rank : axis;
  if (block <= 0) {
    if (s.shape().size() != 1 || s.shape()[0] != x[size_t(axis)])
      ctx.fail(std::string(what) + " of shape " + detail::shapeText(s.shape()) +
               " is neither a scalar nor one per element of axis " + std::to_string(axis) +
               " (add block_size for blocked quantization)");
    Shape along(size_t(rank), 1);
    along[size_t(axis)] = x[size_t(axis)];
    return s.reshape(along);
  }
  Shape want = x;
  want[size_t(axis)] = (x[size_t(axis)] + block - 1) / block;
  if (s.shape() != want)
    ctx.fail(std::string(what) + " of shape " + detail::shapeText(s.shape()) + " for block_size " +
             std::to_string(block) + " (want " + detail::shapeText(want) + ")");
  // [.., B, ..] -> [.., B, 1, ..] -> [.., B, block, ..] -> [.., B*block, ..].
  Shape split = want, repeated = want, merged = want;
  split.insert(split.begin() + axis + 1, 1);
  repeated = split;
  repeated[size_t(axis + 1)] = block;
  merged[size_t(axis)] *= block;
  Tensor r = s.reshape(split).broadcast_to(repeated).reshape(merged);
  return merged[size_t(axis)] == x[size_t(axis)] ? r : r.slice(axis, 0, x[size_t(axis)]);
}

/// The ONNX type a quantized input `i` holds: its data type where the file
/// gave it, else `otherwise`.
int typeOf(const NodeContext &ctx, size_t i, int otherwise) {
  return ctx.has(i) && ctx.input(i).elemType ? ctx.input(i).elemType : otherwise;
}

/// round(x / scale) + zero point, saturated to integer `type`: the result
/// as an i32 tensor with its bounds. For a float8 or float4 `type`,
/// x / scale + zero point rounded to it (saturated unless `saturate` is
/// off), in f32.
Value quantized(const NodeContext &ctx, const Tensor &x, const Tensor &scale,
                std::optional<Tensor> zeroPoint, int type, bool saturate = true) {
  if (isNarrowFloat(type)) {
    Tensor q = x / scale;
    if (zeroPoint)
      q = q + *zeroPoint;
    Value v = Value::of(roundToNarrowFloat(ctx, q, type, saturate));
    v.elemType = type;
    return v;
  }
  std::optional<std::pair<int64_t, int64_t>> range = integerRange(type);
  if (!range)
    ctx.fail("a quantized result of ONNX data type " + dataTypeName(type),
             "Kiln quantizes to int8, uint8, int16, uint16, int4, uint4, int2, uint2, the float8 "
             "types and float4e2m1");
  Tensor q = round(x / scale);
  if (zeroPoint)
    q = q + *zeroPoint;
  q = minimum(maximum(q, Tensor::scalar(float(range->first))), Tensor::scalar(float(range->second)));
  return Value::ofBounded(q.to(DType::i32), range->first, range->second);
}

Values quantizeLinear(const NodeContext &ctx) {
  Tensor x = wide(ctx, 0);
  int64_t axis = ctx.attrInt("axis", 1), block = ctx.attrInt("block_size", 0);
  int outputType = int(ctx.attrInt("output_dtype", 0));
  int type = typeOf(ctx, 2, outputType ? outputType : int(onnx::TensorProto::UINT8));
  if (outputType && ctx.has(2) && ctx.input(2).elemType && outputType != type)
    ctx.fail("output_dtype " + std::to_string(outputType) + " disagrees with the zero point's type " +
             std::to_string(type));
  Tensor scale = alongAxis(ctx, wide(ctx, 1), x.shape(), axis, block, "the scale");
  std::optional<Tensor> zero;
  if (ctx.has(2))
    zero = alongAxis(ctx, wide(ctx, 2), x.shape(), axis, block, "the zero point");
  Value y = quantized(ctx, x, scale, zero, type, ctx.attrInt("saturate", 1) != 0);
  y.elemType = type;
  return {y};
}

Values dequantizeLinear(const NodeContext &ctx) {
  Tensor x = wide(ctx, 0);
  int64_t axis = ctx.attrInt("axis", 1), block = ctx.attrInt("block_size", 0);
  Tensor scaleIn = ctx.tensor(1);
  Tensor scale = alongAxis(ctx, scaleIn.to(DType::f32), x.shape(), axis, block, "the scale");
  if (ctx.has(2))
    x = x - alongAxis(ctx, wide(ctx, 2), x.shape(), axis, block, "the zero point");
  Tensor y = x * scale;
  DType out = scaleIn.dtype();
  if (int64_t given = ctx.attrInt("output_dtype", 0)) {
    std::optional<DType> dtype = computedDType(given);
    if (!dtype || *dtype == DType::i32 || *dtype == DType::boolean)
      ctx.fail("output_dtype " + std::to_string(given) + " (float, float16 or bfloat16)");
    out = *dtype;
  }
  return {Value::of(out == DType::f32 ? y : y.to(out))};
}

/// DynamicQuantizeLinear: uint8 with the scale and zero point that map
/// [min(x, 0), max(x, 0)] onto [0, 255].
Values dynamicQuantizeLinear(const NodeContext &ctx) {
  Tensor x = wide(ctx, 0);
  std::vector<int64_t> all(x.shape().size());
  for (size_t i = 0; i < all.size(); ++i)
    all[i] = int64_t(i);
  Tensor zero = Tensor::scalar(0.0f);
  Tensor high = maximum(amax(x, all, false), zero), low = minimum(amin(x, all, false), zero);
  // (All zeros: a scale of 1 / 255, not a division by zero.)
  Tensor scale = where(eq(high, low), Tensor::scalar(1.0f), high - low) / Tensor::scalar(255.0f);
  Tensor zp = minimum(maximum(round(neg(low) / scale), zero), Tensor::scalar(255.0f));
  Value y = quantized(ctx, x, scale, zp, onnx::TensorProto::UINT8);
  return {y, Value::of(scale), Value::ofBounded(zp.to(DType::i32), 0, 255)};
}

/// The largest magnitude input `i` (less its zero point) can hold: from
/// values known at import, a bounded computed value, or its quantized type.
int64_t magnitude(const NodeContext &ctx, size_t i, std::optional<size_t> zeroPoint) {
  auto bounds = [&](size_t k) -> std::optional<std::pair<int64_t, int64_t>> {
    const Value &v = ctx.input(k);
    if (v.ints && !v.ints->empty()) {
      auto [lo, hi] = std::minmax_element(v.ints->begin(), v.ints->end());
      return std::pair<int64_t, int64_t>{*lo, *hi};
    }
    if (v.bounds)
      return v.bounds;
    return integerRange(v.elemType);
  };
  auto x = bounds(i);
  if (!x)
    ctx.fail("input " + std::to_string(i) + " holds integers Kiln cannot bound",
             "Kiln computes integer products in f32, exact below 2^24, so it needs the operands' "
             "ranges: quantized initializers or QuantizeLinear results");
  std::pair<int64_t, int64_t> z{0, 0};
  if (zeroPoint && ctx.has(*zeroPoint)) {
    auto zb = bounds(*zeroPoint);
    if (!zb)
      ctx.fail("zero point " + std::to_string(*zeroPoint) + " holds integers Kiln cannot bound");
    z = *zb;
  }
  return std::max(std::abs(x->second - z.first), std::abs(x->first - z.second));
}

/// Operand `i` less its zero point (scalar, or per row of a matrix's
/// first operand / per column of its second, as ONNX allows), in f32.
Tensor centred(const NodeContext &ctx, size_t i, size_t zeroPoint, bool perColumn) {
  Tensor x = wide(ctx, i);
  if (!ctx.has(zeroPoint))
    return x;
  Tensor z = wide(ctx, zeroPoint);
  int64_t n = 1;
  for (int64_t d : z.shape())
    n *= d;
  if (n == 1)
    return x - z.reshape({});
  Shape s(x.shape().size(), 1);
  size_t at = perColumn ? s.size() - 1 : s.size() - 2;
  s[at] = n;
  return x - z.reshape(s);
}

/// Checks that a product summing `terms` products of magnitudes `a` and
/// `b` stays exact in f32.
void requireExact(const NodeContext &ctx, int64_t terms, int64_t a, int64_t b) {
  double largest = double(terms) * double(a) * double(b);
  if (largest >= double(int64_t(1) << 24))
    ctx.fail("an integer product whose sums may reach " + std::to_string(int64_t(largest)) +
                 ", past the 2^24 that Kiln's f32 integer products hold exactly",
             "dequantize the operands and multiply in float");
}

Values matMulInteger(const NodeContext &ctx) {
  Tensor a = centred(ctx, 0, 2, false), b = centred(ctx, 1, 3, true);
  int64_t k = a.shape().back();
  requireExact(ctx, k, magnitude(ctx, 0, 2), magnitude(ctx, 1, 3));
  return {Value::of(matrixProduct(a, b).to(DType::i32))};
}

/// The products' terms per output of a convolution by filter `w`.
int64_t convolutionTerms(const Tensor &w) {
  int64_t n = 1;
  for (size_t i = 1; i < w.shape().size(); ++i)
    n *= w.shape()[i];
  return n;
}

/// A filter less its zero point: a scalar, or one per output channel.
Tensor filterCentred(const NodeContext &ctx, size_t w, size_t zeroPoint) {
  Tensor f = wide(ctx, w);
  if (!ctx.has(zeroPoint))
    return f;
  Tensor z = wide(ctx, zeroPoint);
  if (z.shape().empty() || z.shape() == Shape{1})
    return f - z.reshape({});
  return f - z.reshape({z.shape()[0], 1, 1, 1});
}

Values convInteger(const NodeContext &ctx) {
  // (Padding is zero after the zero point is taken off, as ONNX pads.)
  Tensor x = ctx.has(2) ? wide(ctx, 0) - wide(ctx, 2).reshape({}) : wide(ctx, 0);
  Tensor w = filterCentred(ctx, 1, 3);
  requireExact(ctx, convolutionTerms(w), magnitude(ctx, 0, 2), magnitude(ctx, 1, 3));
  return {Value::of(convolution(ctx, x, w).to(DType::i32))};
}

/// The requantized result of an exact integer product `acc`: scaled by
/// `scale`, shifted by the output zero point, rounded (half to even, after
/// the shift, as ONNX's reference) and saturated to its type (where not
/// given, the type of input `like`).
Value requantized(const NodeContext &ctx, const Tensor &acc, const Tensor &scale, size_t zeroPoint,
                  size_t like) {
  int type = typeOf(ctx, zeroPoint, typeOf(ctx, like, onnx::TensorProto::UINT8));
  std::optional<std::pair<int64_t, int64_t>> range = integerRange(type);
  if (!range)
    ctx.fail("an output zero point of ONNX data type " + std::to_string(type),
             "Kiln requantizes to int8 and uint8");
  Tensor y = acc * scale;
  if (ctx.has(zeroPoint))
    y = y + wide(ctx, zeroPoint).reshape({});
  y = round(minimum(maximum(y, Tensor::scalar(float(range->first))),
                    Tensor::scalar(float(range->second))));
  Value v = Value::ofBounded(y.to(DType::i32), range->first, range->second);
  v.elemType = type;
  return v;
}

Values qLinearMatMul(const NodeContext &ctx) {
  // a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
  Tensor a = centred(ctx, 0, 2, false), b = centred(ctx, 3, 5, true);
  requireExact(ctx, a.shape().back(), magnitude(ctx, 0, 2), magnitude(ctx, 3, 5));
  Tensor acc = matrixProduct(a, b);
  Tensor as = wide(ctx, 1), bs = wide(ctx, 4);
  as = as.shape().size() == 1 && as.shape()[0] > 1 ? as.reshape({as.shape()[0], 1}) : as.reshape({});
  bs = bs.shape().size() == 1 && bs.shape()[0] > 1 ? bs : bs.reshape({});
  return {requantized(ctx, acc, as * bs / wide(ctx, 6).reshape({}), 7, 0)};
}

Values qLinearConv(const NodeContext &ctx) {
  // x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
  // y_zero_point, B (int32, in units of x_scale * w_scale).
  Tensor x = wide(ctx, 0) - wide(ctx, 2).reshape({});
  Tensor w = filterCentred(ctx, 3, 5);
  requireExact(ctx, convolutionTerms(w), magnitude(ctx, 0, 2), magnitude(ctx, 3, 5));
  Tensor acc = convolution(ctx, x, w);
  int64_t channels = w.shape()[0];
  if (ctx.has(8))
    acc = acc + wide(ctx, 8).reshape({1, channels, 1, 1});
  Tensor ws = wide(ctx, 4);
  ws = ws.shape().empty() || ws.shape() == Shape{1} ? ws.reshape({}) : ws.reshape({1, channels, 1, 1});
  return {requantized(ctx, acc, wide(ctx, 1).reshape({}) * ws / wide(ctx, 6).reshape({}), 7, 0)};
}
} // namespace

void onnx_import::addQuantizeConverters(ConverterTable &table) {
  table["QuantizeLinear"] = quantizeLinear;
  table["DequantizeLinear"] = dequantizeLinear;
  table["DynamicQuantizeLinear"] = dynamicQuantizeLinear;
  table["MatMulInteger"] = matMulInteger;
  table["ConvInteger"] = convInteger;
  table["QLinearMatMul"] = qLinearMatMul;
  table["QLinearConv"] = qLinearConv;
}
