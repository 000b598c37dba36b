// Cold start against warm start, a fresh process each: the
// transformer encoder block of aot_blocks.cpp through the JIT
// (kiln-bench-startup-child) and as a .kiln through kiln-run. Cold: an
// empty cache directory (Kiln's store and Mesa's shader cache both live in
// it); warm: the directory the previous run filled. The time is the whole
// process, from exec to exit; `compiled` and `loaded` are the kernels the
// last process compiled and read from the store.
//
//   build/bin/kiln-bench-startup [--benchmark_filter=...]

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {
std::string binDir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

std::string cacheRoot() {
  static std::string root = (std::filesystem::temp_directory_path() /
                             ("kiln-bench-startup-" + std::to_string(::getpid())))
                                .string();
  return root;
}

/// "vulkan:0" as "vulkan0", for folder names.
std::string safeName(std::string device) {
  device.erase(std::remove(device.begin(), device.end(), ':'), device.end());
  return device;
}

/// Runs `command` with the cache in `dir`; its stdout, and the seconds it took.
std::string runIn(const std::string &dir, const std::string &command, double &seconds) {
  std::string full = "KILN_CACHE_DIR=" + dir + " MESA_SHADER_CACHE_DIR=" + dir +
                     "/mesa XDG_CACHE_HOME=" + dir + "/xdg " + command + " 2>&1";
  // Mesa disables its shader cache when the folder's parent is missing.
  std::filesystem::create_directories(dir + "/mesa");
  auto start = std::chrono::steady_clock::now();
  FILE *pipe = popen(full.c_str(), "r");
  std::string out;
  char buffer[1024];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe))
    out.append(buffer, n);
  int status = pclose(pipe);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status != 0)
    out = "FAILED: " + out;
  return out;
}

/// The number after `name` in the child's output; 0 when absent.
unsigned long counter(const std::string &out, const std::string &name) {
  size_t at = out.find(name);
  if (at == std::string::npos)
    return 0;
  try {
    return std::stoul(out.substr(at + name.size()));
  } catch (const std::exception &) {
    return 0;
  }
}

void report(benchmark::State &state, const std::string &out) {
  if (out.rfind("FAILED", 0) == 0)
    state.SkipWithError(out.c_str());
  state.counters["compiled"] = double(counter(out, "compiled "));
  state.counters["loaded"] = double(counter(out, "loaded "));
  // kiln-run --stats: "pipelines: N created, M of them from the driver's cache".
  state.counters["pipelines"] = double(counter(out, "pipelines: "));
  size_t at = out.find(" created, ");
  state.counters["from_driver_cache"] =
      at == std::string::npos ? 0 : double(counter(out.substr(at), " created, "));
}

void BM_JitStart(benchmark::State &state, const char *device, bool warm) {
  std::string dir = cacheRoot() + "/jit-" + safeName(device) + (warm ? "-warm" : "-cold");
  std::string command = binDir() + "/kiln-bench-startup-child " + device;
  double seconds = 0;
  std::filesystem::remove_all(dir);
  if (warm)
    runIn(dir, command, seconds);
  std::string out;
  for (auto _ : state) {
    if (!warm)
      std::filesystem::remove_all(dir);
    out = runIn(dir, command, seconds);
    state.SetIterationTime(seconds);
  }
  report(state, out);
}

void BM_KilnRunStart(benchmark::State &state, const char *device, bool warm) {
  std::string api = std::string(device).substr(0, std::string(device).find(':'));
  std::string model = cacheRoot() + "/transformer-" + api + ".kiln";
  double seconds = 0;
  if (!std::filesystem::exists(model))
    runIn(cacheRoot() + "/compile", binDir() + "/kiln-bench-startup-child " + device + " " + model,
          seconds);
  std::string dir = cacheRoot() + "/run-" + safeName(device) + (warm ? "-warm" : "-cold");
  std::string command = binDir() + "/kiln-run " + model + " --device " + device + " --input " +
                        model + ".npy --stats";
  std::filesystem::remove_all(dir);
  if (warm)
    runIn(dir, command, seconds);
  std::string out;
  for (auto _ : state) {
    if (!warm)
      std::filesystem::remove_all(dir);
    out = runIn(dir, command, seconds);
    state.SetIterationTime(seconds);
  }
  report(state, out);
}

void registerAll() {
  for (const char *device : {"vulkan:0", "cpu:0"})
    for (bool warm : {false, true}) {
      std::string which = std::string(device) + (warm ? "/warm" : "/cold");
      benchmark::RegisterBenchmark(("BM_JitStart/" + which).c_str(), BM_JitStart, device, warm)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(3);
      benchmark::RegisterBenchmark(("BM_KilnRunStart/" + which).c_str(), BM_KilnRunStart, device,
                                   warm)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(3);
    }
}
} // namespace

int main(int argc, char **argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::filesystem::remove_all(cacheRoot());
  return 0;
}
