//===- MaterializeConfigsPass.cpp - the kiln-materialize-configs pass -----===//

#include "kiln/Codegen/KernelConfigAttr.h"
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
    DeviceLimits limits;
    limits.subgroupSize = subgroupSize;
    limits.maxWorkgroupInvocations = maxWorkgroupInvocations;
    limits.sharedMemoryBytes = sharedMemoryBytes;
    limits.maxLoopIterations = maxLoopIterations;
    limits.computeUnits = computeUnits;
    limits.cooperativeMatrix = cooperativeMatrix;
    limits.cooperativeMatrixBF16 = cooperativeMatrixBF16;
    WalkResult result = getOperation().walk([&](KernelOp kernel) {
      return failed(materializeKernelConfig(kernel, gpu ? &limits : nullptr))
                 ? WalkResult::interrupt()
                 : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
