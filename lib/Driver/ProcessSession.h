//===- ProcessSession.h - the process's one Session -------------*- C++ -*-===//
//
// The driver owns the Session (lib/Compiler/Session.h): one per process,
// made on first use and never destroyed (kernels and contexts outlive
// static destructors of user code that may still hold tensors). Compiles
// are handed it; nothing below the driver reaches for it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_DRIVER_PROCESSSESSION_H
#define KILN_LIB_DRIVER_PROCESSSESSION_H

#include "lib/Compiler/Session.h"

namespace kiln {

Session &session();
/// Locks the session for a realization, compile or tuning run, with
/// `options` read from the environment (lib/Driver/Environment.cpp).
std::unique_lock<std::mutex> lockForCompile(Session &session);

} // namespace kiln

#endif // KILN_LIB_DRIVER_PROCESSSESSION_H
