//===- Pipelines.h - kiln pass pipelines ------------------------*- C++ -*-===//

#ifndef KILN_CODEGEN_PIPELINES_H
#define KILN_CODEGEN_PIPELINES_H

#include "kiln/Transforms/Placement.h"

#include "mlir/Pass/PassManager.h"

#include <string>

namespace kiln {

struct GraphPipelineOptions {
  std::string defaultDevice = "vulkan:0";
  std::string transferPolicy = "error";
};

/// Placement, then fusion (populateFusionPipeline), on every graph
/// function.
void populateGraphPipeline(mlir::OpPassManager &pm,
                           const GraphPipelineOptions &options);

struct FusionPipelineOptions {
  /// Buffers one kernel may bind (the device's, or the profile's), 0 for
  /// no limit.
  int maxBindings = 0;
};

/// Fusion of a placed graph, on every graph function: attention decomposed,
/// then ops grouped into kernels within `maxBindings`. The one assembly of
/// these passes: the JIT, compile(), kiln-compile and kiln-opt all use it.
void populateFusionPipeline(mlir::OpPassManager &pm, const FusionPipelineOptions &options);

/// The subgroup size and workgroup limits come from the module's
/// #kiln.target (kiln-attach-target).
struct SPIRVPipelineOptions {
  /// Work items per workgroup, one element each (a loop kernel's config).
  int threads = 256;
  /// The module multiplies bf16 on cooperative matrices (coop_gemm builds
  /// it on f16 fragments of the same bits: kiln-spirv-bf16-matrices).
  bool bf16Matrices = false;
};

/// From functions of one linalg.generic on memrefs (kiln-kernel-to-linalg)
/// to a serializable spirv.module per kernel beside the host launch code.
mlir::LogicalResult populateLinalgToSPIRVPipeline(
    mlir::OpPassManager &pm, const SPIRVPipelineOptions &options);

/// From functions of one linalg.generic on memrefs to the LLVM dialect for
/// the host: polynomial math (so loops vectorize), loops over a [begin, end)
/// slice given as the last two arguments, bare-pointer memref arguments.
mlir::LogicalResult populateLinalgToLLVMPipeline(mlir::OpPassManager &pm);

/// Every dialect and extension the compiler may load.
void registerKilnDialects(mlir::DialectRegistry &registry);

/// Registers every kiln pass and the upstream passes the pipelines use.
void registerKilnPasses();

} // namespace kiln

#endif // KILN_CODEGEN_PIPELINES_H
