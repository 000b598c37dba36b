//===- CpuExpandArith.cpp - arith ops the CPU lowers better by hand -------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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
template <class Op, arith::CmpFPredicate Pick>
struct ExpandMinMax : OpRewritePattern<Op> {
  using OpRewritePattern<Op>::OpRewritePattern;
  LogicalResult matchAndRewrite(Op op, PatternRewriter &rewriter) const override {
    if (!isa<VectorType>(op.getType()) && (loopCarried(op.getLhs()) || loopCarried(op.getRhs())))
      return failure();
    Location loc = op.getLoc();
    Value lhs = op.getLhs(), rhs = op.getRhs();
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
