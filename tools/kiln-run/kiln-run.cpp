//===- kiln-run.cpp - run a .kiln model with the runtime alone ------------===//
//
//   kiln-run model.kiln --device vulkan:0 --input x=x.npy --output y=y.npy
//            [--benchmark N [--micro-batches M]] [--describe] [--stats]
//
// --describe prints the variant that runs on the device (of the file's
// programs for its api, the most specific one it meets) and its steps,
// buffers and kernels' assumptions; without --input it runs nothing.
//
// --device vulkan:0,vulkan:1 runs a model compiled split across two devices
// on them, in the order its steps name them (one device runs it whole).
// --micro-batches M times M runs of the inputs per benchmark round,
// pipelined across the devices (Model::runPipelined).
//
// --stats prints the time from the start of main to the first outputs
// (load, device, pipelines, one run: the start-up a cache shortens) and
// the pipelines created, and found in the driver's cache (docs/tuning.md).
//
// Links kiln_runtime only: no MLIR, no LLVM (a ctest checks the binary's
// symbols), so it runs where the compiler is not installed, such as a
// GPU host with nothing but the Vulkan loader.
//
//===----------------------------------------------------------------------===//

#include "tools/common/Version.h"
#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Registry.h"
#include "kiln/runtime/Vulkan.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <map>
#include <string>

using namespace kiln::rt;

namespace {
const char *kUsage =
    "usage: kiln-run model.kiln [--device cpu:0|vulkan:N[,vulkan:M...]] --input NAME=FILE.npy ...\n"
    "                [--output NAME=FILE.npy ...] [--benchmark N [--micro-batches M]]\n"
    "                [--profile N] [--describe]\n"
    "                [--trace trace.json] [--stats]\n";

int help() {
  std::printf("kiln-run: runs a .kiln file with the Kiln runtime alone (no compiler)\n%s"
              "--describe prints the program (the variant chosen for the device, what each\n"
              "kernel assumes); --benchmark N times N runs; --profile N times each dispatch.\n",
              kUsage);
  return 0;
}

int usage(const char *why) {
  std::fprintf(stderr, "kiln-run: %s\n%s", why, kUsage);
  return 2;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "kiln-run: %s\n", message.c_str());
  return 1;
}

/// "cpu:0" or "vulkan:N" (default: the first Vulkan device, else the CPU).
StatusOr<Device *> deviceNamed(const std::string &name) {
  if (name.empty())
    return &defaultDevice();
  return findDevice(name);
}

/// The signature entry `name` names (the k-th one when unnamed), else
/// list.size().
size_t indexOf(const std::vector<Signature> &list, const std::string &name, size_t k) {
  if (name.empty())
    return k;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name)
      return i;
  return list.size();
}

/// "a, b, c", or "none": what a wrong name is told to pick from.
std::string namesOf(const std::vector<Signature> &list) {
  std::string names;
  for (const Signature &s : list)
    names += (names.empty() ? "" : ", ") + s.name;
  return names.empty() ? "none" : names;
}

std::pair<std::string, std::string> splitNamed(const std::string &arg) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos)
    return {"", arg};
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}
} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (kiln::tools::printedVersion(argv[i], "kiln-run"))
      return 0;
  auto started = std::chrono::steady_clock::now();
  bool printStats = false;
  std::string modelPath, deviceName;
  std::vector<std::pair<std::string, std::string>> inputArgs, outputArgs;
  int benchmark = 0;
  int profile = 0;
  int microBatches = 0;
  std::string tracePath;
  bool describe = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--help" || arg == "-h")
      return help();
    if (arg == "--device") {
      const char *v = value();
      if (!v)
        return usage("--device needs a device name");
      deviceName = v;
    } else if (arg == "--input" || arg == "--output") {
      const char *v = value();
      if (!v)
        return usage((arg + " needs NAME=FILE.npy").c_str());
      (arg == "--input" ? inputArgs : outputArgs).push_back(splitNamed(v));
    } else if (arg == "--benchmark") {
      const char *v = value();
      if (!v || std::atoi(v) < 1)
        return usage("--benchmark needs a number of runs");
      benchmark = std::atoi(v);
    } else if (arg == "--micro-batches") {
      const char *v = value();
      if (!v || std::atoi(v) < 1)
        return usage("--micro-batches needs a number of runs per round");
      microBatches = std::atoi(v);
    } else if (arg == "--profile") {
      const char *v = value();
      if (!v || std::atoi(v) < 1)
        return usage("--profile needs a number of runs");
      profile = std::atoi(v);
    } else if (arg == "--trace") {
      const char *v = value();
      if (!v)
        return usage("--trace needs a file name (trace.json)");
      tracePath = v;
    } else if (arg == "--stats") {
      printStats = true;
    } else if (arg == "--describe") {
      describe = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usage(("unknown option " + arg).c_str());
    } else if (modelPath.empty()) {
      modelPath = arg;
    } else {
      return usage(("a second model file: " + arg).c_str());
    }
  }
  if (modelPath.empty())
    return usage("no model file");
  if (microBatches > 0 && benchmark == 0)
    return usage("--micro-batches sets the batches of each --benchmark round: add --benchmark N");

  StatusOr<Artifact> loaded = loadArtifact(modelPath);
  if (!loaded.isOk())
    return fail(loaded.status().message());
  auto artifact = std::make_shared<const Artifact>(std::move(*loaded));
  // "vulkan:0,vulkan:1": a model split across devices, in its steps' order.
  std::vector<Device *> devices;
  for (size_t at = 0;;) {
    size_t comma = deviceName.find(',', at);
    std::string one = deviceName.substr(at, comma - at);
    if (one.empty() && !deviceName.empty())
      return usage(("--device " + deviceName + " names an empty device: list them as "
                    "vulkan:0,vulkan:1").c_str());
    StatusOr<Device *> named = deviceNamed(one);
    if (!named.isOk())
      return fail(named.status().message());
    devices.push_back(*named);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  Device *device = devices[0];
  StatusOr<std::unique_ptr<Model>> model = Model::create(artifact, devices);
  if (!model.isOk())
    return fail(model.status().message());
  if (describe) {
    // Which of the file's variants runs here, and why the others do not
    // matter: the most specific one this device meets.
    std::printf("variant for %s: %s (the file holds: %s)\n", device->name().c_str(),
                (*model)->program().variant().c_str(), artifact->targets().c_str());
    std::printf("%s", (*model)->program().program->describe().c_str());
    if (inputArgs.empty())
      return 0; // described, nothing to run
  }

  // Inputs by name (or in order when unnamed), each checked against the
  // signature.
  // Output names are checked before anything runs, so a typo costs no run.
  for (size_t k = 0; k < outputArgs.size(); ++k) {
    auto [name, path] = outputArgs[k];
    if (indexOf(artifact->outputs, name, k) >= artifact->outputs.size())
      return fail("the model has no output '" + (name.empty() ? path : name) +
                  "'; its outputs are: " + namesOf(artifact->outputs));
    // So are the paths: a folder, or a folder that is missing or read-only.
    std::error_code error;
    std::filesystem::path file(path), folder = file.parent_path().empty() ? "." : file.parent_path();
    if (std::filesystem::is_directory(file, error))
      return fail(path + ": is a folder; give --output a file name");
    if (!std::filesystem::is_directory(folder, error))
      return fail(path + ": its folder " + folder.string() + " does not exist");
    if (::access(folder.c_str(), W_OK) != 0)
      return fail(path + ": its folder " + folder.string() + " is not writable");
  }
  std::vector<NpyArray> arrays(artifact->inputs.size());
  std::vector<bool> given(artifact->inputs.size(), false);
  for (size_t k = 0; k < inputArgs.size(); ++k) {
    auto [name, path] = inputArgs[k];
    size_t index = indexOf(artifact->inputs, name, k);
    if (index >= artifact->inputs.size()) {
      return fail("the model has no input '" + (name.empty() ? path : name) +
                  "'; its inputs are: " + namesOf(artifact->inputs));
    }
    if (given[index])
      return fail("input '" + artifact->inputs[index].name +
                  "' is given twice: pass each input once");
    StatusOr<NpyArray> array = readNpy(path);
    if (!array.isOk())
      return fail(array.status().message());
    const Signature &sig = artifact->inputs[index];
    if (array->type.shape != sig.type.shape || array->type.element != sig.type.element) {
      std::string hint;
      if (array->type.shape == sig.type.shape) {
        // The same shape in another dtype: say how to convert it.
        switch (sig.type.element) {
        case ElementType::f32: hint = "a.astype(np.float32)"; break;
        case ElementType::f16: hint = "a.astype(np.float16)"; break;
        case ElementType::i32: hint = "a.astype(np.int32)"; break;
        case ElementType::i1: hint = "a.astype(bool)"; break;
        case ElementType::bf16:
          hint = "(a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)";
          break;
        }
        hint = ": save it converted (NumPy: np.save(path, " + hint + "))";
      }
      return fail(path + " holds " + array->type.str() + "; input '" + sig.name + "' is " +
                  sig.type.str() + hint);
    }
    arrays[index] = std::move(*array);
    given[index] = true;
  }
  std::vector<ProgramInput> inputs;
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (!given[i])
      return fail("input '" + artifact->inputs[i].name + "' (" +
                  artifact->inputs[i].type.str() + ") is missing: pass --input " +
                  artifact->inputs[i].name + "=FILE.npy");
    inputs.push_back({nullptr, arrays[i].data.data()});
  }

  StatusOr<RunResult> result = (*model)->run(inputs);
  if (!result.isOk())
    return fail(result.status().message());
  if (printStats) {
    std::vector<uint8_t> first(result->outputs.empty() ? 0 : std::min<size_t>(4, result->outputs[0]->size()));
    if (!first.empty())
      if (Status s = device->download(*result->outputs[0], first.data(), first.size()); !s.isOk())
        return fail(s.message());
    DeviceStats stats = device->stats();
    std::printf("start to first outputs: %.1f ms on %s; pipelines: %llu created, %llu of them "
                "from the driver's cache\n",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                    .count(),
                device->name().c_str(), (unsigned long long)stats.pipelinesCreated,
                (unsigned long long)stats.driverCacheHits);
  }
  if (benchmark > 0) {
    // Inputs resident on the device, as a framework's tensors are: each run
    // is the model alone, outputs waited for.
    std::vector<ProgramInput> resident;
    for (size_t i = 0; i < arrays.size(); ++i) {
      StatusOr<std::shared_ptr<Buffer>> buffer = device->allocate(arrays[i].data.size());
      if (!buffer.isOk())
        return fail(buffer.status().message());
      if (Status s = device->upload(**buffer, arrays[i].data.data(), arrays[i].data.size());
          !s.isOk())
        return fail(s.message());
      resident.push_back({*buffer, nullptr});
    }
    if (Status s = device->flush(); !s.isOk())
      return fail(s.message());
    device->resetStats();
    std::vector<double> times;
    for (int i = 0; i < benchmark; ++i) {
      auto start = std::chrono::steady_clock::now();
      if (microBatches > 0) {
        // The round's batches, pipelined across the devices of a split model.
        StatusOr<std::vector<RunResult>> again = (*model)->runPipelined(
            std::vector<std::vector<ProgramInput>>(size_t(microBatches), resident));
        if (!again.isOk())
          return fail(again.status().message());
      } else if (StatusOr<RunResult> again = (*model)->run(resident); !again.isOk()) {
        return fail(again.status().message());
      }
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    double total = 0;
    for (double t : times)
      total += t;
    std::sort(times.begin(), times.end());
    DeviceStats stats = device->stats();
    std::string on;
    for (Device *d : devices)
      on += (on.empty() ? "" : ",") + d->name();
    if (microBatches > 0)
      std::printf("%d rounds of %d micro-batches on %s%s: median %.4f ms per round, %.4f ms "
                  "per batch, min %.4f ms per round\n",
                  benchmark, microBatches, on.c_str(), (*model)->split() ? ", pipelined" : ", one by one",
                  times[times.size() / 2], times[times.size() / 2] / microBatches,
                  times.front());
    else
      std::printf("%d runs on %s: median %.4f ms, min %.4f ms, mean %.4f ms per run "
                  "(inputs on the device, outputs waited for; %llu submits, %llu dispatches "
                  "in the timed runs)\n",
                  benchmark, on.c_str(), times[times.size() / 2], times.front(),
                  total / benchmark, (unsigned long long)stats.submits,
                  (unsigned long long)stats.dispatches);
  }
  if (!tracePath.empty() && profile == 0)
    profile = 10;
  if (profile > 0) {
    StatusOr<ProgramProfile> times = (*model)->profile(inputs, profile);
    if (!times.isOk())
      return fail(times.status().message());
    const Program *program = nullptr;
    for (const TargetProgram &p : artifact->programs)
      if (p.target == device->api())
        program = p.program.get();
    std::printf("%s", profileTable(*program, *times).c_str());
    if (!tracePath.empty()) {
      std::FILE *file = std::fopen(tracePath.c_str(), "w");
      std::string trace = chromeTrace(*program, *times);
      if (!file || std::fwrite(trace.data(), 1, trace.size(), file) != trace.size() ||
          std::fclose(file) != 0)
        return fail("cannot write the trace to " + tracePath + ": " + std::strerror(errno));
      std::printf("trace written to %s (open it in chrome://tracing or ui.perfetto.dev)\n",
                  tracePath.c_str());
    }
  }
  // Every output file or none.
  std::vector<std::pair<std::string, NpyArray>> files;
  for (size_t k = 0; k < outputArgs.size(); ++k) {
    auto [name, path] = outputArgs[k];
    size_t index = indexOf(artifact->outputs, name, k); // checked before the run
    NpyArray array;
    array.type = artifact->outputs[index].type;
    array.data.resize(array.type.bytes());
    Buffer &buffer = *result->outputs[index];
    if (Status s = buffer.device().download(buffer, array.data.data(), array.data.size());
        !s.isOk())
      return fail(s.message());
    files.push_back({path, std::move(array)});
  }
  if (Status s = writeNpyFiles(files); !s.isOk())
    return fail(s.message());
  if (outputArgs.empty())
    for (size_t i = 0; i < artifact->outputs.size(); ++i)
      std::printf("output %s: %s\n", artifact->outputs[i].name.c_str(),
                  artifact->outputs[i].type.str().c_str());
  return 0;
}
