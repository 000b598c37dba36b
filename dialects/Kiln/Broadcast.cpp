//===- Broadcast.cpp - numpy-style shape broadcasting ---------------------===//

#include "dialects/Kiln/KilnDialect.h"

using namespace mlir;

FailureOr<llvm::SmallVector<int64_t>>
kiln::broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align at the right: missing leading dimensions count as 1.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return failure();
    out[i] = da == 1 ? db : da;
  }
  return out;
}
