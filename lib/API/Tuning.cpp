//===- Tuning.cpp - autotuning modes, cache keys, the store and replay ----===//

#include "Tuning.h"

#include "CpuObject.h"
#include "KernelCompiler.h"
#include "KernelStore.h"

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

const char *kiln::compilerVersion() { return "kiln-0.5"; }

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

TimingReplay TimingReplay::load(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    throw Error("KILN_AUTOTUNE_REPLAY: cannot read " + path + ": " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    throw Error("KILN_AUTOTUNE_REPLAY: " + path + " is not JSON: " +
                llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  const llvm::json::Object *kernels = root ? root->getObject("kernels") : nullptr;
  if (!kernels)
    throw Error("KILN_AUTOTUNE_REPLAY: " + path +
                " must hold {\"kernels\": {\"<key hash>\": {\"<config>\": seconds}}}");
  TimingReplay replay;
  for (const auto &[hash, value] : *kernels) {
    const llvm::json::Object *configs = value.getAsObject();
    if (!configs)
      throw Error("KILN_AUTOTUNE_REPLAY: " + path + ": kernel " + hash.str() +
                  " must map configs to seconds");
    for (const auto &[config, seconds] : *configs) {
      std::optional<double> s = seconds.getAsNumber();
      if (!s || !(*s >= 0))
        throw Error("KILN_AUTOTUNE_REPLAY: " + path + ": kernel " + hash.str() + ", config '" +
                    config.str() + "': the time must be a number of seconds");
      replay.seconds[hash.str()][config.str()] = *s;
    }
  }
  return replay;
}

const TimingReplay *TimingReplay::fromOptions(const CompilerOptions &options) {
  // Loaded once per path, for the process.
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<TimingReplay>> loaded;
  if (options.autotuneReplay.empty())
    return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<TimingReplay> &replay = loaded[options.autotuneReplay];
  if (!replay)
    replay = std::make_unique<TimingReplay>(load(options.autotuneReplay));
  return replay.get();
}

void TimingReplay::save(const std::string &path) const {
  llvm::json::Object kernels;
  for (const auto &[hash, configs] : seconds) {
    llvm::json::Object times;
    for (const auto &[config, s] : configs)
      times[config] = s;
    kernels[hash] = std::move(times);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{{"kernels", std::move(kernels)}}))
     << "\n";
  std::ofstream out(path);
  out << text;
  if (!out)
    throw Error("cannot write the timings to " + path);
}

KernelConfig kiln::configureKernel(Session &session, KernelOp kernel, const DeviceLimits *gpu,
                                   const std::string &fingerprint, rt::Device *device) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(kernel.getContext(), [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });
  AutotuneMode mode = kernel.getConfigAttr() ? AutotuneMode::Off : session.options.autotune;
  rt::Store *store = mode == AutotuneMode::Off ? nullptr : rt::Store::process();
  TunedConfigLookup lookup;
  std::string key;
  if (store) {
    key = tuningKey(kernel, fingerprint);
    lookup = [&](KernelOp) -> std::optional<KernelConfig> {
      std::optional<rt::Store::TuningRecord> record = store->findTuning(key);
      if (!record)
        return std::nullopt;
      // The record's config is checked against the kernel's candidates: a
      // record that names none of them is stale (a miss).
      for (const KernelConfig &candidate : candidateKernelConfigs(kernel, gpu))
        if (candidate.str() == record->config)
          return candidate;
      return std::nullopt;
    };
    std::optional<KernelConfig> tuned = lookup(kernel);
    if (tuned)
      ++session.stats.tuning_hits;
    else
      ++session.stats.tuning_misses;
    if (!tuned && mode == AutotuneMode::On && device) {
      TuneOptions options;
      options.replay = TimingReplay::fromOptions(session.options);
      TuneResult result = tuneKernel(session, kernel, *device, options);
      rt::Store::TuningRecord record{result.best.str(), result.bestSeconds,
                                     result.defaultSeconds, result.candidates};
      store->putTuning(key, record);
      ++session.stats.kernels_tuned;
    }
  }
  FailureOr<KernelConfig> config = materializeKernelConfig(kernel, gpu, lookup);
  if (failed(config))
    throw CompileError("kernel configuration: " + diagnostics);
  return *config;
}
