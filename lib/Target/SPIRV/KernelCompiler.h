//===- KernelCompiler.h - kiln.kernel to validated SPIR-V -------*- C++ -*-===//

#ifndef KILN_LIB_TARGET_SPIRV_KERNELCOMPILER_H
#define KILN_LIB_TARGET_SPIRV_KERNELCOMPILER_H

#include "lib/Compiler/Session.h"

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Codegen/KernelToLinalg.h"
#include "kiln/Compiler/Target.h"
#include "kiln/runtime/Vulkan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln {

/// One kernel as a module holding `func.func @kiln_kernel` (linalg on flat
/// memrefs), plus its text: the cache key before target options.
struct KernelModule {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp fn;
  std::string text;
  int64_t iterations = 0;
  int64_t outerIterations = 0;
};
KernelModule buildKernelModule(KernelOp kernel, KernelLayout layout,
                               const DeviceLimits *gpu = nullptr);

/// The target a Vulkan device's kernels are compiled for: its report, with
/// `options.gpuTargetEdits` (KILN_GPU_LIMITS). Throws Error on bad edits.
Target gpuTargetOf(const rt::AdapterInfo &adapter, const CompilerOptions &options);

/// The SPIR-V of `kernel` for `adapter`'s limits, from the session cache or
/// freshly lowered and validated; configured first (Tuning.h: a tuned
/// config where the store has one). Throws CompileError.
const CompiledKernel &compileKernel(Session &session, KernelOp kernel,
                                    const rt::AdapterInfo &adapter);

/// Validates SPIR-V words for Vulkan 1.1; returns the validator's messages,
/// empty when valid. Cooperative-matrix modules are not validated (the
/// validator here predates them).
std::string validateSPIRV(const std::vector<uint32_t> &words);


} // namespace kiln

#endif // KILN_LIB_TARGET_SPIRV_KERNELCOMPILER_H
