//===- Tuner.h - timing candidate configs on the device ---------*- C++ -*-===//
//
// The tuner times candidates through the runtime only: Vulkan timestamps
// around the one dispatch (the CPU clock on the CPU), after warm-up runs,
// the median of several. Candidates far behind the leader stop early. A
// candidate whose output differs from the default config's never wins.
// KILN_AUTOTUNE_REPLAY=timings.json replaces the measured times with
// recorded ones, so tests pick known winners on any machine; outputs are
// still checked. It sits above the compiler: it compiles candidates, and
// the driver runs it (tuneUntunedKernels) before compiling a graph.
//
// Threading: tuning runs with the session lock held, so nothing else of
// this process runs on the device meanwhile.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TUNE_TUNER_H
#define KILN_LIB_TUNE_TUNER_H

#include "lib/Compiler/Tuning.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln {

/// Recorded timings (KILN_AUTOTUNE_REPLAY): per tuning key's hash (16 hex
/// digits, tuningKeyHash), per config (KernelConfig::str()), seconds.
struct TimingReplay {
  std::map<std::string, std::map<std::string, double>> seconds;
  /// Reads `path`; throws Error naming the file and what is wrong.
  static TimingReplay load(const std::string &path);
  /// options.autotuneReplay's (KILN_AUTOTUNE_REPLAY), loaded once per
  /// path; null when unset.
  static const TimingReplay *fromOptions(const CompilerOptions &options);
  void save(const std::string &path) const;
};

struct TuneOptions {
  int warmups = 2;
  int runs = 7;
  /// Stop after this many seconds of tuning (0: no limit); the best so far wins.
  double budgetSeconds = 0;
  const TimingReplay *replay = nullptr;
  /// Filled with every candidate's measured time (for `kiln-tune --record`).
  TimingReplay *record = nullptr;
  /// Tests: changes a candidate's output before it is checked.
  std::function<void(const KernelConfig &, std::vector<std::vector<uint8_t>> &)> corruptOutput;
  /// Called after each candidate: (tried, total, best seconds, default seconds).
  std::function<void(int, int, double, double)> progress;
  /// TuneGraphOptions::only: words every candidate but the default must hold.
  std::string only;
};

/// Whether `config`'s line holds every space-separated word of `only` as
/// one of its own words (an empty `only` takes every config).
bool configMatches(const KernelConfig &config, const std::string &only);

struct TuneResult {
  KernelConfig best;
  double bestSeconds = 0, defaultSeconds = 0;
  int candidates = 0, tried = 0, wrong = 0, failed = 0;
};

/// Tunes `kernel` (no config yet) on `device`, leaves it without a config,
/// and returns the winner. Throws CompileError when even the default
/// config fails.
TuneResult tuneKernel(Session &session, KernelOp kernel, rt::Device &device,
                      const TuneOptions &options);

/// With options.autotune == On: every kernel of the placed, fused `func`
/// (on the device of the ones `tunes` accepts) that the store has no record
/// for is tuned on its device and its winner stored, so that compiling it
/// then finds it. Kernels with a config written are left alone.
void tuneUntunedKernels(Session &session, mlir::func::FuncOp func,
                        const std::function<bool(DeviceAttr)> &tunes = nullptr);

} // namespace kiln

#endif // KILN_LIB_TUNE_TUNER_H
