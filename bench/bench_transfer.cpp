// Copies between two Vulkan devices: the staged path (a download
// from the source into host memory, then an upload to the target: what
// every copy between devices did before) against VulkanDevice::copyToDevice
// (host memory both devices import, overlapped chunks, no host copy), with
// each device's own upload and download for reference. Runtime only, so it
// runs on machines without the compiler (GPU hosts with only a driver).
//
// The first two Vulkan adapters are the two devices; with one adapter, two
// logical devices of it (as KILN_VIRTUAL_DEVICES=2 makes them), which share
// its PCIe link. Bytes per second are of the tensor moved.

#include "kiln/runtime/Vulkan.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace {

struct Pair {
  std::unique_ptr<kiln::rt::VulkanContext> context;
  kiln::rt::VulkanDevice *from = nullptr, *to = nullptr;
  std::string label, error;
};

Pair &pair() {
  static Pair p = [] {
    Pair made;
    for (uint32_t perAdapter : {1u, 2u}) {
      kiln::rt::ContextOptions options;
      options.virtualDevices = perAdapter;
      auto context = kiln::rt::VulkanContext::create(options);
      if (!context.isOk()) {
        made.error = context.status().message();
        return made;
      }
      if ((*context)->numDevices() < 2)
        continue;
      made.context = std::move(*context);
      made.from = *made.context->device(0);
      made.to = *made.context->device(1);
      made.label = made.from->adapterName() + (perAdapter == 1 ? " -> another adapter"
                                                                 : " -> itself (two logical devices)");
      if (!made.from->importsHostMemory() || !made.to->importsHostMemory())
        made.label += ", staged only";
      if (uint32_t group = made.from->adapter().deviceGroupSize; group > 1)
        made.label += ", in a device group of " + std::to_string(group);
      return made;
    }
    made.error = "no Vulkan adapter";
    return made;
  }();
  return p;
}

bool ready(benchmark::State &state, Pair &p) {
  if (p.from)
    return true;
  state.SkipWithError(("needs a Vulkan device: " + p.error).c_str());
  return false;
}

/// A filled buffer on the source, one on the target, and host memory, of
/// `bytes` each.
struct Buffers {
  Buffers(Pair &p, size_t bytes)
      : src(*p.from->allocate(bytes)), dst(*p.to->allocate(bytes)), host(bytes, 1) {
    (void)p.from->upload(*src, host.data(), bytes);
  }
  std::shared_ptr<kiln::rt::Buffer> src, dst;
  std::vector<uint8_t> host;
};

void report(benchmark::State &state, const Pair &p, size_t bytes) {
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.SetLabel(p.label);
}

void BM_CopyStaged(benchmark::State &state) {
  Pair &p = pair();
  if (!ready(state, p))
    return;
  size_t bytes = size_t(state.range(0));
  Buffers b(p, bytes);
  for (auto _ : state) {
    if (!p.from->download(*b.src, b.host.data(), bytes).isOk() ||
        !p.to->upload(*b.dst, b.host.data(), bytes).isOk() || !p.to->flush().isOk()) {
      state.SkipWithError("staged copy failed");
      return;
    }
  }
  report(state, p, bytes);
}

void BM_CopyToDevice(benchmark::State &state) {
  Pair &p = pair();
  if (!ready(state, p))
    return;
  size_t bytes = size_t(state.range(0));
  Buffers b(p, bytes);
  for (auto _ : state) {
    if (kiln::rt::Status s = p.from->copyToDevice(*b.src, *p.to, *b.dst, bytes); !s.isOk()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
  }
  report(state, p, bytes);
}

void BM_Upload(benchmark::State &state) {
  Pair &p = pair();
  if (!ready(state, p))
    return;
  size_t bytes = size_t(state.range(0));
  Buffers b(p, bytes);
  for (auto _ : state)
    if (!p.from->upload(*b.src, b.host.data(), bytes).isOk() || !p.from->flush().isOk()) {
      state.SkipWithError("upload failed");
      return;
    }
  report(state, p, bytes);
}

void BM_Download(benchmark::State &state) {
  Pair &p = pair();
  if (!ready(state, p))
    return;
  size_t bytes = size_t(state.range(0));
  Buffers b(p, bytes);
  for (auto _ : state)
    if (!p.from->download(*b.src, b.host.data(), bytes).isOk()) {
      state.SkipWithError("download failed");
      return;
    }
  report(state, p, bytes);
}

void sizes(benchmark::internal::Benchmark *b) {
  if (std::getenv("KILN_BENCH_SMOKE")) {
    b->Arg(1 << 20);
    return;
  }
  for (int64_t mib : {1, 16, 64, 256, 1024})
    b->Arg(mib << 20);
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_CopyStaged)->Apply(sizes);
BENCHMARK(BM_CopyToDevice)->Apply(sizes);
BENCHMARK(BM_Upload)->Apply(sizes);
BENCHMARK(BM_Download)->Apply(sizes);

} // namespace

BENCHMARK_MAIN();
