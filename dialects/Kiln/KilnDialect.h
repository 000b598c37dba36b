//===- KilnDialect.h - the kiln dialect -------------------------*- C++ -*-===//
//
// One header for the whole dialect: attributes, the placement interface,
// the elementwise trait and the ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_KILNDIALECT_H
#define KILN_DIALECTS_KILN_KILNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Kiln/KilnDialect.h.inc"
#include "dialects/Kiln/KilnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Kiln/KilnAttrs.h.inc"

namespace kiln {
/// Marks ops that compute each result element from the operand elements at
/// the same (broadcast) index: the ops fusion may put in one kernel.
template <typename ConcreteType>
class Elementwise : public mlir::OpTrait::TraitBase<ConcreteType, Elementwise> {};

/// Marks ops whose result element at an index is the operand element at
/// another index (transpose, reshape, broadcast_to, slice): fusion folds them
/// into the indexing of the kernel that uses them, with no copy.
template <typename ConcreteType>
class View : public mlir::OpTrait::TraitBase<ConcreteType, View> {};

/// Marks data movement whose result elements come from an operand element
/// or from nothing (pad's value, concat's other inputs): fused like views,
/// but read with bounds checks.
template <typename ConcreteType>
class GuardedView : public mlir::OpTrait::TraitBase<ConcreteType, GuardedView> {};

/// Marks reductions: a kernel may end in one, with elementwise producers
/// (and views) fused in front of it.
template <typename ConcreteType>
class Reduction : public mlir::OpTrait::TraitBase<ConcreteType, Reduction> {};

/// Marks contractions (matmul): a kernel may hold one, with views fused in
/// front of its operands and an elementwise epilogue after it.
template <typename ConcreteType>
class Contraction : public mlir::OpTrait::TraitBase<ConcreteType, Contraction> {};

/// Parses "vulkan:1", "cpu", "cpu:0" into a device attribute (without
/// adapter); failure on anything else.
mlir::FailureOr<DeviceAttr> parseDeviceName(mlir::MLIRContext *ctx,
                                            llvm::StringRef name);
/// The attribute a module or kernel carries its #kiln.target in.
inline constexpr char kTargetAttrName[] = "kiln.target";
/// The target of the nearest op from `op` outwards that has one; null where
/// none does (passes then compile for the host CPU).
TargetAttr getTarget(mlir::Operation *op);

/// For a view op: the flat operand index of the result element at flat
/// index `resultIndex` (an affine expression of it).
mlir::AffineExpr viewSourceIndex(mlir::Operation *view, mlir::AffineExpr resultIndex);

/// The flat index of an operand of `shape` broadcast into `space`, for the
/// result element at flat index `index`.
mlir::AffineExpr broadcastSourceIndex(llvm::ArrayRef<int64_t> shape,
                                      llvm::ArrayRef<int64_t> space,
                                      mlir::AffineExpr index);
} // namespace kiln

#include "dialects/Kiln/KilnInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Kiln/KilnOps.h.inc"

#endif // KILN_DIALECTS_KILN_KILNDIALECT_H
