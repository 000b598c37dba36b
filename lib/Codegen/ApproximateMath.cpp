//===- ApproximateMath.cpp - polynomials for math the targets lack --------===//
//
// SPIR-V's GLSL instruction set has no erf; MLIR's polynomial keeps f32
// accuracy. For GPUs erf is rewritten, and pow gets C's special cases
// around GLSL's Pow (undefined for x < 0, and for x = 0 with y <= 0:
// lavapipe returned 0 for 0^0, 0^-1 and (-8)^(1/3)); the others lower
// natively. On the CPU libm calls would stop vectorization, so all of them
// are, except pow, which libm gets right.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNAPPROXIMATEMATH
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
/// pow(x, y) as C and PyTorch define it, from GLSL's Pow of |x| where that
/// is defined: 1 when y = 0 or x = 1 (even with NaN) and for (-1)^(+-inf),
/// NaN for a finite negative x and a non-integer y, 0 or inf at x = +-0,
/// the sign of x for an odd integer y. f32 only: f16 pow is widened to f32
/// first.
struct PowSpecialCases : OpRewritePattern<math::PowFOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(math::PowFOp op, PatternRewriter &rewriter) const override {
    Value x = op.getLhs(), y = op.getRhs();
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32() || x.getDefiningOp<math::AbsFOp>())
      return failure(); // f16 waits for its f32 form; |x| is this rewrite's own
    Location loc = op.getLoc();
    PatternRewriter &b = rewriter;
    auto c = [&](double v) -> Value {
      auto attr = b.getF32FloatAttr(static_cast<float>(v));
      if (auto vec = dyn_cast<VectorType>(type))
        return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vec, attr.getValue()));
      return arith::ConstantOp::create(b, loc, attr);
    };
    auto cmp = [&](arith::CmpFPredicate p, Value l, Value r) {
      return arith::CmpFOp::create(b, loc, p, l, r).getResult();
    };
    auto sel = [&](Value cond, Value t, Value f) {
      return arith::SelectOp::create(b, loc, cond, t, f).getResult();
    };
    double inf = std::numeric_limits<double>::infinity();
    Value a = math::AbsFOp::create(b, loc, x);
    Value mag = math::PowFOp::create(b, loc, a, y);
    mag = sel(cmp(arith::CmpFPredicate::OEQ, a, c(0)),
              sel(cmp(arith::CmpFPredicate::OLT, y, c(0)), c(inf), c(0)), mag);
    // |x| = 1: GLSL's exp2(y log2 |x|) is NaN for infinite y; C says 1.
    mag = sel(cmp(arith::CmpFPredicate::OEQ, a, c(1)), c(1), mag);
    Value floorY = math::FloorOp::create(b, loc, y);
    Value yInteger = cmp(arith::CmpFPredicate::OEQ, floorY, y);
    Value halfFloor = math::FloorOp::create(b, loc, arith::MulFOp::create(b, loc, y, c(0.5)));
    Value yOdd = arith::AndIOp::create(
        b, loc, yInteger,
        cmp(arith::CmpFPredicate::ONE, arith::MulFOp::create(b, loc, halfFloor, c(2)), y));
    // The sign bit, so that -0 to an odd power stays -0 (and -inf for y < 0).
    Type intType = b.getI32Type();
    if (auto vec = dyn_cast<VectorType>(type))
      intType = VectorType::get(vec.getShape(), intType);
    Value bits = arith::BitcastOp::create(b, loc, intType, x);
    Value zeroBits = arith::ConstantOp::create(b, loc, b.getZeroAttr(intType));
    Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, bits, zeroBits);
    Value result = sel(arith::AndIOp::create(b, loc, negative, yOdd), arith::NegFOp::create(b, loc, mag), mag);
    Value finiteNegative = arith::AndIOp::create(
        b, loc, cmp(arith::CmpFPredicate::OLT, x, c(0)), cmp(arith::CmpFPredicate::ONE, x, c(-inf)));
    Value nan = c(std::numeric_limits<double>::quiet_NaN());
    Value noInteger = cmp(arith::CmpFPredicate::UNE, floorY, y); // NaN y too
    result = sel(arith::AndIOp::create(b, loc, finiteNegative, noInteger), nan, result);
    result = sel(cmp(arith::CmpFPredicate::UNO, x, y), nan, result);
    Value one = arith::OrIOp::create(b, loc, cmp(arith::CmpFPredicate::OEQ, y, c(0)),
                                     cmp(arith::CmpFPredicate::OEQ, x, c(1)));
    rewriter.replaceOp(op, sel(one, c(1), result));
    return success();
  }
};

struct ApproximateMathPass
    : public kiln::impl::KilnApproximateMathBase<ApproximateMathPass> {
  using KilnApproximateMathBase::KilnApproximateMathBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    if (all) {
      // f16 math is computed in f32, then every transcendental with a
      // polynomial; rsqrt is left out (its approximation needs AVX2 ops).
      auto transcendental = [](StringRef name) {
        name.consume_front("math.");
        return llvm::is_contained({"tanh", "exp", "expm1", "log", "log1p", "log2",
                                   "erf", "erfc", "sin", "cos", "atan", "atan2",
                                   "asin", "acos", "cbrt"},
                                  name);
      };
      populateMathF32ExpansionPatterns(patterns, transcendental);
      populateMathPolynomialApproximationPatterns(patterns, transcendental);
      // tanh and erf are not among the predicate-driven patterns in MLIR 22.
      populatePolynomialApproximateTanhPattern(patterns);
      populatePolynomialApproximateErfPattern(patterns);
    } else {
      // f16 math is computed in f32 (as PyTorch does): math-to-spirv leaves
      // casts it cannot legalize for f16 transcendentals.
      populateMathF32ExpansionPatterns(patterns, [](StringRef) { return true; });
      populatePolynomialApproximateErfPattern(patterns);
      patterns.add<PowSpecialCases>(&getContext());
    }
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
