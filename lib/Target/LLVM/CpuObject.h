//===- CpuObject.h - CPU kernels as a shared object, ahead of time -*- C++ -*-===//
//
// The cpu target of a .kiln file: every kernel lowered as the JIT lowers it,
// optimized by the same LLVM pipeline for a named ISA level, emitted as an
// object with one exported packed entry (rt::CpuKernelFn), and all of a
// program's objects linked by ld.lld into one shared object that the runtime
// dlopens (runtime/include/kiln/runtime/CpuLibrary.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TARGET_LLVM_CPUOBJECT_H
#define KILN_LIB_TARGET_LLVM_CPUOBJECT_H

#include "dialects/Kiln/KilnDialect.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class TargetMachine;
}

namespace kiln {
struct CompilerOptions;
struct Session;

/// Emits objects for one ISA level: "host" (this CPU's model and features,
/// which gives the JIT's code, bit for bit), or "x86-64", "x86-64-v2",
/// "x86-64-v3", "x86-64-v4".
/// The instruction set the CPU device's JIT compiles for: "host" (this
/// CPU), or the x86-64 level options.cpuIsa (KILN_CPU_ISA) names
/// (x86-64-v2, -v3, -v4), so that a machine with AVX-512 runs the code a
/// machine without it would. Throws Error for an unknown level or one this
/// CPU lacks.
const std::string &cpuDeviceIsa(const CompilerOptions &options);
/// The vector lanes of f32 the CPU device's kernels are configured for:
/// 16 with AVX-512, else 8.
int cpuDeviceLanes(const CompilerOptions &options);

class CpuObjectEmitter {
public:
  /// Throws Error for an unknown ISA level, listing the known ones.
  explicit CpuObjectEmitter(const std::string &isa);
  ~CpuObjectEmitter();

  /// "x86-64-v3", or "host (sapphirerapids)".
  const std::string &isaName() const { return name_; }
  /// The features the runtime checks before it loads the code
  /// (rt::checkableCpuFeatures() that this ISA level has).
  std::vector<std::string> requiredFeatures() const;

  struct Object {
    std::vector<uint8_t> bytes;
    int64_t outerIterations = 0, innerIterations = 1;
    uint32_t numBindings = 0;
    uint64_t instructions = 0; ///< LLVM IR instructions after optimization
  };
  /// `kernel` as an object exporting `symbol`, configured first for this
  /// CPU (from `session`'s store) when the ISA is the host's. Throws
  /// CompileError.
  Object emit(Session &session, KernelOp kernel, const std::string &symbol);
  /// The same for a kernel already configured: the JIT's path too, so that
  /// its code and a .kiln's for the host are one and the same. Keeps the
  /// optimized LLVM IR in `optimizedIR` when given.
  Object emitConfigured(KernelOp kernel, const std::string &symbol,
                        std::string *optimizedIR = nullptr);

private:
  std::string name_;
  std::unique_ptr<llvm::TargetMachine> machine_;
};

/// Links objects into one shared object with ld.lld. Throws CompileError
/// (naming the package to install when ld.lld is missing).
std::vector<uint8_t> linkSharedObject(const std::vector<std::vector<uint8_t>> &objects);

} // namespace kiln

#endif // KILN_LIB_TARGET_LLVM_CPUOBJECT_H
