//===- GraphFile.h - a kiln graph read from text, placed and fused -*- C++ -*-===//
//
// What kiln-compile and kiln-tune share: the graph dialect text they read,
// placed for one target device and fused the way every realize is.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_GRAPHFILE_H
#define KILN_LIB_FRONTEND_GRAPHFILE_H

#include "kiln/Device.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <string>

namespace kiln {

/// A diagnostic handler appending "file:line:col: message" and notes.
std::function<mlir::LogicalResult(mlir::Diagnostic &)>
diagnosticCollector(std::string &diagnostics);

/// Parses `text` (named `name` in messages); throws CompileError with the
/// diagnostics collected so far when it is no graph.
mlir::OwningOpRef<mlir::ModuleOp> parseGraphText(mlir::MLIRContext &ctx, const std::string &text,
                                                 const std::string &name,
                                                 std::string &diagnostics);
mlir::func::FuncOp firstFunc(mlir::ModuleOp module);

/// Places the module's graph on `device` (committed sources move there)
/// and fuses it into kernels of at most `maxBindings` buffers (0: the
/// devices here, maxKernelBindings); with `fixedScalars` its scalar
/// constants become literals in the kernels (a CPU program compiled ahead
/// of time). Throws CompileError.
void placeAndFuseFor(mlir::ModuleOp module, const Device &device, const std::string &name,
                     std::string &diagnostics, bool fixedScalars = false, int maxBindings = 0);

} // namespace kiln

#endif // KILN_LIB_FRONTEND_GRAPHFILE_H
