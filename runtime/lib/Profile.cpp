//===- Profile.cpp - per-kernel times of a Program ------------------------===//

#include "kiln/runtime/Profile.h"

#include "kiln/runtime/Vulkan.h"

#include <algorithm>
#include <cstdio>
#include <map>

using namespace kiln::rt;

double ProgramProfile::totalNanoseconds() const {
  double total = 0;
  for (const DispatchTime &d : dispatches)
    total += d.nanoseconds;
  return total;
}

namespace {
double median(std::vector<double> &samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

/// A timed replay when the program is all on one Vulkan device that has
/// timestamps; null (no error) when it is not. Poisoned results (a test
/// aid) are left out: the replay times the kernels as a model runs them.
StatusOr<std::unique_ptr<ProgramReplay>>
timedReplay(const Program &program, const std::vector<Device *> &devices,
            const RunOptions &options, const std::vector<std::shared_ptr<Buffer>> &fixed) {
  if (devices.empty())
    return std::unique_ptr<ProgramReplay>();
  VulkanDevice *vulkan = devices[0]->replayDevice();
  if (!vulkan || vulkan->adapter().timestampPeriod <= 0)
    return std::unique_ptr<ProgramReplay>();
  for (Device *device : devices)
    if (device != devices[0])
      return std::unique_ptr<ProgramReplay>();
  RunOptions create;
  create.constants = options.constants;
  create.allocate = options.allocate;
  std::vector<std::shared_ptr<Buffer>> none(program.inputs.size());
  return ProgramReplay::create(program, *vulkan, fixed.empty() ? none : fixed, create,
                               /*timed=*/true);
}
} // namespace

StatusOr<ProgramProfile> kiln::rt::profile(const Program &program,
                                           const std::vector<Device *> &devices,
                                           const std::vector<ProgramInput> &inputs, int runs,
                                           const RunOptions &options, RunResult *last,
                                           const std::vector<std::shared_ptr<Buffer>> &fixed) {
  ProgramProfile out;
  out.runs = std::max(1, runs);
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const ProgramStep &step = program.steps[s];
    if (step.kind == ProgramStep::Kind::dispatch && program.kernels[step.index].elements > 0)
      out.dispatches.push_back({static_cast<uint32_t>(s), step.index, 0});
  }
  std::vector<std::vector<double>> samples(out.dispatches.size());
  auto collect = [&](const std::vector<double> &times) -> Status {
    if (times.size() != samples.size())
      return Status::internal("the profiler timed " + std::to_string(times.size()) +
                              " dispatches of " + std::to_string(samples.size()));
    for (size_t d = 0; d < times.size(); ++d)
      samples[d].push_back(times[d]);
    return Status::ok();
  };

  StatusOr<std::unique_ptr<ProgramReplay>> replay = timedReplay(program, devices, options, fixed);
  if (!replay.isOk())
    return replay.status();
  for (int r = 0; r < out.runs; ++r) {
    std::vector<double> times;
    RunOptions run = options;
    if (*replay) {
      run = RunOptions();
      run.allocate = options.allocate;
    } else {
      run.dispatchNanoseconds = &times;
    }
    StatusOr<RunResult> result = *replay ? (*replay)->run(inputs, run)
                                         : kiln::rt::run(program, devices, inputs, run);
    if (!result.isOk())
      return result.status();
    if (*replay)
      for (const auto &[kernel, ns] : (*replay)->kernelNanoseconds())
        times.push_back(ns);
    if (Status s = collect(times); !s.isOk())
      return s;
    if (last && r + 1 == out.runs)
      *last = std::move(*result);
  }
  out.clock = *replay ? "GPU timestamps" : "host clock, one dispatch at a time";
  for (size_t d = 0; d < samples.size(); ++d)
    out.dispatches[d].nanoseconds = median(samples[d]);
  return out;
}

namespace {
std::string format(const char *pattern, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, pattern, args...);
  return buffer;
}

/// Rate per second of `amount` done in `ns`, in units of 1e9.
double gigaPerSecond(uint64_t amount, double ns) { return ns > 0 ? amount / ns : 0; }

std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += format("\\u%04x", c);
    else
      out += c;
  }
  return out + "\"";
}
} // namespace

std::string kiln::rt::profileTable(const Program &program, const ProgramProfile &profile) {
  double total = profile.totalNanoseconds();
  std::string out = format("kiln profile: %zu kernels, %.1f us in all (median of %d run%s, %s)\n",
                           profile.dispatches.size(), total / 1e3, profile.runs,
                           profile.runs == 1 ? "" : "s", profile.clock.c_str());
  out += format("%10s %6s %9s %8s  %-11s %-20s %s\n", "time us", "%", "GFLOP/s", "GB/s",
                "kind", "kernel", "ops -> result  [source lines]");
  std::map<std::string, double> byKind;
  for (const DispatchTime &d : profile.dispatches) {
    const ProgramKernel &k = program.kernels[d.kernel];
    std::string kind = k.kind.empty() ? "?" : k.kind;
    byKind[kind] += d.nanoseconds;
    out += format("%10.1f %6.1f %9.2f %8.2f  %-11s %-20s ", d.nanoseconds / 1e3,
                  100 * d.nanoseconds / std::max(total, 1.0), gigaPerSecond(k.flops, d.nanoseconds),
                  gigaPerSecond(k.bytes, d.nanoseconds), kind.c_str(), k.name.c_str());
    out += k.summary + (k.sources.empty() ? "" : "  [" + k.sources + "]") + "\n";
  }
  out += "by kind:";
  for (const auto &[kind, ns] : byKind)
    out += format("  %s %.1f us (%.1f%%)", kind.c_str(), ns / 1e3, 100 * ns / std::max(total, 1.0));
  return out + "\n";
}

std::string kiln::rt::chromeTraceEvents(const Program &program, const ProgramProfile &profile,
                                        double startMicroseconds) {
  std::string out;
  // One row per device, named.
  for (size_t i = 0; i < program.devices.size(); ++i)
    out += format("%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%zu,\"args\":{"
                  "\"name\":%s}}",
                  out.empty() ? "" : ",\n", i, jsonString(program.devices[i]).c_str());
  double at = startMicroseconds;
  for (const DispatchTime &d : profile.dispatches) {
    const ProgramKernel &k = program.kernels[d.kernel];
    double us = d.nanoseconds / 1e3;
    out += format("%s{\"name\":%s,\"cat\":%s,\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,"
                  "\"dur\":%.3f,\"args\":{",
                  out.empty() ? "" : ",\n", jsonString(k.summary).c_str(),
                  jsonString(k.kind.empty() ? "?" : k.kind).c_str(),
                  program.steps[d.step].device, at, us);
    out += "\"kernel\":" + jsonString(k.name) + ",\"sources\":" + jsonString(k.sources) +
           format(",\"flops\":%llu,\"bytes\":%llu,\"GFLOP/s\":%.3f,\"GB/s\":%.3f}}",
                  static_cast<unsigned long long>(k.flops),
                  static_cast<unsigned long long>(k.bytes), gigaPerSecond(k.flops, d.nanoseconds),
                  gigaPerSecond(k.bytes, d.nanoseconds));
    at += us;
  }
  return out;
}

std::string kiln::rt::chromeTrace(const Program &program, const ProgramProfile &profile) {
  return "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n" + chromeTraceEvents(program, profile) +
         "\n]}\n";
}
