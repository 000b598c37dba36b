//===- TuneGraph.cpp - kiln::tune_graph: every kernel of a graph, tuned ---===//

#include "kiln/Tune.h"

#include "lib/Driver/CompileGraph.h"
#include "lib/Tune/Tuner.h"
#include "lib/Frontend/Devices.h"
#include "lib/Frontend/GraphFile.h"
#include "lib/Target/SPIRV/KernelCompiler.h"
#include "lib/Driver/ProcessSession.h"
#include "lib/Compiler/Tuning.h"

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/Errors.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

using namespace mlir;
using namespace kiln;

namespace {
std::string summaryOf(KernelOp kernel) {
  std::string summary;
  for (Operation &op : kernel.getBody().front().without_terminator())
    summary += (summary.empty() ? "" : "+") + op.getName().stripDialect().str();
  return summary + " -> " + programTypeOf(kernel.getResult(0).getType()).str();
}
/// Bytes of each kernel function argument (inputs, then results).
std::vector<uint64_t> argumentBytes(KernelOp kernel) {
  std::vector<uint64_t> bytes;
  auto add = [&](Type type) { bytes.push_back(programTypeOf(type).bytes()); };
  for (Value v : kernel.getInputs())
    add(v.getType());
  for (Value v : kernel.getResults())
    add(v.getType());
  return bytes;
}

std::vector<TunedKernel> emitCandidates(Session &s, const std::vector<KernelOp> &kernels,
                                        const rt::AdapterInfo &adapter,
                                        const std::string &fingerprint, const std::string &dir,
                                        const std::string &only) {
  std::filesystem::create_directories(dir);
  DeviceLimits limits = gpuTargetOf(adapter, s.options).limits;
  llvm::json::Object index;
  std::vector<TunedKernel> listed;
  for (KernelOp kernel : kernels) {
    kernel.removeConfigAttr();
    std::string key = tuningKey(kernel, fingerprint);
    std::string hash = tuningKeyHash(key);
    std::vector<KernelConfig> candidates = candidateKernelConfigs(kernel, &limits);
    std::vector<uint64_t> args = argumentBytes(kernel);
    size_t inputs = kernel.getInputs().size();
    std::vector<bool> halves;
    for (Type type : llvm::concat<const Type>(kernel.getInputs().getTypes(),
                                              kernel.getResults().getTypes()))
      halves.push_back(cast<RankedTensorType>(type).getElementType().isF16());
    llvm::json::Array configs;
    int emitted = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (i > 0 && !configMatches(candidates[i], only)) {
        configs.push_back(nullptr); // left out by --only
        continue;
      }
      kernel.setConfigAttr(kernelConfigAttr(kernel.getContext(), candidates[i]));
      std::optional<CompiledKernel> compiled;
      try {
        compiled = compileKernel(s, kernel, adapter);
      } catch (const CompileError &) {
        configs.push_back(nullptr); // refused by the builders: not a candidate
        continue;
      }
      kernel.removeConfigAttr();
      configs.push_back(candidates[i].str());
      ++emitted;
      std::string base = dir + "/" + hash + "-" + std::to_string(i);
      std::ofstream(base + ".spv", std::ios::binary)
          .write(reinterpret_cast<const char *>(compiled->spirv.data()),
                 static_cast<std::streamsize>(compiled->spirv.size() * 4));
      std::ofstream manifest(base + ".kernel");
      manifest << "spirv " << hash << "-" << i << ".spv\nentry " << compiled->entryPoint
               << "\ngroups " << compiled->groups[0] << " " << compiled->groups[1] << " "
               << compiled->groups[2] << "\nbindings";
      for (uint32_t arg : compiled->bindingOrder)
        manifest << " " << args[arg];
      manifest << "\noutputs";
      for (size_t b = 0; b < compiled->bindingOrder.size(); ++b)
        if (compiled->bindingOrder[b] >= inputs)
          manifest << " " << b;
      // f16 bindings: the replay fills them with halves (f32 bit patterns
      // read as halves hold NaNs, and NaN checksums compare with nothing).
      manifest << "\nhalves";
      for (size_t b = 0; b < compiled->bindingOrder.size(); ++b)
        if (halves[compiled->bindingOrder[b]])
          manifest << " " << b;
      manifest << "\n";
    }
    kernel.removeConfigAttr();
    index[hash] = llvm::json::Object{{"key", key},
                                     {"summary", summaryOf(kernel)},
                                     {"configs", std::move(configs)}};
    TunedKernel entry;
    entry.summary = summaryOf(kernel);
    entry.default_config = candidates.front().str();
    entry.candidates = emitted;
    listed.push_back(std::move(entry));
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(index))) << "\n";
  std::ofstream(dir + "/candidates.json") << text;
  return listed;
}
} // namespace

int kiln::import_tuning(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    throw Error("cannot read " + path + ": " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    throw Error(path + " is not JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  const llvm::json::Object *keys = root ? root->getObject("keys") : nullptr;
  const llvm::json::Object *defaults = root ? root->getObject("defaults") : nullptr;
  if (!keys || !defaults)
    throw Error(path + " must hold \"kernels\", \"keys\" and \"defaults\" (see docs/tuning.md)");
  TimingReplay timings = TimingReplay::load(path);
  rt::Store *store = rt::Store::process();
  if (!store)
    throw Error("no usable cache directory to import into: set KILN_CACHE_DIR");
  int stored = 0;
  for (const auto &[hash, configs] : timings.seconds) {
    std::optional<llvm::StringRef> key = keys->getString(hash);
    std::optional<llvm::StringRef> byDefault = defaults->getString(hash);
    if (!key || !byDefault || configs.empty())
      throw Error(path + ": kernel " + hash + " has no key, default or timings");
    auto best = std::min_element(configs.begin(), configs.end(),
                                 [](const auto &a, const auto &b) { return a.second < b.second; });
    auto it = configs.find(byDefault->str());
    double defaultSeconds = it == configs.end() ? 0 : it->second;
    stored += store->putTuning(key->str(), {best->first, best->second, defaultSeconds,
                                            static_cast<int64_t>(configs.size())});
  }
  return stored;
}

TuneReport kiln::tune_graph(const std::string &text, const std::string &name,
                            const TuneGraphOptions &options) {
  Device device = options.device.empty() ? Device::default_device() : Device::parse(options.device);
  rt::Device &target = runtimeDevice(device);
  Session &s = session();
  auto lock = lockForCompile(s);
  MLIRContext &ctx = s.contextForGraph();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, diagnosticCollector(diagnostics));
  OwningOpRef<ModuleOp> module = parseGraphText(ctx, text, name, diagnostics);
  placeAndFuseFor(*module, device, name, diagnostics);

  rt::VulkanDevice *vulkan = target.replayDevice();
  DeviceLimits limits = vulkan ? gpuTargetOf(vulkan->adapter(), s.options).limits : DeviceLimits();
  std::string fingerprint =
      vulkan ? deviceFingerprint(vulkan->adapter(), s.options) : cpuFingerprint(s.options);
  rt::Store *store = rt::Store::process();
  TuneReport report;
  report.store_path = store ? store->path() : "";

  std::vector<KernelOp> kernels;
  module->walk([&](KernelOp kernel) {
    if (cast<RankedTensorType>(kernel.getResult(0).getType()).getNumElements() > 0)
      kernels.push_back(kernel);
  });
  // --only words that no candidate of any kernel holds (a misspelt
  // "stage=2") would time the defaults alone and store them as tuned.
  if (!options.only.empty()) {
    std::string example;
    bool any = false;
    for (KernelOp kernel : kernels) {
      std::vector<KernelConfig> candidates = candidateKernelConfigs(kernel, vulkan ? &limits : nullptr);
      for (size_t c = 1; c < candidates.size() && !any; ++c)
        any = configMatches(candidates[c], options.only);
      if (example.empty() && candidates.size() > 1)
        example = candidates[1].str();
    }
    if (!any)
      throw Error("--only '" + options.only +
                  "' matches no candidate of this graph's kernels; its words are a config "
                  "line's, such as '" + example + "'");
  }
  if (!options.emit_candidates_dir.empty()) {
    if (!vulkan)
      throw Error("kiln-tune: candidates are emitted for Vulkan devices, not " + device.name());
    report.kernels = emitCandidates(s, kernels, vulkan->adapter(), fingerprint,
                                    options.emit_candidates_dir, options.only);
    return report;
  }
  TimingReplay recorded;
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (size_t i = 0; i < kernels.size(); ++i) {
    KernelOp kernel = kernels[i];
    kernel.removeConfigAttr();
    TunedKernel tuned;
    tuned.summary = summaryOf(kernel);
    tuned.default_config = defaultKernelConfig(kernel, vulkan ? &limits : nullptr).str();
    std::string key = tuningKey(kernel, fingerprint);
    std::optional<rt::Store::TuningRecord> record = store ? store->findTuning(key) : std::nullopt;
    if (record) {
      tuned.from_cache = true;
      tuned.best = record->config;
      tuned.best_seconds = record->seconds;
      tuned.default_seconds = record->defaultSeconds;
      tuned.candidates = static_cast<int>(record->candidates);
    } else {
      TuneOptions tune;
      tune.replay = TimingReplay::fromOptions(s.options);
      tune.record = options.record_path.empty() ? nullptr : &recorded;
      tune.only = options.only;
      if (options.budget_seconds > 0)
        tune.budgetSeconds = std::max(0.0, options.budget_seconds - elapsed()) /
                             static_cast<double>(kernels.size() - i);
      tune.progress = [&](int tried, int total, double best, double byDefault) {
        if (!options.progress)
          return;
        TuneProgress p{static_cast<int>(i + 1), static_cast<int>(kernels.size()), tuned.summary,
                       tried, total, best, byDefault, 0};
        // The pace so far, over the kernels left (this one's share included).
        double done = static_cast<double>(i) + double(tried) / std::max(1, total);
        p.eta_seconds = options.budget_seconds > 0
                            ? std::max(0.0, options.budget_seconds - elapsed())
                            : elapsed() / std::max(1e-9, done) * (kernels.size() - done);
        options.progress(p);
      };
      TuneResult result = tuneKernel(s, kernel, target, tune);
      tuned.best = result.best.str();
      tuned.best_seconds = result.bestSeconds;
      tuned.default_seconds = result.defaultSeconds;
      tuned.candidates = result.candidates;
      tuned.tried = result.tried;
      tuned.wrong = result.wrong;
      if (store)
        store->putTuning(key, {tuned.best, tuned.best_seconds, tuned.default_seconds,
                               tuned.candidates});
      ++s.stats.kernels_tuned;
    }
    report.kernels.push_back(std::move(tuned));
  }
  if (!options.record_path.empty())
    recorded.save(options.record_path);
  return report;
}
