//===- KernelToLinalg.h - one kiln.kernel as one linalg.generic -*- C++ -*-===//

#ifndef KILN_CODEGEN_KERNELTOLINALG_H
#define KILN_CODEGEN_KERNELTOLINALG_H

#include "dialects/Kiln/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Builds `func.func @name(inputs..., outputs...)` at the builder's insertion
/// point: every argument a flat 1-D memref (i1 stored as i8), the body one
/// linalg.generic over the kernel's flattened iteration space. The function
/// carries `kiln.iteration_size`. Fails (with a diagnostic) on an op it
/// cannot lower.
mlir::FailureOr<mlir::func::FuncOp>
buildKernelFunction(KernelOp kernel, mlir::OpBuilder &builder,
                    llvm::StringRef name);

/// The element type a tensor of `elementType` has in device memory.
mlir::Type storageElementType(mlir::Type elementType);

} // namespace kiln

#endif // KILN_CODEGEN_KERNELTOLINALG_H
