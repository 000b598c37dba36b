//===- TuneGraph.cpp - kiln::tune_graph: every kernel of a graph, tuned ---===//

#include "kiln/Tune.h"

#include "Compile.h"
#include "Devices.h"
#include "GraphFile.h"
#include "KernelCompiler.h"
#include "Session.h"
#include "Tuning.h"

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/Errors.h"

#include <chrono>

using namespace mlir;
using namespace kiln;

namespace {
std::string summaryOf(KernelOp kernel) {
  std::string summary;
  for (Operation &op : kernel.getBody().front().without_terminator())
    summary += (summary.empty() ? "" : "+") + op.getName().stripDialect().str();
  return summary + " -> " + programTypeOf(kernel.getResult(0).getType()).str();
}
} // namespace

TuneReport kiln::tune_graph(const std::string &text, const std::string &name,
                            const TuneGraphOptions &options) {
  Device device = options.device.empty() ? Device::default_device() : Device::parse(options.device);
  rt::Device &target = runtimeDevice(device);
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  MLIRContext &ctx = s.contextForGraph();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&ctx, diagnosticCollector(diagnostics));
  OwningOpRef<ModuleOp> module = parseGraphText(ctx, text, name, diagnostics);
  placeAndFuseFor(*module, device, name, diagnostics);

  rt::VulkanDevice *vulkan = target.replayDevice();
  DeviceLimits limits = vulkan ? limitsOf(vulkan->adapter()) : DeviceLimits();
  std::string fingerprint = vulkan ? deviceFingerprint(vulkan->adapter()) : cpuFingerprint();
  rt::Store *store = rt::Store::process();
  TuneReport report;
  report.store_path = store ? store->path() : "";

  std::vector<KernelOp> kernels;
  module->walk([&](KernelOp kernel) {
    if (cast<RankedTensorType>(kernel.getResult(0).getType()).getNumElements() > 0)
      kernels.push_back(kernel);
  });
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
      tune.replay = TimingReplay::fromEnvironment();
      tune.record = options.record_path.empty() ? nullptr : &recorded;
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
