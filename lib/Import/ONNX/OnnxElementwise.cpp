//===- OnnxElementwise.cpp - ONNX activations and logic -------------------===//
//
// Activations written with the Tensor API's elementwise ops (Elu, Selu,
// Celu, Softplus, Softsign, ThresholdedRelu, PRelu, Shrink, Mish), Sin,
// Cos, Tan, Atan, Asin, Acos, the hyperbolic functions, Floor, Ceil, Round and Mod, the
// boolean operators (And, Or, Xor), the bit operators on integers known at
// import, IsNaN, IsInf, Sign, the variadic Sum and
// Mean, and CastLike. Each computes in its input's floating dtype; booleans
// are compared as 0 and 1.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"
#include "lib/Frontend/OpRecording.h"

#include <cmath>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// `value` in `like`'s floating dtype (a literal).
Tensor literal(float value, const Tensor &like) {
  return detail::scalarLike(value, like, std::source_location::current());
}

Tensor expMinusOne(const Tensor &x) { return exp(x) - literal(1.0f, x); }

Tensor softplus(const Tensor &x) { return log(exp(x) + literal(1.0f, x)); }

/// A boolean operator: both operands as 0 and 1, or folded when both are
/// known at import.
Converter logic(int64_t (*fold)(int64_t, int64_t), Tensor (*make)(const Tensor &, const Tensor &)) {
  return [fold, make](const NodeContext &ctx) -> std::vector<Value> {
    if (std::optional<Value> folded = foldInts(
            {&ctx.input(0), &ctx.input(1)},
            [fold](const int64_t *v) { return fold(v[0] != 0, v[1] != 0); }))
      return {*folded};
    return single(make(ctx.tensor(0).to(DType::f32), ctx.tensor(1).to(DType::f32)));
  };
}

/// A bit operator (BitwiseAnd/Or/Xor, BitShift) on integers known at
/// import, with a scalar broadcast; Kiln's run-time integers are int32
/// through f32, which has no bits to operate on, so a computed operand is
/// an error.
Converter bits(int64_t (*fold)(int64_t, int64_t, const NodeContext &, int)) {
  return [fold](const NodeContext &ctx) -> std::vector<Value> {
    const Value &a = ctx.input(0), &b = ctx.input(1);
    if (!a.ints || !b.ints)
      ctx.fail("a bit operation on values computed at run time",
               "Kiln folds " + ctx.node.op_type() +
                   " where both operands are known at import (constants, shape arithmetic)");
    int type = a.elemType;
    std::optional<Value> v = foldInts({&a, &b}, [&](const int64_t *x) {
      return wrapInteger(fold(x[0], x[1], ctx, type), type);
    });
    if (!v)
      ctx.fail("operands of shapes that do not broadcast");
    v->elemType = type;
    return {*v};
  };
}

/// atan(x) for any x: |x| > 1 through pi/2 - atan(1/|x|), then t above
/// tan(pi/12) through pi/6 + atan((t sqrt3 - 1) / (t + sqrt3)), leaving
/// |u| <= 0.268 for the odd series to u^9 (error below 1e-7), sign put back.
Tensor arctan(const Tensor &x) {
  Tensor a = abs(x), one = literal(1.0f, x);
  Tensor big = gt(a, one);
  Tensor t = where(big, one / a, a);
  const float sqrt3 = 1.7320508f, pi = 3.14159265f;
  Tensor far = gt(t, literal(0.26794919f, x));
  Tensor u = where(far, (t * literal(sqrt3, x) - one) / (t + literal(sqrt3, x)), t);
  Tensor u2 = u * u;
  Tensor series = u * (one + u2 * (literal(-1.0f / 3, x) +
                                   u2 * (literal(1.0f / 5, x) +
                                         u2 * (literal(-1.0f / 7, x) + u2 * literal(1.0f / 9, x)))));
  Tensor r = where(far, series + literal(pi / 6, x), series);
  r = where(big, literal(pi / 2, x) - r, r);
  return where(lt(x, literal(0.0f, x)), neg(r), r);
}

std::vector<Value> sign(const NodeContext &ctx) {
  const Value &v = ctx.input(0);
  if (v.ints) {
    std::vector<int64_t> out(v.ints->size());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = ((*v.ints)[i] > 0) - ((*v.ints)[i] < 0);
    return {Value::ofInts(std::move(out), v.shape)};
  }
  Tensor x = ctx.tensor(0), zero = literal(0.0f, x);
  return single(where(gt(x, zero), literal(1.0f, x),
                      where(lt(x, zero), literal(-1.0f, x), zero)));
}

std::vector<Value> isInf(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  bool positive = ctx.attrInt("detect_positive", 1) != 0;
  bool negative = ctx.attrInt("detect_negative", 1) != 0;
  Tensor big = literal(INFINITY, x);
  if (positive && negative)
    return single(eq(abs(x), big));
  if (positive)
    return single(eq(x, big));
  if (negative)
    return single(eq(x, neg(big)));
  return single(lt(abs(x), literal(-1.0f, x))); // detects neither: never true
}

/// Sum and Mean of any number of inputs, broadcast.
Converter variadicSum(bool average) {
  return [average](const NodeContext &ctx) -> std::vector<Value> {
    Tensor y = ctx.tensor(0);
    for (size_t i = 1; i < ctx.numInputs(); ++i)
      y = y + ctx.tensor(i);
    if (average && ctx.numInputs() > 1)
      y = y / literal(float(ctx.numInputs()), y);
    return single(y);
  };
}

/// Mod: integers known at import fold (fmod = 0 takes the divisor's sign,
/// as Python's %; 1 the dividend's, as C's fmod); floats need fmod = 1 and
/// are a - trunc(a / b) b.
std::vector<Value> mod(const NodeContext &ctx) {
  const Value &a = ctx.input(0), &b = ctx.input(1);
  bool fmod = ctx.attrInt("fmod", 0) != 0;
  bool byZero = false;
  std::optional<Value> folded = foldInts({&a, &b}, [&](const int64_t *v) -> int64_t {
    if (v[1] == 0) {
      byZero = true;
      return 0;
    }
    int64_t r = v[0] % v[1];
    return !fmod && r != 0 && ((r < 0) != (v[1] < 0)) ? r + v[1] : r;
  });
  if (byZero)
    ctx.fail("an integer Mod by zero");
  if (folded)
    return {*folded};
  Tensor x = ctx.tensor(0), y = ctx.tensor(1);
  Tensor q = x / y;
  // fmod: C's, truncated; else Python's %, whose remainder takes the
  // divisor's sign.
  Tensor r = fmod ? x - where(lt(q, literal(0.0f, q)), kiln::ceil(q), kiln::floor(q)) * y
                  : x - kiln::floor(q) * y;
  // An infinite divisor of a finite x leaves x (0 * inf would be NaN), or
  // for % gives the divisor where the signs differ (-3 % inf is inf).
  Tensor inf = literal(INFINITY, x);
  Tensor byInf = fmod ? x : where(lt(x * y, literal(0.0f, x)), y, x);
  return single(where(eq(abs(y), inf), where(lt(abs(x), inf), byInf, r), r));
}

/// CastLike: a Cast to the type of the second input.
std::vector<Value> castLike(const NodeContext &ctx) {
  const Value &like = ctx.input(1);
  int to = like.elemType;
  if (!to && like.ints)
    to = onnx::TensorProto::INT64;
  if (!to)
    switch (like.tensor->dtype()) {
    case DType::f16:
      to = onnx::TensorProto::FLOAT16;
      break;
    case DType::bf16:
      to = onnx::TensorProto::BFLOAT16;
      break;
    case DType::i32:
      to = onnx::TensorProto::INT32;
      break;
    case DType::boolean:
      to = onnx::TensorProto::BOOL;
      break;
    default:
      to = onnx::TensorProto::FLOAT;
    }
  return castValue(ctx, ctx.input(0), to, ctx.attrInt("saturate", 1) != 0);
}
} // namespace

void onnx_import::addElementwiseConverters(ConverterTable &table) {
  table["Elu"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    Tensor negative = literal(c.attrFloat("alpha", 1.0f), x) * expMinusOne(x);
    return single(where(gt(x, literal(0.0f, x)), x, negative));
  };
  table["Selu"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    Tensor negative = literal(c.attrFloat("alpha", 1.67326319217681884765625f), x) * expMinusOne(x);
    return single(literal(c.attrFloat("gamma", 1.05070102214813232421875f), x) *
                  where(gt(x, literal(0.0f, x)), x, negative));
  };
  table["Celu"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    float alpha = c.attrFloat("alpha", 1.0f);
    Tensor negative = literal(alpha, x) * expMinusOne(x / literal(alpha, x));
    return single(maximum(x, literal(0.0f, x)) + minimum(negative, literal(0.0f, x)));
  };
  table["Softplus"] = [](const NodeContext &c) { return single(softplus(c.tensor(0))); };
  table["Softsign"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    return single(x / (literal(1.0f, x) + abs(x)));
  };
  table["ThresholdedRelu"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    return single(where(gt(x, literal(c.attrFloat("alpha", 1.0f), x)), x, literal(0.0f, x)));
  };
  table["PRelu"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0), slope = c.tensor(1);
    return single(where(lt(x, literal(0.0f, x)), x * slope, x));
  };
  table["Shrink"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    Tensor bias = literal(c.attrFloat("bias", 0.0f), x);
    float lambd = c.attrFloat("lambd", 0.5f);
    return single(where(lt(x, literal(-lambd, x)), x + bias,
                        where(gt(x, literal(lambd, x)), x - bias, literal(0.0f, x))));
  };
  table["Mish"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    return single(x * tanh(softplus(x)));
  };
  table["And"] = logic([](int64_t a, int64_t b) -> int64_t { return a && b; },
                       [](const Tensor &a, const Tensor &b) { return gt(a * b, Tensor::scalar(0.0f)); });
  table["Or"] = logic([](int64_t a, int64_t b) -> int64_t { return a || b; },
                      [](const Tensor &a, const Tensor &b) { return gt(a + b, Tensor::scalar(0.0f)); });
  table["Xor"] = logic([](int64_t a, int64_t b) -> int64_t { return a != b; },
                       [](const Tensor &a, const Tensor &b) { return ne(a, b); });
  table["Sin"] = [](const NodeContext &c) { return single(kiln::sin(c.tensor(0))); };
  table["Cos"] = [](const NodeContext &c) { return single(kiln::cos(c.tensor(0))); };
  table["Tan"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    return single(kiln::sin(x) / kiln::cos(x));
  };
  table["BitwiseAnd"] = bits([](int64_t a, int64_t b, const NodeContext &, int) { return a & b; });
  table["BitwiseOr"] = bits([](int64_t a, int64_t b, const NodeContext &, int) { return a | b; });
  table["BitwiseXor"] = bits([](int64_t a, int64_t b, const NodeContext &, int) { return a ^ b; });
  table["BitShift"] = bits([](int64_t a, int64_t b, const NodeContext &c, int type) -> int64_t {
    // numpy's shifts: a shift outside [0, width) leaves nothing (0), or
    // the sign (-1) of a negative value shifted right; signed values shift
    // right arithmetically.
    std::string direction = c.attrString("direction", "");
    if (direction != "LEFT" && direction != "RIGHT")
      c.fail("direction '" + direction + "' (LEFT or RIGHT)");
    bool left = direction == "LEFT";
    if (b < 0 || b >= (integerBits(type) ? integerBits(type) : 64))
      return !left && a < 0 && !isUnsignedInteger(type) ? -1 : 0;
    if (left)
      return int64_t(uint64_t(a) << b);
    return isUnsignedInteger(type) ? int64_t(uint64_t(a) >> b) : a >> b;
  });
  table["BitwiseNot"] = [](const NodeContext &c) -> std::vector<Value> {
    const Value &x = c.input(0);
    if (!x.ints)
      c.fail("a bit operation on values computed at run time",
             "Kiln folds BitwiseNot where its operand is known at import");
    std::vector<int64_t> out(x.ints->size());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = wrapInteger(~(*x.ints)[i], x.elemType);
    Value v = Value::ofInts(std::move(out), x.shape);
    v.elemType = x.elemType;
    return {v};
  };
  table["Atan"] = [](const NodeContext &c) { return single(arctan(c.tensor(0))); };
  table["Asin"] = [](const NodeContext &c) {
    // asin x = atan(x / sqrt(1 - x^2)); |x| = 1 divides by zero to +-pi/2.
    Tensor x = c.tensor(0);
    return single(arctan(x / sqrt((literal(1.0f, x) - x) * (literal(1.0f, x) + x))));
  };
  table["Acos"] = [](const NodeContext &c) {
    // acos x = 2 atan(sqrt((1 - x) / (1 + x))): no cancellation near 1.
    Tensor x = c.tensor(0), one = literal(1.0f, x);
    return single(arctan(sqrt((one - x) / (one + x))) * literal(2.0f, x));
  };
  table["Floor"] = [](const NodeContext &c) { return single(kiln::floor(c.tensor(0))); };
  table["Ceil"] = [](const NodeContext &c) { return single(kiln::ceil(c.tensor(0))); };
  table["Round"] = [](const NodeContext &c) { return single(kiln::round(c.tensor(0))); };
  table["Sinh"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    return single((exp(x) - exp(neg(x))) * literal(0.5f, x));
  };
  table["Cosh"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    return single((exp(x) + exp(neg(x))) * literal(0.5f, x));
  };
  table["Asinh"] = [](const NodeContext &c) {
    // Odd: computed on |x| (no cancellation for negative x), sign put back.
    Tensor x = c.tensor(0), m = abs(x);
    Tensor y = log(m + sqrt(m * m + literal(1.0f, x)));
    return single(where(lt(x, literal(0.0f, x)), neg(y), y));
  };
  table["Acosh"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    return single(log(x + sqrt(x * x - literal(1.0f, x))));
  };
  table["Atanh"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0), one = literal(1.0f, x);
    return single(log((one + x) / (one - x)) * literal(0.5f, x));
  };
  table["Mod"] = mod;
  table["Swish"] = [](const NodeContext &c) { // (Swish-24)
    Tensor x = c.tensor(0);
    return single(x * sigmoid(x * literal(c.attrFloat("alpha", 1.0f), x)));
  };
  table["IsNaN"] = [](const NodeContext &c) {
    Tensor x = c.tensor(0);
    return single(ne(x, x));
  };
  table["IsInf"] = isInf;
  table["Sign"] = sign;
  table["Sum"] = variadicSum(false);
  table["Mean"] = variadicSum(true);
  table["CastLike"] = castLike;
}
