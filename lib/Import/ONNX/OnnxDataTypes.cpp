//===- OnnxDataTypes.cpp - ONNX's data types and how Kiln holds them ------===//
//
// Kiln's tensors are f32, f16, bf16, i32 and bool. ONNX's other types are
// held in one of those with exactly the values the ONNX type can take:
// integers of any width as i32 (wrapped to the width where a Cast makes
// them), and the float8 and float4 formats as f32, rounded to the format
// where a Cast or a QuantizeLinear makes them, as the hardware that has
// them would. The rounding is exact f32 arithmetic: the value's binade
// picks a power-of-two step, round-half-even to a multiple of it, and
// overflow saturates or becomes inf/NaN as Cast's `saturate` says.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include <cmath>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// A float8 or float4 format: `mantissa` stored bits, normal exponents
/// `minExp`..`maxExp` (the subnormals share minExp's step), the largest
/// finite value, and what it has for overflow.
struct FloatFormat {
  int type;
  const char *name;
  int mantissa, minExp, maxExp;
  float largest;
  /// Overflow without saturation becomes inf (E5M2), else NaN.
  bool hasInf;
  /// E2M1 has neither inf nor NaN: it always saturates and NaN becomes 0.
  bool hasNaN;
};

constexpr FloatFormat kFormats[] = {
    {onnx_type::kFloat8E4M3FN, "float8e4m3fn", 3, -6, 8, 448.0f, false, true},
    {onnx_type::kFloat8E4M3FNUZ, "float8e4m3fnuz", 3, -7, 7, 240.0f, false, true},
    {onnx_type::kFloat8E5M2, "float8e5m2", 2, -14, 15, 57344.0f, true, true},
    {onnx_type::kFloat8E5M2FNUZ, "float8e5m2fnuz", 2, -15, 15, 57344.0f, false, true},
    {onnx_type::kFloat4E2M1, "float4e2m1", 1, 0, 2, 6.0f, false, false},
};

const FloatFormat *formatOf(int type) {
  for (const FloatFormat &f : kFormats)
    if (f.type == type)
      return &f;
  return nullptr;
}
} // namespace

int onnx_import::integerBits(int type) {
  switch (type) {
  case onnx_type::kUint2:
  case onnx_type::kInt2:
    return 2;
  case onnx_type::kUint4:
  case onnx_type::kInt4:
    return 4;
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::INT8:
    return 8;
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::INT16:
    return 16;
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::INT32:
    return 32;
  case onnx::TensorProto::UINT64:
  case onnx::TensorProto::INT64:
    return 64;
  default:
    return 0;
  }
}

bool onnx_import::isUnsignedInteger(int type) {
  return type == onnx::TensorProto::UINT8 || type == onnx::TensorProto::UINT16 ||
         type == onnx::TensorProto::UINT32 || type == onnx::TensorProto::UINT64 ||
         type == onnx_type::kUint4 || type == onnx_type::kUint2;
}

std::optional<std::pair<int64_t, int64_t>> onnx_import::integerRange(int type) {
  int bits = integerBits(type);
  if (bits == 0 || bits > 32)
    return std::nullopt;
  if (isUnsignedInteger(type))
    return std::pair<int64_t, int64_t>{0, (int64_t(1) << bits) - 1};
  return std::pair<int64_t, int64_t>{-(int64_t(1) << (bits - 1)), (int64_t(1) << (bits - 1)) - 1};
}

int64_t onnx_import::wrapInteger(int64_t v, int type) {
  int width = integerBits(type);
  if (width == 0 || width == 64)
    return v;
  uint64_t mask = (uint64_t(1) << width) - 1, bits = uint64_t(v) & mask;
  if (!isUnsignedInteger(type) && (bits >> (width - 1)))
    bits |= ~mask; // sign-extended
  return int64_t(bits);
}

bool onnx_import::isNarrowFloat(int type) { return formatOf(type) != nullptr; }

double onnx_import::narrowFloatValue(uint32_t bits, int type) {
  if (type == onnx_type::kFloat8E8M0) // an exponent alone; 0xff is NaN
    return bits == 0xff ? NAN : std::ldexp(1.0, int(bits) - 127);
  const FloatFormat *f = formatOf(type);
  int exponentBits = f->mantissa == 3 ? 4 : f->mantissa == 2 ? 5 : 2;
  uint32_t signBit = 1u << (exponentBits + f->mantissa);
  uint32_t exponent = (bits >> f->mantissa) & ((1u << exponentBits) - 1);
  uint32_t mantissa = bits & ((1u << f->mantissa) - 1);
  double sign = bits & signBit ? -1.0 : 1.0;
  bool fnuz = type == onnx_type::kFloat8E4M3FNUZ || type == onnx_type::kFloat8E5M2FNUZ;
  if (fnuz && bits == signBit) // the one NaN; FNUZ formats have no -0
    return NAN;
  uint32_t allOnes = (1u << exponentBits) - 1;
  if (type == onnx_type::kFloat8E4M3FN && exponent == allOnes && mantissa == 7)
    return NAN;
  if (type == onnx_type::kFloat8E5M2 && exponent == allOnes)
    return mantissa ? NAN : sign * INFINITY;
  int bias = 1 - f->minExp; // the minimum normal exponent is 1 - bias
  if (exponent == 0)
    return sign * std::ldexp(double(mantissa), f->minExp - f->mantissa);
  return sign * std::ldexp(double((1u << f->mantissa) | mantissa),
                           int(exponent) - bias - f->mantissa);
}

Tensor onnx_import::roundToNarrowFloat(const NodeContext &ctx, const Tensor &input, int type,
                                       bool saturate) {
  const FloatFormat *f = formatOf(type);
  if (!f)
    ctx.fail("a cast to ONNX data type " + std::to_string(type) + ", which Kiln does not round to",
             "Kiln rounds to float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz and "
             "float4e2m1 (held in f32)");
  Tensor x = input.dtype() == DType::f32 ? input : input.to(DType::f32);
  Tensor a = abs(x);
  // The step between neighbours in a's binade, 2^(e - mantissa), from the
  // smallest (subnormals') up: one comparison per binade, all exact.
  Tensor step = Tensor::scalar(std::ldexp(1.0f, f->minExp - f->mantissa));
  for (int e = f->minExp + 1; e <= f->maxExp; ++e)
    step = where(ge(a, Tensor::scalar(std::ldexp(1.0f, e))),
                 Tensor::scalar(std::ldexp(1.0f, e - f->mantissa)), step);
  Tensor r = round(a / step) * step; // half to even; powers of two divide exactly
  bool saturates = saturate || !f->hasNaN;
  float overflow = saturates ? f->largest : f->hasInf ? INFINITY : NAN;
  r = where(gt(r, Tensor::scalar(f->largest)), Tensor::scalar(overflow), r);
  if (!f->hasNaN)
    r = where(ne(a, a), Tensor::scalar(0.0f), r);
  return where(lt(x, Tensor::scalar(0.0f)), neg(r), r);
}

Tensor onnx_import::castToInteger(const Tensor &input, int type) {
  Tensor x = input.dtype() == DType::f32 ? input : input.to(DType::f32);
  if (input.dtype() != DType::i32 && input.dtype() != DType::boolean) // toward zero
    x = where(lt(x, Tensor::scalar(0.0f)), ceil(x), floor(x));
  int bits = integerBits(type);
  if (bits > 0 && bits < 32) {
    // x mod 2^bits, into the type's range (exact in f32 below 2^24).
    float span = std::ldexp(1.0f, bits);
    float low = isUnsignedInteger(type) ? 0.0f : -span / 2;
    x = x - Tensor::scalar(span) * floor((x - Tensor::scalar(low)) / Tensor::scalar(span));
  }
  return x.to(DType::i32);
}

std::string onnx_import::dataTypeName(int type) {
  if (const FloatFormat *f = formatOf(type))
    return f->name;
  switch (type) {
  case onnx_type::kFloat8E8M0:
    return "float8e8m0";
  case onnx_type::kUint4:
    return "uint4";
  case onnx_type::kInt4:
    return "int4";
  case onnx_type::kUint2:
    return "uint2";
  case onnx_type::kInt2:
    return "int2";
  default:
    return onnx::TensorProto::DataType_IsValid(type)
               ? onnx::TensorProto::DataType_Name(onnx::TensorProto::DataType(type))
               : "data type " + std::to_string(type);
  }
}
