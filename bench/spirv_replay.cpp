// Replays kernels that Kiln compiled elsewhere (KILN_DUMP_SPIRV=<dir>) on a
// Vulkan device, with the runtime alone: no MLIR or LLVM, so it runs on
// machines that only have a Vulkan driver (a GPU host without the compiler).
//
//   kiln-spirv-replay [--device N] [--runs N] [--positive] [--statistics]
//                     [--internals DIR] <dir>/<hash>.kernel...
//
// Inputs are filled from a fixed-seed generator (normal, or its absolute
// value with --positive: a batch norm's variance input then gives no NaN); per kernel it prints the
// time per dispatch (median of batches), GB/s over all bindings (each read or
// written once by an elementwise kernel) and a checksum of the outputs, so
// two machines can be compared. --statistics prints what the driver says of
// each pipeline (registers, shared memory: PipelineStatistics.h) first;
// --internals DIR also writes the driver's internal representations of each
// (its compiled code, where it gives them) to DIR/<manifest>.internals.txt.

#include "HalfBits.h"
#include "kiln/runtime/PipelineStatistics.h"
#include "kiln/runtime/Vulkan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {
struct Manifest {
  std::string spirvPath, entry;
  uint32_t groups[3] = {1, 1, 1};
  std::vector<uint64_t> bindings;
  // Bindings the kernel writes (kiln-tune --emit-candidates lists them);
  // none listed: the last one.
  std::vector<size_t> outputs;
  // f16 bindings (filled with halves).
  std::vector<size_t> halves;
  // From KILN_DUMP_LABEL: a name and the work (bytes, FLOP) of one dispatch.
  std::string label, unit;
  double work = 0;
};

bool readManifest(const std::string &path, Manifest &m) {
  std::ifstream in(path);
  std::string line, dir = path.substr(0, path.find_last_of('/') + 1);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "spirv") {
      fields >> m.spirvPath;
      m.spirvPath = dir + m.spirvPath;
    } else if (key == "entry") {
      fields >> m.entry;
    } else if (key == "groups") {
      fields >> m.groups[0] >> m.groups[1] >> m.groups[2];
    } else if (key == "label") {
      fields >> m.label >> m.work >> m.unit;
    } else if (key == "outputs") {
      for (size_t b; fields >> b;)
        m.outputs.push_back(b);
    } else if (key == "halves") {
      for (size_t b; fields >> b;)
        m.halves.push_back(b);
    } else if (key == "bindings") {
      for (uint64_t b; fields >> b;)
        m.bindings.push_back(b);
    }
  }
  return !m.entry.empty() && !m.bindings.empty();
}

int fail(const std::string &what) {
  std::fprintf(stderr, "kiln-spirv-replay: %s\n", what.c_str());
  return 1;
}
} // namespace

int main(int argc, char **argv) {
  size_t deviceIndex = SIZE_MAX;
  int runs = 50;
  bool positive = false;
  std::string internalsDir;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc)
      deviceIndex = std::stoul(argv[++i]);
    else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--positive"))
      positive = true;
    else if (!std::strcmp(argv[i], "--statistics"))
      setenv(kiln::rt::kPipelineStatisticsEnv, "1", 1); // read when the device is created
    else if (!std::strcmp(argv[i], "--internals") && i + 1 < argc) {
      setenv(kiln::rt::kPipelineStatisticsEnv, kiln::rt::kPipelineInternalsValue, 1);
      internalsDir = argv[++i];
    }
    else
      files.push_back(argv[i]);
  }
  auto context = kiln::rt::VulkanContext::get();
  if (!context.isOk())
    return fail(context.status().message());
  if (deviceIndex == SIZE_MAX)
    deviceIndex = (*context)->preferredOrdinal();
  auto device = (*context)->device(deviceIndex);
  if (!device.isOk())
    return fail(device.status().message());
  kiln::rt::VulkanDevice &gpu = **device;
  std::printf("device %s: %s\n", gpu.name().c_str(), gpu.adapterName().c_str());
  if (const kiln::rt::AdapterInfo &a = gpu.adapter(); a.workgroupMatrixInvocations)
    std::printf("device workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2): "
                "%u invocations, granularity %u x %u x %u, dimensions up to %u, %u bytes of "
                "shared memory reserved%s\n",
                a.workgroupMatrixInvocations, a.workgroupMatrixGranularity[0],
                a.workgroupMatrixGranularity[1], a.workgroupMatrixGranularity[2],
                a.workgroupMatrixMaxDimension, a.workgroupMatrixReservedShared,
                a.workgroupMatrixTensorAddressing ? ", tensor addressing" : "");

  for (const std::string &file : files) {
    Manifest m;
    if (!readManifest(file, m))
      return fail("cannot read manifest " + file);
    std::ifstream spv(m.spirvPath, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(spv)), {});
    std::vector<uint32_t> words(bytes.size() / 4);
    std::memcpy(words.data(), bytes.data(), words.size() * 4);

    // Inputs: every binding but the last (elementwise kernels write last).
    std::vector<std::shared_ptr<kiln::rt::Buffer>> buffers;
    std::vector<kiln::rt::Buffer *> bindings;
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    uint64_t traffic = 0;
    for (size_t i = 0; i < m.bindings.size(); ++i) {
      auto buffer = gpu.allocate(m.bindings[i]);
      if (!buffer.isOk())
        return fail(buffer.status().message());
      // Bytes, filled as floats where they fit (bool bindings are not a
      // multiple of 4 bytes), or as halves for the f16 bindings listed.
      std::vector<uint8_t> data(m.bindings[i]);
      bool half = std::find(m.halves.begin(), m.halves.end(), i) != m.halves.end();
      for (size_t k = 0; k + (half ? 2 : 4) <= data.size(); k += half ? 2 : 4) {
        float v = normal(rng);
        if (positive)
          v = std::fabs(v);
        if (half) {
          uint16_t h = toHalf(v);
          std::memcpy(&data[k], &h, 2);
        } else {
          std::memcpy(&data[k], &v, 4);
        }
      }
      if (auto status = gpu.upload(**buffer, data.data(), m.bindings[i]); !status.isOk())
        return fail(status.message());
      buffers.push_back(*buffer);
      bindings.push_back(buffer->get());
      traffic += m.bindings[i];
    }
    kiln::rt::KernelBinary binary;
    binary.hash = std::hash<std::string>()(m.spirvPath);
    binary.spirv = &words;
    binary.entryPoint = m.entry;
    binary.numBindings = static_cast<uint32_t>(m.bindings.size());
    auto pipeline = gpu.pipeline(binary);
    if (!pipeline.isOk())
      return fail(pipeline.status().message());
    if (std::string stats = kiln::rt::pipelineStatistics(**pipeline); !stats.empty())
      std::printf("statistics of %s: %s", file.c_str(), stats.c_str());
    if (std::string code = kiln::rt::pipelineInternals(**pipeline); !internalsDir.empty()) {
      std::string base = file.substr(file.find_last_of('/') + 1);
      std::string out = internalsDir + "/" + base + ".internals.txt";
      std::ofstream(out) << code;
      std::printf("internal representations of %s: %zu bytes in %s\n", file.c_str(), code.size(),
                  out.c_str());
    }

    auto batch = [&](int n) {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i)
        if (auto s = gpu.dispatch(*pipeline, bindings, m.groups[0], m.groups[1], m.groups[2]);
            !s.isOk())
          return -1.0;
      if (!gpu.flush().isOk())
        return -1.0;
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / n;
    };
    // Warm-up: the pipeline's first use, and the clocks, which drop while
    // the next candidate compiles (three dispatches were too few: later
    // candidates then timed at idle clocks).
    for (auto start = std::chrono::steady_clock::now();
         std::chrono::steady_clock::now() - start < std::chrono::milliseconds(30);)
      if (batch(runs) < 0)
        return fail("dispatch failed");
    std::vector<double> times;
    for (int i = 0; i < 7; ++i)
      times.push_back(batch(runs));
    std::sort(times.begin(), times.end());
    double t = times[times.size() / 2];
    if (t <= 0)
      return fail("dispatch failed");

    // Elementwise kernels write their last binding (the manifest lists
    // bindings in kernel order: inputs, then outputs).
    if (m.outputs.empty())
      m.outputs.push_back(m.bindings.size() - 1);
    double sum = 0, sumAbs = 0;
    for (size_t b : m.outputs) {
      if (b >= buffers.size())
        return fail("output binding " + std::to_string(b) + " out of range in " + file);
      std::vector<float> out;
      if (std::find(m.halves.begin(), m.halves.end(), b) != m.halves.end()) {
        std::vector<uint16_t> bits(m.bindings[b] / 2);
        if (auto s = gpu.download(*buffers[b], bits.data(), bits.size() * 2); !s.isOk())
          return fail(s.message());
        for (uint16_t h : bits)
          out.push_back(fromHalf(h));
      } else {
        out.resize(m.bindings[b] / 4);
        if (auto s = gpu.download(*buffers[b], out.data(), out.size() * 4); !s.isOk())
          return fail(s.message());
      }
      for (float v : out) {
        sum += v;
        sumAbs += std::abs(v);
      }
    }
    if (!m.label.empty() && m.work > 0)
      std::printf("kernel %s %.4f ms %.2f G%s/s (output sum %.6e)\n", m.label.c_str(), t * 1e3,
                  m.work / t / 1e9, m.unit.c_str(), sum);
    else
      std::printf("%s: %.4f ms per dispatch, %.1f GB/s over %.1f MB; output sum %.6e, "
                  "sum|.| %.6e\n",
                  file.c_str(), t * 1e3, traffic / t / 1e9, traffic / 1e6, sum, sumAbs);
  }
  return 0;
}
