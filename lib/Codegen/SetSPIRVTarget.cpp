//===- SetSPIRVTarget.cpp - target env and entry-point ABI ----------------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSETSPIRVTARGET
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct SetSPIRVTargetPass
    : public kiln::impl::KilnSetSPIRVTargetBase<SetSPIRVTargetPass> {
  using KilnSetSPIRVTargetBase::KilnSetSPIRVTargetBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    // Vulkan 1.1 + 8/16-bit storage: f16 and bool tensors live in buffers.
    std::string text =
        "#spirv.target_env<#spirv.vce<v1.3, [Shader, Float16, Int8, Int16, "
        "StorageBuffer16BitAccess, StorageBuffer8BitAccess, GroupNonUniform, "
        "GroupNonUniformArithmetic, GroupNonUniformShuffle], "
        "[SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage, "
        "SPV_KHR_8bit_storage]>, api=Vulkan, #spirv.resource_limits<"
        "max_compute_workgroup_invocations = " +
        std::to_string(maxWorkgroupInvocations) +
        ", subgroup_size = " + std::to_string(subgroupSize) + ">>";
    Attribute env = parseAttribute(text, ctx);
    if (!env) {
      module.emitError("internal error: bad spirv target env");
      return signalPassFailure();
    }

    // Workgroup sizes come from the (constant) launch sizes.
    llvm::StringMap<SmallVector<int32_t, 3>> blockSizes;
    WalkResult walk = module.walk([&](gpu::LaunchFuncOp launch) {
      SmallVector<int32_t, 3> sizes;
      for (Value v : {launch.getBlockSizeX(), launch.getBlockSizeY(),
                      launch.getBlockSizeZ()}) {
        std::optional<int64_t> size = getConstantIntValue(v);
        if (!size) {
          launch.emitError("workgroup size must be a constant");
          return WalkResult::interrupt();
        }
        sizes.push_back(static_cast<int32_t>(*size));
      }
      blockSizes[launch.getKernelName().getValue()] = sizes;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    module.walk([&](gpu::GPUModuleOp gpuModule) {
      gpuModule->setAttr(spirv::getTargetEnvAttrName(), env);
      gpuModule.walk([&](gpu::GPUFuncOp fn) {
        if (!fn.isKernel())
          return;
        auto it = blockSizes.find(fn.getName());
        SmallVector<int32_t, 3> sizes =
            it == blockSizes.end() ? SmallVector<int32_t, 3>{1, 1, 1}
                                   : it->second;
        fn->setAttr(spirv::getEntryPointABIAttrName(),
                    spirv::getEntryPointABIAttr(ctx, sizes));
      });
    });
  }
};
} // namespace
