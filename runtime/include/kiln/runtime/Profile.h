//===- Profile.h - time every kernel of a Program ---------------*- C++ -*-===//
//
// The profiler behind KILN_PROFILE, kiln::profile() and kiln-run --profile.
// A program on one Vulkan device with timestamps is replayed with each
// dispatch bracketed by GPU timestamps (RunOptions::poisonResults is not
// applied there); anything else (the CPU, several devices) is interpreted with each dispatch run alone
// and timed by the host clock. Each kernel's row gives its time, its form,
// its ops and their source lines, and the GFLOP/s and GB/s it reached from
// the FLOPs and bytes the compiler counted (ProgramKernel).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PROFILE_H
#define KILN_RUNTIME_PROFILE_H

#include "kiln/runtime/Program.h"

#include <string>
#include <vector>

namespace kiln::rt {

struct DispatchTime {
  uint32_t step = 0;   ///< index into Program::steps
  uint32_t kernel = 0; ///< index into Program::kernels
  double nanoseconds = 0; ///< median over the runs
};

struct ProgramProfile {
  /// Every dispatch with work, in program order.
  std::vector<DispatchTime> dispatches;
  int runs = 0;
  /// "GPU timestamps" or "host clock, one dispatch at a time".
  std::string clock;
  double totalNanoseconds() const;
};

/// Runs `program` `runs` times (at least once) as rt::run does, timing each
/// dispatch; `last`, when set, receives the last run's result (the JIT
/// keeps its outputs). `fixed` as for ProgramReplay::create (weights
/// already on the device), else empty.
StatusOr<ProgramProfile> profile(const Program &program, const std::vector<Device *> &devices,
                                 const std::vector<ProgramInput> &inputs, int runs,
                                 const RunOptions &options = {}, RunResult *last = nullptr,
                                 const std::vector<std::shared_ptr<Buffer>> &fixed = {});

/// One line per dispatch: time, share, achieved GFLOP/s and GB/s, kind,
/// kernel, device, ops and source lines; then the total and the clock.
std::string profileTable(const Program &program, const ProgramProfile &profile);

/// The dispatches as Chrome trace events ("X" complete events, one row per
/// device), laid end to end from `startMicroseconds`; comma-separated,
/// without the enclosing array.
std::string chromeTraceEvents(const Program &program, const ProgramProfile &profile,
                              double startMicroseconds = 0);
/// A whole trace file for chrome://tracing and Perfetto.
std::string chromeTrace(const Program &program, const ProgramProfile &profile);

} // namespace kiln::rt

#endif // KILN_RUNTIME_PROFILE_H
