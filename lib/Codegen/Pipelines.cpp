//===- Pipelines.cpp - the kiln pass pipelines ----------------------------===//

#include "kiln/Codegen/Pipelines.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kiln::populateGraphPipeline(OpPassManager &pm,
                                 const GraphPipelineOptions &options) {
  OpPassManager &graph = pm.nest<func::FuncOp>();
  // Placement first: fusion must never group ops of two devices, and every
  // conflict must be reported before any lowering.
  KilnPlaceDevicesOptions place;
  place.defaultDevice = options.defaultDevice;
  place.transferPolicy = options.transferPolicy;
  graph.addPass(createKilnPlaceDevices(place));
  populateFusionPipeline(pm, FusionPipelineOptions());
}

void kiln::populateFusionPipeline(OpPassManager &pm, const FusionPipelineOptions &options) {
  OpPassManager &graph = pm.nest<func::FuncOp>();
  // Attention first: fusion groups the ops it decomposes into.
  graph.addPass(createKilnDecomposeAttention());
  KilnFuseElementwiseOptions fusion;
  fusion.maxBindings = options.maxBindings;
  graph.addPass(createKilnFuseElementwise(fusion));
}

LogicalResult kiln::populateLinalgToSPIRVPipeline(
    OpPassManager &pm, const SPIRVPipelineOptions &options) {
  // Erf polynomials before math-to-spirv; bf16 buffers as bits once the
  // linalg ops are loops (SPIR-V has no bf16); tiling gives (workgroups,
  // threads); math must be converted before gpu-to-spirv, which leaves the
  // spirv.module beside the gpu.module.
  pm.addPass(createKilnApproximateMath());
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createConvertLinalgToParallelLoopsPass());
  fn.addPass(createKilnEmulateBF16Storage());
  fn.addPass(createParallelLoopTilingPass({options.threads}, /*noMinMaxBounds=*/true));
  fn.addPass(createGpuMapParallelLoopsPass());
  fn.addPass(createConvertParallelLoopToGpuPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // The module's #kiln.target becomes spirv.target_env (and entry-point
  // ABIs) before anything converts to SPIR-V.
  pm.addPass(createKilnSetSPIRVTarget());
  pm.addPass(createMapMemRefStorageClassPass());
  pm.addPass(createConvertMathToSPIRVPass());
  pm.addPass(createConvertGPUToSPIRVPass());
  OpPassManager &spirvModule = pm.nest<spirv::ModuleOp>();
  // The Vulkan memory model before update-vce, which then declares it.
  spirvModule.addPass(createKilnSpirvVulkanMemoryModel());
  spirvModule.addPass(spirv::createSPIRVLowerABIAttributesPass());
  spirvModule.addPass(spirv::createSPIRVUpdateVCEPass());
  if (options.bf16Matrices)
    spirvModule.addPass(createKilnSpirvBF16Matrices());
  return success();
}

LogicalResult kiln::populateLinalgToLLVMPipeline(OpPassManager &pm) {
  // Math first (polynomials in arith), then loops; the range arguments need
  // the loop that convert-linalg-to-loops makes; bare pointers give the
  // runtime a calling convention without memref descriptors.
  KilnApproximateMathOptions approximate;
  approximate.all = true;
  pm.addPass(createKilnApproximateMath(approximate));
  pm.nest<func::FuncOp>().addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createKilnCpuRangeArgs());
  // bf16 arithmetic and math (batch norm's sqrt) in f32, and its casts as
  // integer bit operations: no libcall (__truncsfbf2) on a CPU without
  // AVX-512 BF16.
  math::MathExtendToSupportedTypesOptions extend;
  extend.extraTypeStrs = {"f16"};
  extend.targetTypeStr = "f32";
  pm.addPass(math::createMathExtendToSupportedTypes(extend));
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16"};
  emulate.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  pm.addPass(createKilnCpuExpandArith());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions func;
  func.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(func));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return success();
}
