//===- Options.h - what a compile is told besides its IR --------*- C++ -*-===//
//
// The knobs of the compiler that do not live in the IR: read from the
// environment by the driver alone (CompilerOptions::fromEnvironment, in
// lib/Driver) at each realization, compile and tuning run, and handed down
// in the Session. Nothing below the driver reads an environment variable.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_OPTIONS_H
#define KILN_COMPILER_OPTIONS_H

#include <cstdint>
#include <string>

namespace kiln {

enum class AutotuneMode { Off, Cached, On };

struct CompilerOptions {
  /// KILN_GPU_LIMITS: edits of every GPU target (describeTarget's grammar),
  /// compiling for another GPU than the one here.
  std::string gpuTargetEdits;
  /// KILN_AUTOTUNE: defaults only, tuned configs from the store, or also
  /// tune (the driver, before compiling) what the store lacks.
  AutotuneMode autotune = AutotuneMode::Cached;
  /// KILN_AUTOTUNE_REPLAY: timings to tune from instead of running.
  std::string autotuneReplay;
  /// KILN_DUMP_SPIRV: a folder for each compiled kernel's SPIR-V, its
  /// kernel module and its pipeline; KILN_DUMP_LABEL: what replays report.
  std::string dumpSpirvDir, dumpLabel;
  /// KILN_DUMP_CPU_IR: print each CPU kernel's optimized LLVM IR.
  bool dumpCpuIR = false;
  /// KILN_KERNEL_CACHE_MB: the compiled-kernel caches' budget.
  uint64_t kernelCacheBytes = uint64_t(512) << 20;
  /// KILN_CPU_ISA: the x86-64 level the CPU device's code is for ("host":
  /// this CPU's own); checked against this CPU where it is used.
  std::string cpuIsa = "host";

  /// The environment's values; throws kiln::Error naming the variable and
  /// what it takes when one is malformed.
  static CompilerOptions fromEnvironment();
};

} // namespace kiln

#endif // KILN_COMPILER_OPTIONS_H
