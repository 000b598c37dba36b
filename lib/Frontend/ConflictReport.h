//===- ConflictReport.h - device conflicts in the API's terms ---*- C++ -*-===//
//
// Placement finds conflicts between kiln ops; the user wrote API calls. This
// maps each conflict back to the call that recorded the op (linear, not
// kiln.matmul), names its tensor arguments as kiln/Tensor.h does, with the
// shapes the user created and where each got its device.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_CONFLICTREPORT_H
#define KILN_LIB_FRONTEND_CONFLICTREPORT_H

#include "lib/Frontend/Graph.h"

#include "kiln/Errors.h"
#include "kiln/Transforms/Placement.h"

namespace kiln {

/// The DeviceMismatchError for `conflicts` found in the graph whose nodes
/// became `values`; `committed` is placement's forward result.
DeviceMismatchError
conflictError(llvm::ArrayRef<PlacementConflict> conflicts,
              const llvm::DenseMap<Node *, mlir::Value> &values,
              const CommittedPlacements &committed);

} // namespace kiln

#endif // KILN_LIB_FRONTEND_CONFLICTREPORT_H
