//===- SpirvKernel.h - a kernel module to SPIR-V, with its launch -*- C++ -*-===//
//
// The GPU code generation decisions that a runtime needs recorded: the
// memory layout a kernel is built in, the workgroup size of loop-form
// kernels, and, after lowering, the order of its buffer bindings and its
// grid. The Tensor API, kiln-compile and the tests all take them from here.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_SPIRVKERNEL_H
#define KILN_CODEGEN_SPIRVKERNEL_H

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Codegen/KernelToLinalg.h"
#include "kiln/Codegen/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// The layout a GPU kernel of `config` is built in: 16-byte accesses for
/// a loop kernel of vector width 4, else one scalar per access.
KernelLayout gpuLayoutFor(const KernelConfig &config);

/// The workgroup size of a loop-form kernel function over `iterations`
/// elements (one grid dimension): the config's. 0 for a kernel that sizes
/// its own gpu.launch (row kernels, tiled GEMM). Fails when the grid would
/// need more workgroups than the device allows.
mlir::FailureOr<int> loopKernelThreads(mlir::func::FuncOp fn, int64_t iterations,
                                       const DeviceLimits &limits, const KernelConfig &config);

struct SpirvKernel {
  std::vector<uint32_t> words;
  std::string entryPoint;
  /// Binding i is the kernel function's argument bindingOrder[i] (inputs,
  /// then outputs): gpu-kernel-outlining orders a kernel's arguments by
  /// first use, not as the function declares them.
  std::vector<uint32_t> bindingOrder;
  std::array<uint32_t, 3> groups = {1, 1, 1};
};

/// Lowers `module` (holding kernel function `fn`) to SPIR-V with `options`
/// and reads off its entry point, binding order and grid. On failure,
/// `error` says why (the pass diagnostics are the caller's).
mlir::FailureOr<SpirvKernel> lowerToSpirv(mlir::ModuleOp module, mlir::func::FuncOp fn,
                                          const SPIRVPipelineOptions &options,
                                          std::string &error,
                                          std::string *pipeline = nullptr);

} // namespace kiln

#endif // KILN_CODEGEN_SPIRVKERNEL_H
