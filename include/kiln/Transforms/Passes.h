//===- Passes.h - kiln passes -----------------------------------*- C++ -*-===//

#ifndef KILN_TRANSFORMS_PASSES_H
#define KILN_TRANSFORMS_PASSES_H

#include "dialects/Kiln/KilnDialect.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln {

/// On a rank-0 kiln.constant: its value is fixed (a program compiled ahead
/// of time), so kiln-fuse-elementwise copies it into the kernels that read
/// it instead of passing it as a 4-byte operand.
inline constexpr char kInlineScalarAttr[] = "kiln.inline_scalar";
#define GEN_PASS_DECL
#include "kiln/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

#endif // KILN_TRANSFORMS_PASSES_H
