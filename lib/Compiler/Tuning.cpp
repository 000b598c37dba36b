//===- Tuning.cpp - tuned configs: cache keys and the store's lookup -----===//

#include "lib/Compiler/Tuning.h"

#include "lib/Target/LLVM/CpuObject.h"
#include "lib/Target/SPIRV/KernelCompiler.h"
#include "lib/Compiler/KernelStore.h"
#include "kiln/runtime/Version.h"

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/Errors.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

using namespace mlir;
using namespace kiln;

const char *kiln::compilerVersion() { return "kiln-" KILN_VERSION; }

std::string kiln::deviceFingerprint(const rt::AdapterInfo &adapter,
                                    const CompilerOptions &options) {
  std::string uuid;
  for (uint8_t byte : adapter.pipelineCacheUUID)
    uuid += llvm::hexdigit(byte >> 4, true), uuid += llvm::hexdigit(byte & 15, true);
  std::string fingerprint = "vulkan vendor=" + std::to_string(adapter.vendorId) +
                            " device=" + std::to_string(adapter.deviceId) +
                            " driver=" + std::to_string(adapter.driverVersion) + " cache=" + uuid;
  // Compiling for another GPU's limits (gpuTargetOf): its records and code
  // are not this device's.
  if (!options.gpuTargetEdits.empty())
    fingerprint += " compiled-for " + options.gpuTargetEdits;
  return fingerprint;
}

std::string kiln::cpuFingerprint(const CompilerOptions &options) {
  static const std::string host = [] {
    std::vector<std::string> enabled;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      if (feature.second)
        enabled.push_back(feature.first().str());
    std::sort(enabled.begin(), enabled.end());
    return "cpu model=" + llvm::sys::getHostCPUName().str() + " features=" +
           llvm::join(enabled, ",");
  }();
  // Code for a forced level (KILN_CPU_ISA) is not this CPU's own.
  const std::string &isa = cpuDeviceIsa(options);
  return isa == "host" ? host : host + " isa=" + isa;
}

std::string kiln::tuningKey(KernelOp kernel, const std::string &fingerprint) {
  // The kernel as printed without its config: ops, shapes, dtypes, device.
  DictionaryAttr config = kernel.getConfigAttr();
  kernel.removeConfigAttr();
  std::string key = "kernel " + kernelText(kernel);
  llvm::raw_string_ostream os(key);
  os << "\ndevice " << fingerprint << "\ncompiler " << compilerVersion() << "\nsearch space "
     << kSearchSpaceVersion;
  if (config)
    kernel.setConfigAttr(config);
  return key;
}

std::string kiln::tuningKeyHash(const std::string &key) {
  return llvm::utohexstr(rt::fnv1a64(key.data(), key.size()), /*LowerCase=*/true, 16);
}

std::optional<KernelConfig> kiln::tunedConfig(rt::Store &store, KernelOp kernel,
                                              const DeviceLimits *gpu, const std::string &key) {
  std::optional<rt::Store::TuningRecord> record = store.findTuning(key);
  if (!record)
    return std::nullopt;
  // The record's config is checked against the kernel's candidates: a
  // record that names none of them is stale (a miss).
  for (const KernelConfig &candidate : candidateKernelConfigs(kernel, gpu))
    if (candidate.str() == record->config)
      return candidate;
  return std::nullopt;
}

KernelConfig kiln::configureKernel(Session &session, KernelOp kernel, const DeviceLimits *gpu,
                                   const std::string &fingerprint) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(kernel.getContext(), [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });
  AutotuneMode mode = kernel.getConfigAttr() ? AutotuneMode::Off : session.options.autotune;
  rt::Store *store = mode == AutotuneMode::Off ? nullptr : rt::Store::process();
  TunedConfigLookup lookup;
  if (store) {
    std::string key = tuningKey(kernel, fingerprint);
    std::optional<KernelConfig> tuned = tunedConfig(*store, kernel, gpu, key);
    if (tuned)
      ++session.stats.tuning_hits;
    else
      ++session.stats.tuning_misses;
    lookup = [tuned](KernelOp) { return tuned; };
  }
  FailureOr<KernelConfig> config = materializeKernelConfig(kernel, gpu, lookup);
  if (failed(config))
    throw CompileError("kernel configuration: " + diagnostics);
  return *config;
}
