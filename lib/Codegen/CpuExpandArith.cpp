//===- CpuExpandArith.cpp - arith ops the CPU lowers better by hand -------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCPUEXPANDARITH
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
/// Whether `v` is carried by an enclosing scf.for: the running value of a
/// reduction.
bool loopCarried(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && isa_and_nonnull<scf::ForOp>(arg.getOwner()->getParentOp()) &&
         arg.getArgNumber() > 0;
}

/// maximumf / minimumf as a compare and two selects (NaN from either side
/// wins): x86 has no NaN-propagating max, and LLVM's own expansion of
/// llvm.maximum also orders signed zeros, about twice the instructions (a
/// 3x3/2 max pool: 193-219 us expanded, 327-336 us through llvm.maximum).
/// Not a scalar step of a loop-carried reduction: LLVM's loop vectorizer
/// reduces llvm.maximum, not a compare and select (softmax's row maximum).
/// The value of `v` when it is a constant float (a splat), else nullopt.
std::optional<APFloat> constantFloat(Value v) {
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValue();
  if (auto dense = dyn_cast<SplatElementsAttr>(attr))
    return dense.getSplatValue<APFloat>();
  return std::nullopt;
}

template <class Op, arith::CmpFPredicate Pick>
struct ExpandMinMax : OpRewritePattern<Op> {
  using OpRewritePattern<Op>::OpRewritePattern;
  LogicalResult matchAndRewrite(Op op, PatternRewriter &rewriter) const override {
    if (!isa<VectorType>(op.getType()) && (loopCarried(op.getLhs()) || loopCarried(op.getRhs())))
      return failure();
    Location loc = op.getLoc();
    Value lhs = op.getLhs(), rhs = op.getRhs();
    // Against a constant c that is not NaN (a CPU program's literal bounds:
    // ReLU6's 6), one ordered compare and select, c first: x86's maxps /
    // minps (c, x) give x when x is NaN, and x on a tie, which equals c
    // but for zeros: so not max against +0 nor min against -0, where IEEE
    // orders the signed zeros.
    constexpr bool isMax = Pick == arith::CmpFPredicate::UGT;
    for (auto [c, x] : {std::pair{rhs, lhs}, std::pair{lhs, rhs}}) {
      std::optional<APFloat> value = constantFloat(c);
      if (!value || value->isNaN() || (value->isZero() && value->isNegative() != isMax))
        continue;
      Value pickC = arith::CmpFOp::create(
          rewriter, loc, isMax ? arith::CmpFPredicate::OGT : arith::CmpFPredicate::OLT, c, x);
      rewriter.replaceOpWithNewOp<arith::SelectOp>(op, pickC, c, x);
      return success();
    }
    // Unordered compares pick lhs when lhs is NaN; the second select
    // picks rhs when rhs is.
    Value pickLhs = arith::CmpFOp::create(rewriter, loc, Pick, lhs, rhs);
    Value picked = arith::SelectOp::create(rewriter, loc, pickLhs, lhs, rhs);
    Value rhsNaN = arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::UNO, rhs, rhs);
    rewriter.replaceOpWithNewOp<arith::SelectOp>(op, rhsNaN, rhs, picked);
    return success();
  }
};

struct CpuExpandArithPass : public kiln::impl::KilnCpuExpandArithBase<CpuExpandArithPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    patterns.add<ExpandMinMax<arith::MaximumFOp, arith::CmpFPredicate::UGT>,
                 ExpandMinMax<arith::MinimumFOp, arith::CmpFPredicate::ULT>>(
        &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
