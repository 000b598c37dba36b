//===- Environment.h - the KILN_* variables, read in one place --*- C++ -*-===//
//
// Every environment variable Kiln's library reads is read here, typed, and
// checked: a malformed value throws kiln::Error naming the variable and what
// it takes. The compiler's own (KILN_GPU_LIMITS, KILN_AUTOTUNE, ...) reach
// it as CompilerOptions in the Session; the front end's and the driver's
// are below. Values are read when asked (tests change them), except where a
// comment says the process keeps the first.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_DRIVER_ENVIRONMENT_H
#define KILN_LIB_DRIVER_ENVIRONMENT_H

#include "kiln/Transforms/Placement.h"

#include <cstddef>
#include <optional>
#include <string>

namespace kiln::environment {

/// KILN_TRACE: record where each op was written (not "0").
bool trace();
/// KILN_DEVICE: the default device's name, as written.
std::optional<std::string> device();
/// KILN_GRAPH_CACHE: programs kept by graph structure (default 64; the
/// process keeps the first value).
size_t graphCacheCapacity();
/// KILN_TRANSFER_POLICY: error, log or allow.
std::optional<PlacementPolicy> transferPolicy();
/// KILN_POISON_OUTPUTS=1: kernel results are NaN before kernels run (the
/// process keeps the first value).
bool poisonOutputs();
/// KILN_PROFILE: every realize profiled (the process keeps the first value).
bool profileEveryRealize();
/// KILN_PROFILE_TRACE: the Chrome trace file of profiled realizes.
std::string profileTracePath();

} // namespace kiln::environment

#endif // KILN_LIB_DRIVER_ENVIRONMENT_H
