//===- CallStack.h - the user's call stack at op creation -------*- C++ -*-===//
//
// KILN_TRACE=1 (or kiln::set_trace(true)) records the return addresses of
// every op's creation; they are symbolized only when a diagnostic prints
// them, so recording costs one unwind (bench_graphs: BM_RecordOps).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_CALLSTACK_H
#define KILN_LIB_FRONTEND_CALLSTACK_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct CallStack {
  std::vector<uintptr_t> pcs; // innermost first
};

/// Whether ops record their call stack now.
bool tracing();

/// The current call stack, or null when tracing is off.
std::shared_ptr<const CallStack> recordCallStack();

/// The frames outside Kiln, innermost first, as "file:line in function"
/// (or the symbol and address without debug information), up to main.
std::vector<std::string> userFrames(const CallStack &stack);

/// Whether this build can record call stacks (it links GCC's libbacktrace).
bool tracingAvailable();

} // namespace kiln

#endif // KILN_LIB_FRONTEND_CALLSTACK_H
