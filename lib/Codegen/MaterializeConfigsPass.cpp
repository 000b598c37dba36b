//===- MaterializeConfigsPass.cpp - the kiln-materialize-configs pass -----===//

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/Compiler/Target.h"
#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNMATERIALIZECONFIGS
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {
struct MaterializeConfigsPass
    : public kiln::impl::KilnMaterializeConfigsBase<MaterializeConfigsPass> {
  using KilnMaterializeConfigsBase::KilnMaterializeConfigsBase;

  void runOnOperation() override {
    WalkResult result = getOperation().walk([&](KernelOp kernel) {
      Target target = Target::fromAttr(getTarget(kernel));
      return failed(materializeKernelConfig(kernel, target.isGpu() ? &target.limits : nullptr))
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
