//===- SpirvVulkanMemoryModel.cpp - the memory model cooperative matrices need ===//

#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSPIRVVULKANMEMORYMODEL
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct SpirvVulkanMemoryModelPass
    : public kiln::impl::KilnSpirvVulkanMemoryModelBase<SpirvVulkanMemoryModelPass> {
  void runOnOperation() override {
    spirv::ModuleOp module = getOperation();
    bool coop = module
                    .walk([](spirv::KHRCooperativeMatrixMulAddOp) { return WalkResult::interrupt(); })
                    .wasInterrupted();
    if (coop)
      module.setMemoryModel(spirv::MemoryModel::Vulkan);
  }
};
} // namespace
