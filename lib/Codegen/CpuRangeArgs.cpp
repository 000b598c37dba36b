//===- CpuRangeArgs.cpp - CPU kernels over a [begin, end) slice -----------===//

#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCPURANGEARGS
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct CpuRangeArgsPass
    : public kiln::impl::KilnCpuRangeArgsBase<CpuRangeArgsPass> {
  void runOnOperation() override {
    WalkResult result = getOperation().walk([&](func::FuncOp fn) {
      if (!fn->hasAttr("kiln.iteration_size") || fn.isExternal())
        return WalkResult::advance();
      // The outermost loop: scf.for from linalg, or the 1-D scf.parallel of
      // a reduction kernel.
      SmallVector<Operation *> loops;
      for (Operation &op : fn.getBody().front())
        if (isa<scf::ForOp>(op) ||
            (isa<scf::ParallelOp>(op) && cast<scf::ParallelOp>(op).getNumLoops() == 1))
          loops.push_back(&op);
      if (loops.size() != 1) {
        fn.emitError("expected one outermost loop in a CPU kernel, found ")
            << loops.size();
        return WalkResult::interrupt();
      }
      Type index = IndexType::get(&getContext());
      unsigned n = fn.getNumArguments();
      if (failed(fn.insertArguments({n, n}, {index, index}, {{}, {}},
                                    {fn.getLoc(), fn.getLoc()}))) {
        fn.emitError("cannot add the range arguments");
        return WalkResult::interrupt();
      }
      if (auto loop = dyn_cast<scf::ForOp>(loops.front())) {
        loop.getLowerBoundMutable().assign(fn.getArgument(n));
        loop.getUpperBoundMutable().assign(fn.getArgument(n + 1));
      } else {
        auto parallel = cast<scf::ParallelOp>(loops.front());
        parallel.getLowerBoundMutable().assign(fn.getArgument(n));
        parallel.getUpperBoundMutable().assign(fn.getArgument(n + 1));
      }
      // The range now comes from the caller; LLVM IR translation has no use
      // (and no translation) for the kiln attribute.
      for (StringRef attr : {"kiln.iteration_size", "kiln.outer_size"})
        fn->removeAttr(attr);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
