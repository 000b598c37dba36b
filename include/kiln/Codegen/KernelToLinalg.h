//===- KernelToLinalg.h - one kiln.kernel as one function -------*- C++ -*-===//

#ifndef KILN_CODEGEN_KERNELTOLINALG_H
#define KILN_CODEGEN_KERNELTOLINALG_H

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Codegen/KernelConfig.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

enum class KernelLayout {
  /// One loop over every element; broadcasts as floordiv/mod maps. One grid
  /// dimension on GPUs.
  Flat,
  /// Adjacent dimensions merged wherever every operand broadcasts them alike
  /// (a [r, c] + [c] add stays 2-D, a plain [a, b, c] op becomes 1-D):
  /// broadcast operands are read contiguously in the inner loop (CPU).
  Coalesced,
  /// One loop over groups of 4 elements, vector<4xf32> (or vector<4xf16>)
  /// buffer accesses: 16-byte (8-byte) loads and stores for GPU bandwidth. Operands broadcast along
  /// the innermost dimension are read as scalars and splatted. Only for
  /// kernels that supportsVector4 accepts.
  Vector4,
};

/// Whether `kernel` can use KernelLayout::Vector4: f32 or f16 operands and
/// results, an innermost dimension that is a multiple of 4.
bool supportsVector4(KernelOp kernel);

/// Builds `func.func @name(inputs..., outputs...)` at the builder's insertion
/// point: every argument a memref (i1 stored as i8) over the same buffer as
/// the tensor; the body one linalg.generic for elementwise kernels, an
/// scf.parallel around an scf.for for reductions and contractions. It carries
/// `kiln.iteration_size` (all elements) and `kiln.outer_size` (iterations of
/// the outermost loop). With `gpu` set, kernels that cooperate within a
/// workgroup (row reductions, tiled matmul and convolution) are built as a
/// gpu.launch sized from those limits. The kernel's `config` says how
/// (materializeKernelConfig gives it the default first when it has none).
/// Fails (with a diagnostic) on an op it cannot lower or a configuration
/// the device cannot run.
mlir::FailureOr<mlir::func::FuncOp>
buildKernelFunction(KernelOp kernel, mlir::OpBuilder &builder,
                    llvm::StringRef name, KernelLayout layout = KernelLayout::Flat,
                    const DeviceLimits *gpu = nullptr);

/// The element type a tensor of `elementType` has in device memory.
mlir::Type storageElementType(mlir::Type elementType);

/// Loop iterations one invocation of `root` runs at most (nested loops
/// multiply, sibling loops add); INT64_MAX when a loop has no static bounds.
int64_t loopIterationsPerInvocation(mlir::Operation *root);

} // namespace kiln

#endif // KILN_CODEGEN_KERNELTOLINALG_H
