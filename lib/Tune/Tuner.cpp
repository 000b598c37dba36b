//===- Tuner.cpp - timing a kernel's candidate configs on its device ------===//
//
// Each candidate is compiled like any kernel, wrapped in a Program of one
// dispatch and run through the runtime: a timed replay on Vulkan (GPU
// timestamps), rt::run and the host clock on the CPU. The default config
// runs first; its output is the reference every other candidate's must
// match before its time counts.
//
//===----------------------------------------------------------------------===//

#include "lib/Tune/Tuner.h"

#include "lib/Compiler/ProgramBuilder.h"
#include "lib/Compiler/RuntimeDevices.h"
#include "lib/Target/LLVM/CpuCompiler.h"
#include "lib/Target/LLVM/CpuObject.h"
#include "lib/Target/SPIRV/KernelCompiler.h"

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/Errors.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

using namespace mlir;
using namespace kiln;

namespace {
using Clock = std::chrono::steady_clock;

/// A one-kernel Program: inputs, one dispatch, its results as outputs.
rt::Program singleKernelProgram(KernelOp kernel, const std::string &deviceName,
                                rt::ProgramKernel code) {
  rt::Program program;
  program.devices = {deviceName};
  rt::ProgramStep dispatch;
  for (Value operand : kernel.getInputs()) {
    rt::ProgramStep input;
    input.kind = rt::ProgramStep::Kind::input;
    input.index = static_cast<uint32_t>(program.inputs.size());
    input.results = {static_cast<uint32_t>(program.values.size())};
    dispatch.operands.push_back(input.results[0]);
    program.inputs.push_back(programTypeOf(operand.getType()));
    program.values.push_back({program.inputs.back(), 0});
    program.steps.push_back(std::move(input));
  }
  for (Value result : kernel.getResults()) {
    dispatch.results.push_back(static_cast<uint32_t>(program.values.size()));
    program.outputs.push_back(dispatch.results.back());
    program.values.push_back({programTypeOf(result.getType()), 0});
  }
  program.steps.push_back(std::move(dispatch));
  program.kernels.push_back(std::move(code));
  program.planBuffers();
  return program;
}

/// Inputs every kernel can take: floats in [0.5, 1.5] (no log or sqrt of a
/// negative, no division by zero), zero integers (a valid index anywhere).
std::vector<std::vector<uint8_t>> sampleInputs(const rt::Program &program) {
  std::mt19937 random(12345);
  std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
  std::vector<std::vector<uint8_t>> inputs;
  for (const rt::TensorType &type : program.inputs) {
    std::vector<uint8_t> bytes(type.bytes(), 0);
    if (type.element == rt::ElementType::f32)
      for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        float v = uniform(random);
        std::memcpy(&bytes[i], &v, 4);
      }
    else if (type.element == rt::ElementType::f16)
      for (size_t i = 0; i + 2 <= bytes.size(); i += 2)
        bytes[i + 1] = 0x3c; // 1.0
    inputs.push_back(std::move(bytes));
  }
  return inputs;
}

/// Outputs agree when every f32 differs by at most 1e-4 of the largest
/// magnitude (configs change the order of additions), other bytes exactly.
bool sameOutputs(const rt::Program &program, const std::vector<std::vector<uint8_t>> &a,
                 const std::vector<std::vector<uint8_t>> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t o = 0; o < a.size(); ++o) {
    if (a[o].size() != b[o].size())
      return false;
    if (program.values[program.outputs[o]].type.element != rt::ElementType::f32) {
      if (a[o] != b[o])
        return false;
      continue;
    }
    size_t n = a[o].size() / 4;
    std::vector<float> x(n), y(n);
    std::memcpy(x.data(), a[o].data(), n * 4);
    std::memcpy(y.data(), b[o].data(), n * 4);
    float scale = 0;
    for (float v : x)
      if (std::isfinite(v))
        scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(x[i]) != std::isnan(y[i]))
        return false;
      if (!std::isnan(x[i]) && !(std::fabs(x[i] - y[i]) <= 1e-4f * std::max(scale, 1e-30f)))
        return false;
    }
  }
  return true;
}

struct Measurement {
  double seconds = 0;
  std::vector<std::vector<uint8_t>> outputs;
};

class CandidateRunner {
public:
  CandidateRunner(rt::Device &device, const TuneOptions &options)
      : device(device), options(options) {}

  /// Runs `program` warmups + runs times (fewer once it is far behind
  /// `leader`); the median time and the first run's outputs.
  rt::StatusOr<Measurement> measure(const rt::Program &program,
                                    const std::vector<std::vector<uint8_t>> &inputs,
                                    double leader) {
    // The inputs live on the device, as a model's do: a CPU run's time is
    // then the kernel's, not copies of its operands.
    std::vector<rt::ProgramInput> in;
    for (const std::vector<uint8_t> &bytes : inputs) {
      rt::StatusOr<std::shared_ptr<rt::Buffer>> buffer = device.allocate(bytes.size());
      if (!buffer.isOk())
        return buffer.status();
      if (rt::Status s = device.upload(**buffer, bytes.data(), bytes.size()); !s.isOk())
        return s;
      in.push_back({*buffer, nullptr});
    }
    Measurement m;
    std::vector<double> times;
    std::unique_ptr<rt::ProgramReplay> replay;
    if (rt::VulkanDevice *vk = device.replayDevice()) {
      rt::StatusOr<std::unique_ptr<rt::ProgramReplay>> created =
          rt::ProgramReplay::create(program, *vk,
                                    std::vector<std::shared_ptr<rt::Buffer>>(inputs.size()), {},
                                    /*timed=*/true);
      if (!created.isOk())
        return created.status();
      replay = std::move(*created);
    }
    for (int i = 0; i < options.warmups + options.runs; ++i) {
      Clock::time_point start = Clock::now();
      rt::StatusOr<rt::RunResult> result =
          replay ? replay->run(in) : rt::run(program, {&device}, in);
      if (!result.isOk())
        return result.status();
      double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (replay) {
        std::vector<std::pair<uint32_t, double>> ns = replay->kernelNanoseconds();
        seconds = ns.empty() ? seconds : ns[0].second * 1e-9;
      }
      if (i == 0)
        for (const std::shared_ptr<rt::Buffer> &buffer : result->outputs) {
          std::vector<uint8_t> bytes(buffer->size());
          if (rt::Status s = device.download(*buffer, bytes.data(), bytes.size()); !s.isOk())
            return s;
          m.outputs.push_back(std::move(bytes));
        }
      if (i < options.warmups)
        continue;
      times.push_back(seconds);
      // Far behind the leader: no need for a precise time.
      if (times.size() >= 2 && leader > 0 && seconds > 3 * leader)
        break;
    }
    std::sort(times.begin(), times.end());
    m.seconds = times[times.size() / 2];
    return m;
  }

private:
  rt::Device &device;
  const TuneOptions &options;
};
} // namespace

bool kiln::configMatches(const KernelConfig &config, const std::string &only) {
  std::istringstream words(config.str());
  std::set<std::string> has{std::istream_iterator<std::string>(words),
                            std::istream_iterator<std::string>()};
  // Alternatives separated by '|': the config holds every word of one.
  std::istringstream alternatives(only);
  for (std::string alternative; std::getline(alternatives, alternative, '|');) {
    std::istringstream wanted(alternative);
    bool all = true;
    for (std::istream_iterator<std::string> w(wanted), end; w != end && all; ++w)
      all = has.count(*w) > 0;
    if (all)
      return true;
  }
  return only.empty();
}

TuneResult kiln::tuneKernel(Session &session, KernelOp kernel, rt::Device &device,
                            const TuneOptions &options) {
  rt::VulkanDevice *vk = device.replayDevice();
  const rt::AdapterInfo *adapter = vk ? &vk->adapter() : nullptr;
  DeviceLimits limits =
      adapter ? gpuTargetOf(*adapter, session.options).limits : DeviceLimits();
  const DeviceLimits *gpu = adapter ? &limits : nullptr;
  std::string hash =
      tuningKeyHash(tuningKey(kernel, adapter ? deviceFingerprint(*adapter, session.options)
                                        : cpuFingerprint(session.options)));
  std::vector<KernelConfig> candidates = candidateKernelConfigs(kernel, gpu);
  // The default always runs (the reference); the others only if they hold
  // every word of options.only.
  if (!options.only.empty()) {
    std::vector<KernelConfig> kept{candidates.front()};
    for (size_t i = 1; i < candidates.size(); ++i)
      if (configMatches(candidates[i], options.only))
        kept.push_back(candidates[i]);
    candidates = std::move(kept);
  }
  TuneResult result;
  result.candidates = static_cast<int>(candidates.size());
  const std::map<std::string, double> *recorded = nullptr;
  if (options.replay) {
    auto it = options.replay->seconds.find(hash);
    recorded = it == options.replay->seconds.end() ? nullptr : &it->second;
  }
  Clock::time_point start = Clock::now();
  CandidateRunner runner(device, options);
  std::vector<std::vector<uint8_t>> inputs, reference;
  double best = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const KernelConfig &candidate = candidates[i];
    if (i > 0 && options.budgetSeconds > 0 &&
        std::chrono::duration<double>(Clock::now() - start).count() > options.budgetSeconds)
      break;
    kernel.setConfigAttr(kernelConfigAttr(kernel.getContext(), candidate));
    rt::ProgramKernel code;
    code.name = "tuning candidate " + candidate.str();
    code.elements = cast<RankedTensorType>(kernel.getResult(0).getType()).getNumElements();
    try {
      if (adapter)
        code.spirv = spirvCodeOf(compileKernel(session, kernel, *adapter));
      else
        code.cpu = cpuCodeOf(compileCpuKernel(session, kernel));
    } catch (const CompileError &error) {
      kernel.removeConfigAttr();
      if (i == 0)
        throw;
      ++result.failed; // a config the builders refuse for this kernel
      continue;
    }
    rt::Program program = singleKernelProgram(kernel, device.name(), std::move(code));
    if (i == 0)
      inputs = sampleInputs(program);
    rt::StatusOr<Measurement> measured = runner.measure(program, inputs, best);
    kernel.removeConfigAttr();
    if (!measured.isOk()) {
      if (i == 0)
        throw CompileError("tuning: the default config failed to run: " +
                           measured.status().message());
      ++result.failed;
      continue;
    }
    ++result.tried;
    if (options.corruptOutput)
      options.corruptOutput(candidate, measured->outputs);
    double seconds = measured->seconds;
    if (recorded) {
      auto it = recorded->find(candidate.str());
      seconds = it == recorded->end() ? HUGE_VAL : it->second;
    }
    if (options.record)
      options.record->seconds[hash][candidate.str()] = measured->seconds;
    if (i == 0) {
      reference = std::move(measured->outputs);
      result.best = candidate;
      result.bestSeconds = result.defaultSeconds = best = seconds;
    } else if (!sameOutputs(program, reference, measured->outputs)) {
      ++result.wrong; // a fast wrong kernel never wins
    } else if (seconds < best) {
      result.best = candidate;
      result.bestSeconds = best = seconds;
    }
    if (options.progress)
      options.progress(static_cast<int>(i + 1), result.candidates, result.bestSeconds,
                       result.defaultSeconds);
  }
  return result;
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

void kiln::tuneUntunedKernels(Session &session, func::FuncOp func,
                              const std::function<bool(DeviceAttr)> &tunes) {
  if (session.options.autotune != AutotuneMode::On)
    return;
  rt::Store *store = rt::Store::process();
  if (!store)
    return;
  TuneOptions options;
  options.replay = TimingReplay::fromOptions(session.options);
  SmallVector<KernelOp> kernels;
  func.walk([&](KernelOp kernel) { kernels.push_back(kernel); });
  for (KernelOp kernel : kernels) {
    DeviceAttr placement = placementOf(kernel);
    if (kernel.getConfigAttr() || (tunes && !tunes(placement)))
      continue;
    rt::Device &device = runtimeDeviceOf(placement);
    // The key and candidates compiling will look the record up by.
    std::optional<DeviceLimits> limits;
    std::optional<CpuTargetLanes> lanes;
    std::string fingerprint;
    if (rt::VulkanDevice *vulkan = device.replayDevice()) {
      limits = gpuTargetOf(vulkan->adapter(), session.options).limits;
      fingerprint = deviceFingerprint(vulkan->adapter(), session.options);
    } else {
      lanes.emplace(cpuDeviceLanes(session.options));
      fingerprint = cpuFingerprint(session.options);
    }
    std::string key = tuningKey(kernel, fingerprint);
    if (tunedConfig(*store, kernel, limits ? &*limits : nullptr, key))
      continue;
    TuneResult result = tuneKernel(session, kernel, device, options);
    store->putTuning(key, {result.best.str(), result.bestSeconds, result.defaultSeconds,
                           result.candidates});
    ++session.stats.kernels_tuned;
  }
}
