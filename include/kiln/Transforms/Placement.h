//===- Placement.h - device placement and the consistency check -*- C++ -*-===//
//
// The analysis behind kiln-place-devices, callable directly so that the
// Tensor API gets the conflicts as data as well as diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PLACEMENT_H
#define KILN_TRANSFORMS_PLACEMENT_H

#include "dialects/Kiln/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

enum class PlacementPolicy { Error, Log, Allow };
std::optional<PlacementPolicy> parsePlacementPolicy(llvm::StringRef text);

struct PlacementOptions {
  DeviceAttr defaultDevice;
  PlacementPolicy policy = PlacementPolicy::Error;
};

/// One operand of a conflicting op: where it lives and where that was decided.
struct OperandPlacement {
  unsigned index;
  mlir::Value value;
  DeviceAttr device;
  mlir::Location committedAt;
};

struct PlacementConflict {
  mlir::Operation *op;
  llvm::SmallVector<OperandPlacement> operands;
  /// The operand whose device the fix keeps: the device most committed
  /// sources of the graph are on (the model's), the first on a tie.
  size_t keep = 0;
};

/// Where the forward pass put a committed value, and the op whose
/// commitment decided it (a source: an input, a constant, a transfer).
struct CommittedPlacement {
  DeviceAttr device;
  mlir::Operation *origin = nullptr;
};
using CommittedPlacements = llvm::DenseMap<mlir::Value, CommittedPlacement>;

/// "move operand #1 to ..." for each operand off the first one's device.
std::vector<std::string> suggestFixes(const PlacementConflict &conflict);

/// Bytes a value of this type occupies on a device (i1 as one byte).
int64_t tensorBytes(mlir::Type type);

/// Places every kiln op in `func`. Under PlacementPolicy::Error each conflict
/// is emitted as an error with notes and appended to `conflicts`, and the
/// result is failure; otherwise transfers are inserted and reported as
/// remarks. `committed`, when given, receives every committed value's
/// device as the forward pass found it (before any transfer is inserted):
/// callers describe conflicts in their own terms with it.
mlir::LogicalResult
placeDevices(mlir::func::FuncOp func, const PlacementOptions &options,
             llvm::SmallVectorImpl<PlacementConflict> *conflicts = nullptr,
             CommittedPlacements *committed = nullptr);

} // namespace kiln

#endif // KILN_TRANSFORMS_PLACEMENT_H
