//===- SetSPIRVTarget.cpp - target env and entry-point ABI ----------------===//

#include "kiln/Compiler/Target.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSETSPIRVTARGET
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::Target;
using kiln::TargetAttr;

namespace {
struct SetSPIRVTargetPass
    : public kiln::impl::KilnSetSPIRVTargetBase<SetSPIRVTargetPass> {
  using KilnSetSPIRVTargetBase::KilnSetSPIRVTargetBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    TargetAttr targetAttr = kiln::getTarget(module);
    if (!targetAttr || !targetAttr.isGpu()) {
      module.emitError("kiln-set-spirv-target: the module has no GPU #kiln.target; attach one "
                       "(kiln-attach-target=\"target=vulkan:generic\")");
      return signalPassFailure();
    }
    Target target = Target::fromAttr(targetAttr);
    // A target that assumes no subgroup size still declares one to MLIR's
    // SPIR-V conversions, which only read it for subgroup ops its kernels
    // then do not use.
    int64_t subgroupSize = std::max(1, target.limits.subgroupSize);
    int64_t maxWorkgroupInvocations = target.limits.maxWorkgroupInvocations;
    // Vulkan 1.1 + 8/16-bit storage: f16 and bool tensors live in buffers.
    // A module with cooperative matrices also declares them (16x16x16 f16
    // into f32, the one shape the coop_gemm form emits) and the Vulkan
    // memory model they need.
    auto envText = [&](bool coop) {
      // (MLIR's cooperative-matrix ops need SPIR-V 1.6: Vulkan 1.3 takes it.)
      return std::string("#spirv.target_env<#spirv.vce<") + (coop ? "v1.6" : "v1.3") +
             ", [Shader, Float16, Int8, Int16, "
                         "StorageBuffer16BitAccess, StorageBuffer8BitAccess, GroupNonUniform, "
                         "GroupNonUniformArithmetic, GroupNonUniformShuffle" +
             (coop ? ", CooperativeMatrixKHR, VulkanMemoryModel, BFloat16TypeKHR, "
                     "BFloat16CooperativeMatrixKHR"
                   : "") +
             "], [SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage, "
             "SPV_KHR_8bit_storage" +
             (coop ? ", SPV_KHR_cooperative_matrix, SPV_KHR_vulkan_memory_model, SPV_KHR_bfloat16"
                   : "") +
             "]>, api=Vulkan, #spirv.resource_limits<max_compute_workgroup_invocations = " +
             std::to_string(maxWorkgroupInvocations) +
             ", subgroup_size = " + std::to_string(subgroupSize) +
             (coop ? ", cooperative_matrix_properties_khr = [#spirv.coop_matrix_props_khr<"
                     "m_size = 16, n_size = 16, k_size = 16, a_type = f16, b_type = f16, "
                     "c_type = f32, result_type = f32, acc_sat = false, scope = <Subgroup>>]"
                   : "") +
             ">>";
    };
    Attribute plainEnv = parseAttribute(envText(false), ctx);
    Attribute coopEnv = parseAttribute(envText(true), ctx);
    if (!plainEnv || !coopEnv) {
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
      bool coop = gpuModule
                      .walk([](gpu::SubgroupMmaComputeOp) { return WalkResult::interrupt(); })
                      .wasInterrupted();
      gpuModule->setAttr(spirv::getTargetEnvAttrName(), coop ? coopEnv : plainEnv);
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
