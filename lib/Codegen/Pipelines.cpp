//===- Pipelines.cpp - the kiln pass pipelines ----------------------------===//

#include "kiln/Codegen/Pipelines.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

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
  std::string threads = std::to_string(options.threads);
  // Erf polynomials before math-to-spirv; bf16 buffers as bits once the
  // linalg ops are loops (SPIR-V has no bf16); tiling gives (workgroups,
  // threads); math must be converted before gpu-to-spirv, which leaves the
  // spirv.module beside the gpu.module.
  std::string text =
      "kiln-approximate-math,"
      "func.func(convert-linalg-to-parallel-loops,kiln-emulate-bf16-storage,"
      "scf-parallel-loop-tiling{parallel-loop-tile-sizes=" + threads +
      " no-min-max-bounds=true},"
      "gpu-map-parallel-loops,convert-parallel-loops-to-gpu),"
      "canonicalize,gpu-launch-sink-index-computations,gpu-kernel-outlining,"
      "lower-affine,canonicalize,cse,"
      "kiln-set-spirv-target,"
      "map-memref-spirv-storage-class{client-api=vulkan},"
      "convert-math-to-spirv,convert-gpu-to-spirv,"
      "spirv.module(kiln-spirv-vulkan-memory-model,spirv-lower-abi-attrs,spirv-update-vce" +
      std::string(options.bf16Matrices ? ",kiln-spirv-bf16-matrices)" : ")");
  return parsePassPipeline(text, pm, llvm::errs());
}

LogicalResult kiln::populateLinalgToLLVMPipeline(OpPassManager &pm) {
  // Math first (polynomials in arith), then loops; the range arguments need
  // the loop that convert-linalg-to-loops makes; bare pointers give the
  // runtime a calling convention without memref descriptors.
  std::string text =
      "kiln-approximate-math{all=true},"
      "func.func(convert-linalg-to-loops),kiln-cpu-range-args,"
      // bf16 arithmetic and math (batch norm's sqrt) in f32, and its casts
      // as integer bit operations: no libcall (__truncsfbf2) on a CPU
      // without AVX-512 BF16.
      "math-extend-to-supported-types{extra-types=f16 target-type=f32},"
      "arith-emulate-unsupported-floats{source-types=bf16 target-type=f32},"
      "kiln-cpu-expand-arith,"
      "lower-affine,canonicalize,convert-scf-to-cf,convert-math-to-llvm,convert-vector-to-llvm,"
      "convert-arith-to-llvm,expand-strided-metadata,finalize-memref-to-llvm,"
      "convert-func-to-llvm{use-bare-ptr-memref-call-conv=true},"
      "convert-cf-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts";
  return parsePassPipeline(text, pm, llvm::errs());
}
