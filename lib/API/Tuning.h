//===- Tuning.h - autotuning: modes, keys, the tuner ------------*- C++ -*-===//
//
// KILN_AUTOTUNE=off|cached|on decides where a kernel's config comes from:
// `off` takes the device's default; `cached` (the default) takes a tuned
// config from the cache's store when one is there, else the default, so a
// first run is never slowed by tuning; `on` also tunes every miss on first
// use, on the device that runs it. kiln-tune tunes a whole graph ahead of
// time.
//
// A record's key is the kernel without its config (its ops, shapes and
// dtypes), the device's fingerprint (vendor, device, driver version and
// pipelineCacheUUID; for the CPU its model and ISA features), Kiln's
// compiler version and the search space's version.
//
// The tuner times candidates through the runtime only: Vulkan timestamps
// around the one dispatch (the CPU clock on the CPU), after warm-up runs,
// the median of several. Candidates far behind the leader stop early. A
// candidate whose output differs from the default config's never wins.
// KILN_AUTOTUNE_REPLAY=timings.json replaces the measured times with
// recorded ones, so tests pick known winners on any machine; outputs are
// still checked.
//
// Threading: tuning runs with the session lock held, so nothing else of
// this process runs on the device meanwhile.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_API_TUNING_H
#define KILN_LIB_API_TUNING_H

#include "Session.h"

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Codegen/KernelConfig.h"
#include "kiln/runtime/Device.h"
#include "kiln/runtime/Store.h"
#include "kiln/runtime/Vulkan.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kiln {


/// Bumped whenever the candidate lists or the config forms change: records
/// of an older search space are misses.
constexpr int kSearchSpaceVersion = 5;
/// Kiln's compiler version, in every cache key.
const char *compilerVersion();

/// "vulkan vendor=4318 device=8997 driver=... cache=<uuid>", and the
/// target edits compiled for.
std::string deviceFingerprint(const rt::AdapterInfo &adapter, const CompilerOptions &options);
/// "cpu model=<name> features=+avx2,+fma,...", and the level compiled for.
std::string cpuFingerprint(const CompilerOptions &options);

/// The tuning key of `kernel` (its config left out) on a device.
std::string tuningKey(KernelOp kernel, const std::string &fingerprint);

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
std::string tuningKeyHash(const std::string &key);

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

/// The configure step with the store: the kernel's tuned config (tuning a
/// miss first when KILN_AUTOTUNE=on and `device` is given), else the default.
/// Throws CompileError for a config the kernel or device cannot take.
KernelConfig configureKernel(Session &session, KernelOp kernel, const DeviceLimits *gpu,
                             const std::string &fingerprint, rt::Device *device);

} // namespace kiln

#endif // KILN_LIB_API_TUNING_H
