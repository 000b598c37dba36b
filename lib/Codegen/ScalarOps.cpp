//===- ScalarOps.cpp - one kiln op on one element or vector --------------===//

#include "KernelBuilding.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <numbers>

using namespace mlir;
using namespace kiln;

/// A float constant of `type`, a scalar or a splat vector.
Value kiln::heldSlot(OpBuilder &b, Location loc, int64_t none) {
  Value slot = memref::AllocaOp::create(b, loc, MemRefType::get({1}, b.getIndexType()));
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  memref::StoreOp::create(b, loc, arith::ConstantIndexOp::create(b, loc, none), slot,
                          ValueRange{zero});
  return slot;
}

OpBuilder kiln::whenHeldChanges(OpBuilder &b, Location loc, Value slot, Value key) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value stale = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                      memref::LoadOp::create(b, loc, slot, ValueRange{zero}), key);
  auto ifStale = scf::IfOp::create(b, loc, stale, /*withElseRegion=*/false);
  OpBuilder then = OpBuilder::atBlockBegin(&ifStale.getThenRegion().front());
  memref::StoreOp::create(then, loc, key, slot, ValueRange{zero});
  return then;
}

Value kiln::floatConstant(OpBuilder &b, Location loc, Type type, double value) {
  if (auto vector = dyn_cast<VectorType>(type))
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(vector, b.getFloatAttr(vector.getElementType(), value)));
  return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, value));
}

Value kiln::widenToF32(OpBuilder &b, Location loc, Value v) {
  Type f32 = Float32Type::get(b.getContext());
  if (getElementTypeOrSelf(v.getType()) == f32)
    return v;
  if (auto vector = dyn_cast<VectorType>(v.getType()))
    return arith::ExtFOp::create(b, loc, VectorType::get(vector.getShape(), f32), v);
  return arith::ExtFOp::create(b, loc, f32, v);
}

std::pair<Value, Value> kiln::clampedIndex(OpBuilder &b, Location loc, Value i, int64_t size) {
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value inside = arith::AndIOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, i, c(0)),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, c(size)));
  Value clamped = arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, i, c(0)),
                                         c(size - 1));
  return {inside, clamped};
}

static arith::CmpFPredicate toArith(CmpPredicate predicate) {
  switch (predicate) {
  case CmpPredicate::eq: return arith::CmpFPredicate::OEQ;
  case CmpPredicate::ne: return arith::CmpFPredicate::UNE;
  case CmpPredicate::lt: return arith::CmpFPredicate::OLT;
  case CmpPredicate::le: return arith::CmpFPredicate::OLE;
  case CmpPredicate::gt: return arith::CmpFPredicate::OGT;
  case CmpPredicate::ge: return arith::CmpFPredicate::OGE;
  }
  llvm_unreachable("unknown predicate");
}

/// Element conversion between f32, f16, bf16, i32 and i1, of scalars or of
/// vectors (`to` then a vector type of the same lanes).
static Value castScalar(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  auto isFloat = [](Type t) { return isa<FloatType>(getElementTypeOrSelf(t)); };
  auto width = [](Type t) { return getElementTypeOrSelf(t).getIntOrFloatBitWidth(); };
  // `element` in v's shape.
  auto shaped = [&](Type element) -> Type {
    if (auto vector = dyn_cast<VectorType>(from))
      return vector.clone(element);
    return element;
  };
  auto intConstant = [&](Type t, int64_t value) -> Value {
    auto attr = b.getIntegerAttr(getElementTypeOrSelf(t), value);
    if (auto vector = dyn_cast<VectorType>(t))
      return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vector, attr));
    return arith::ConstantOp::create(b, loc, attr);
  };
  auto zero = [&](Type t) -> Value {
    return isFloat(t) ? floatConstant(b, loc, t, 0.0) : intConstant(t, 0);
  };
  if (getElementTypeOrSelf(to).isInteger(1))
    return isFloat(from)
               ? arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v, zero(from)).getResult()
               : arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v, zero(from)).getResult();
  if (getElementTypeOrSelf(from).isInteger(1))
    return isFloat(to) ? arith::UIToFPOp::create(b, loc, to, v).getResult()
                       : arith::ExtUIOp::create(b, loc, to, v).getResult();
  Type f32 = shaped(b.getF32Type());
  if (isFloat(from) && isFloat(to)) {
    // bf16 <-> f16 have one width: through f32, which holds both exactly.
    if (width(from) == width(to)) {
      v = arith::ExtFOp::create(b, loc, f32, v);
      from = f32;
    }
    return width(from) < width(to) ? arith::ExtFOp::create(b, loc, to, v).getResult()
                                   : arith::TruncFOp::create(b, loc, to, v).getResult();
  }
  if (isFloat(from)) {
    // Saturating, NaN to 0: out-of-range values are poison for fptosi (x86
    // gives INT_MIN for 1e10), and an index made from 1e10 must clamp to
    // the last row, not wrap to the first. 2147483520 is the largest f32
    // below 2^31 (in f16 every finite value is in range).
    Value wide = width(from) < 32 ? arith::ExtFOp::create(b, loc, f32, v).getResult() : v;
    Value clamped = arith::MaxNumFOp::create(b, loc, wide, floatConstant(b, loc, f32, -2147483648.0));
    clamped = arith::MinNumFOp::create(b, loc, clamped, floatConstant(b, loc, f32, 2147483520.0));
    Value isNaN = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, wide, wide);
    clamped = arith::SelectOp::create(b, loc, isNaN, floatConstant(b, loc, f32, 0.0), clamped);
    Value converted = arith::FPToSIOp::create(b, loc, to, clamped);
    Value above = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, wide,
                                        floatConstant(b, loc, f32, 2147483648.0));
    Value largest = intConstant(to, width(to) >= 32 ? INT32_MAX : 0x7FFF);
    return arith::SelectOp::create(b, loc, above, largest, converted);
  }
  return arith::SIToFPOp::create(b, loc, to, v);
}

/// The computation of one kiln op on one element (lanes == 1) or on a
/// vector of `lanes` elements; null when unsupported.
/// erfc(z) for z >= 0 (f32 or a vector of it): Abramowitz & Stegun 7.1.26,
/// |error| <= 1.5e-7, one exp and one division. MLIR's erf polynomial
/// evaluates three intervals and selects; GELU ran at 73% of PyTorch's
/// speed on the H200 with it.
static Value erfcOfNonNegative(OpBuilder &b, Location loc, Value z, Type type) {
  auto c = [&](double v) { return floatConstant(b, loc, type, v); };
  Value t = arith::DivFOp::create(b, loc, c(1.0),
                                  math::FmaOp::create(b, loc, z, c(0.3275911), c(1.0)));
  Value poly = c(1.061405429);
  for (double a : {-1.453152027, 1.421413741, -0.284496736, 0.254829592})
    poly = math::FmaOp::create(b, loc, poly, t, c(a));
  poly = arith::MulFOp::create(b, loc, poly, t);
  return arith::MulFOp::create(
      b, loc, poly,
      math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, arith::MulFOp::create(b, loc, z, z))));
}

/// Math op `MathOp` on `x`, an f16 or bf16 value (or vector) computed in
/// f32 and rounded back: SPIR-V has no f16 forms of some (floor, ceil),
/// and f32 gives the result PyTorch's half-precision kernels give.
template <typename MathOp> static Value inF32(OpBuilder &b, Location loc, Value x) {
  Type type = x.getType();
  Type element = getElementTypeOrSelf(type);
  if (!element.isF16() && !element.isBF16())
    return MathOp::create(b, loc, x);
  Type wide = isa<VectorType>(type)
                  ? Type(VectorType::get(cast<VectorType>(type).getShape(), b.getF32Type()))
                  : Type(b.getF32Type());
  Value y = MathOp::create(b, loc, arith::ExtFOp::create(b, loc, wide, x));
  return arith::TruncFOp::create(b, loc, type, y);
}

Value kiln::emitScalar(OpBuilder &b, Operation *op, ValueRange args, int64_t lanes) {
  Location loc = op->getLoc();
  Type type = getElementTypeOrSelf(op->getResult(0).getType());
  if (lanes > 1)
    type = VectorType::get({lanes}, type);
  auto one = [&] { return floatConstant(b, loc, type, 1.0); };
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](ConstantOp c) -> Value {
        auto dense = cast<DenseElementsAttr>(c.getValue());
        auto splat = cast<TypedAttr>(dense.getSplatValue<Attribute>());
        if (auto vector = dyn_cast<VectorType>(type))
          return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vector, splat));
        return arith::ConstantOp::create(b, loc, splat);
      })
      .Case([&](NegOp) { return arith::NegFOp::create(b, loc, args[0]); })
      .Case([&](AbsOp) -> Value {
        // math.absf on f16 has no SPIR-V lowering in MLIR 22: max(x, -x)
        // (NaN stays NaN, -0 becomes +0).
        if (getElementTypeOrSelf(type).isF32())
          return math::AbsFOp::create(b, loc, args[0]);
        return arith::MaximumFOp::create(b, loc, args[0], arith::NegFOp::create(b, loc, args[0]));
      })
      .Case([&](ExpOp) { return math::ExpOp::create(b, loc, args[0]); })
      .Case([&](LogOp) { return math::LogOp::create(b, loc, args[0]); })
      .Case([&](SqrtOp) { return math::SqrtOp::create(b, loc, args[0]); })
      .Case([&](RsqrtOp) { return math::RsqrtOp::create(b, loc, args[0]); })
      .Case([&](TanhOp) { return math::TanhOp::create(b, loc, args[0]); })
      .Case([&](SinOp) { return inF32<math::SinOp>(b, loc, args[0]); })
      .Case([&](CosOp) { return inF32<math::CosOp>(b, loc, args[0]); })
      .Case([&](FloorOp) { return inF32<math::FloorOp>(b, loc, args[0]); })
      .Case([&](CeilOp) { return inF32<math::CeilOp>(b, loc, args[0]); })
      .Case([&](RoundOp) { return inF32<math::RoundEvenOp>(b, loc, args[0]); })
      .Case([&](SigmoidOp) -> Value {
        Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, args[0]));
        return arith::DivFOp::create(b, loc, one(),
                                     arith::AddFOp::create(b, loc, one(), e));
      })
      .Case([&](ReluOp) {
        return arith::MaximumFOp::create(b, loc, args[0],
                                         floatConstant(b, loc, type, 0.0));
      })
      .Case([&](GeluOp) -> Value {
        // x/2 * (1 + erf(x / sqrt(2))), the exact form PyTorch uses by
        // default, with 1 + erf(-z) = erfc(z) for z >= 0: no cancellation
        // for negative x. f16 and bf16 are computed in f32.
        Value x = args[0];
        Type wide = type;
        if (getElementTypeOrSelf(type).isF16() || getElementTypeOrSelf(type).isBF16()) {
          wide = isa<VectorType>(type) ? Type(VectorType::get(cast<VectorType>(type).getShape(),
                                                              b.getF32Type()))
                                       : Type(b.getF32Type());
          x = arith::ExtFOp::create(b, loc, wide, x);
        }
        auto c = [&](double v) { return floatConstant(b, loc, wide, v); };
        Value z = arith::MulFOp::create(b, loc, math::AbsFOp::create(b, loc, x),
                                        c(std::numbers::sqrt2 / 2));
        Value erfc = erfcOfNonNegative(b, loc, z, wide);
        Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, x, c(0.0));
        Value onePlusErf = arith::SelectOp::create(
            b, loc, positive, arith::SubFOp::create(b, loc, c(2.0), erfc), erfc);
        Value y = arith::MulFOp::create(b, loc, arith::MulFOp::create(b, loc, x, c(0.5)),
                                        onePlusErf);
        return wide == type ? y : arith::TruncFOp::create(b, loc, type, y).getResult();
      })
      .Case([&](ErfOp) -> Value {
        // erf(x) = sign(x) (1 - erfc(|x|)), the same approximation as GELU's
        // (|error| <= 1.5e-7); f16 and bf16 in f32.
        Value x = args[0];
        Type wide = type;
        if (getElementTypeOrSelf(type).isF16() || getElementTypeOrSelf(type).isBF16()) {
          wide = isa<VectorType>(type) ? Type(VectorType::get(cast<VectorType>(type).getShape(),
                                                              b.getF32Type()))
                                       : Type(b.getF32Type());
          x = arith::ExtFOp::create(b, loc, wide, x);
        }
        auto c = [&](double v) { return floatConstant(b, loc, wide, v); };
        Value oneMinus = arith::SubFOp::create(
            b, loc, c(1.0), erfcOfNonNegative(b, loc, math::AbsFOp::create(b, loc, x), wide));
        Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, x, c(0.0));
        Value y = arith::SelectOp::create(b, loc, positive, oneMinus,
                                          arith::NegFOp::create(b, loc, oneMinus));
        return wide == type ? y : arith::TruncFOp::create(b, loc, type, y).getResult();
      })
      .Case([&](AddOp) { return arith::AddFOp::create(b, loc, args[0], args[1]); })
      .Case([&](SubOp) { return arith::SubFOp::create(b, loc, args[0], args[1]); })
      .Case([&](MulOp) { return arith::MulFOp::create(b, loc, args[0], args[1]); })
      .Case([&](DivOp) { return arith::DivFOp::create(b, loc, args[0], args[1]); })
      .Case([&](MaxOp) { return arith::MaximumFOp::create(b, loc, args[0], args[1]); })
      .Case([&](MinOp) { return arith::MinimumFOp::create(b, loc, args[0], args[1]); })
      .Case([&](PowOp) { return math::PowFOp::create(b, loc, args[0], args[1]); })
      .Case([&](CastOp) { return castScalar(b, loc, args[0], type); })
      .Case([&](CmpOp c) {
        return arith::CmpFOp::create(b, loc, toArith(c.getPredicate()), args[0],
                                     args[1]);
      })
      .Case([&](SelectOp) {
        return arith::SelectOp::create(b, loc, args[0], args[1], args[2]);
      })
      .Default([](Operation *) { return Value(); });
}

/// The identity of a reduction and its combining step.
Value kiln::reductionInit(OpBuilder &b, Location loc, ReduceKind kind, Type type) {
  double value = 0;
  if (kind == ReduceKind::max)
    value = -std::numeric_limits<double>::infinity();
  else if (kind == ReduceKind::min)
    value = std::numeric_limits<double>::infinity();
  else if (kind == ReduceKind::prod)
    value = 1;
  return floatConstant(b, loc, type, value);
}

Value kiln::reductionStep(OpBuilder &b, Location loc, ReduceKind kind, Value acc, Value v) {
  switch (kind) {
  case ReduceKind::sum:
  case ReduceKind::mean: return arith::AddFOp::create(b, loc, acc, v);
  case ReduceKind::max: return arith::MaximumFOp::create(b, loc, acc, v);
  case ReduceKind::min: return arith::MinimumFOp::create(b, loc, acc, v);
  case ReduceKind::prod: return arith::MulFOp::create(b, loc, acc, v);
  }
  llvm_unreachable("unknown reduction");
}

