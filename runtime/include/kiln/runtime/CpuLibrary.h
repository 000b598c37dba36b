//===- CpuLibrary.h - CPU kernels compiled ahead of time --------*- C++ -*-===//
//
// The CPU code of a .kiln file is one ELF shared object (every kernel an
// exported symbol with CpuKernelFn's packed convention) made by the
// compiler for a named ISA level. The runtime loads it without LLVM: the
// bytes are checked (ELF header for this machine, a hash over them, every
// instruction-set feature the code was compiled for present on this CPU),
// written to an anonymous memfd and dlopen'ed from it. Loading a .kiln with
// CPU code runs native code from the file, as loading a shared library does:
// load only files you trust.
//
// Ownership: a CpuLibrary owns its dlopen handle; kernels looked up in it
// stay valid while it lives (CpuCode::owner keeps it).
//
// Threading: immutable after load; lookups from any thread.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPULIBRARY_H
#define KILN_RUNTIME_CPULIBRARY_H

#include "kiln/runtime/Cpu.h"
#include "kiln/runtime/Status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rt {

/// Each kernel `s` of a library also exports `s` + these as 64-bit
/// constants: the outer loop count and the number of arguments its code was
/// compiled for, which a loader holds the file's metadata against.
inline constexpr const char *kCpuOuterIterationsSuffix = "_outer_iterations";
inline constexpr const char *kCpuArgumentsSuffix = "_arguments";

/// The instruction-set features (LLVM's names: "avx2", "avx512f", ...) the
/// runtime can check on this CPU.
const std::vector<std::string> &checkableCpuFeatures();
/// Those of `features` this CPU lacks; a name the runtime cannot check is
/// reported as lacking.
std::vector<std::string> missingCpuFeatures(const std::vector<std::string> &features);
/// /proc/cpuinfo's "model name", else "this CPU".
std::string hostCpuName();

/// 64-bit FNV-1a: guards the library bytes against corruption before the
/// dynamic loader reads them (not against forgery).
uint64_t libraryHash(const uint8_t *data, size_t size);

class CpuLibrary {
public:
  struct Description {
    std::string isa;                   ///< "x86-64-v3", or the host CPU's name
    std::vector<std::string> features; ///< what the code needs
    uint64_t hash = 0;                 ///< libraryHash of bytes
    std::vector<uint8_t> bytes;        ///< the shared object
  };

  /// Checks, then loads; `what` names the file in errors. Errors: not an ELF
  /// shared object for this machine, a hash mismatch (corruption), a CPU
  /// without a needed feature (naming the ISA, the features and this CPU),
  /// or the dynamic loader's refusal.
  static StatusOr<std::shared_ptr<CpuLibrary>> load(Description description,
                                                    const std::string &what);
  /// The checks of load() without loading. checkBytes: an ELF64 shared
  /// object whose bytes match their hash (else the file is corrupt).
  /// checkCpu: for this machine, every feature present (else it needs
  /// another CPU, or another --cpu-isa).
  static Status checkBytes(const Description &description, const std::string &what);
  static Status checkCpu(const Description &description, const std::string &what);
  /// Holds code for another CPU without loading it (a compiler writing a
  /// file for x86-64-v4 on a machine without AVX-512): lookup() is null.
  static std::shared_ptr<CpuLibrary> unloaded(Description description);
  ~CpuLibrary();
  bool loaded() const { return handle_ != nullptr; }
  CpuLibrary(const CpuLibrary &) = delete;
  CpuLibrary &operator=(const CpuLibrary &) = delete;

  const Description &description() const { return description_; }
  /// The kernel exported as `symbol`, or null.
  CpuKernelFn lookup(const std::string &symbol) const;
  /// The 64-bit constant exported as `symbol`, or nullopt.
  std::optional<int64_t> lookupValue(const std::string &symbol) const;

private:
  CpuLibrary(Description description, void *handle, int fd)
      : description_(std::move(description)), handle_(handle), fd_(fd) {}
  Description description_;
  void *handle_;
  int fd_; // the memfd it was loaded from, open while it is loaded
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_CPULIBRARY_H
