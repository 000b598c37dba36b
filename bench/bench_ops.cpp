// Benchmarks of the Tensor API on the default device.
//
//   BM_RecordOp        cost of recording one op (no compilation, no work)
//   BM_Chain6Fused     y = gelu(tanh(x*w + b) - 0.5) / (1 + exp(-x)) over 16M
//                      floats, realized once: one fused kernel
//   BM_Chain6OpByOp    the same math realized after every op: six kernels
//
// Both chains report GB/s as the minimal traffic of the whole computation
// (read x, write y: 8 bytes per element), so their ratio is the fusion win.
// KILN_BENCH_SMOKE=1 shrinks the inputs (CI runs each benchmark once).

#include "kiln/kiln.h"

#include <benchmark/benchmark.h>

#include <cstdlib>

namespace {
int64_t elements() {
  const char *smoke = std::getenv("KILN_BENCH_SMOKE");
  return smoke && *smoke == '1' ? (int64_t(1) << 16) : (int64_t(1) << 24);
}

constexpr int64_t kCols = 4096;

void BM_RecordOp(benchmark::State &state) {
  kiln::Tensor x = kiln::Tensor::zeros({1024, kCols});
  kiln::Tensor y = x;
  int64_t n = 0;
  for (auto _ : state) {
    y = y + x;
    // Keep the graph bounded: the recorded chain is dropped, never run.
    if (++n % 4096 == 0)
      y = x;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordOp);

struct ChainInputs {
  kiln::Tensor x, w, b;
  ChainInputs() {
    kiln::Device device = kiln::Device::default_device();
    x = kiln::Tensor::randn({elements() / kCols, kCols}, device);
    w = kiln::Tensor::rand({kCols});
    b = kiln::Tensor::randn({1, kCols});
    kiln::realize({x});
  }
};

void BM_Chain6Fused(benchmark::State &state) {
  ChainInputs in;
  kiln::reset_stats();
  for (auto _ : state) {
    kiln::Tensor y =
        kiln::gelu(kiln::tanh(in.x * in.w + in.b) - 0.5f) / (1.0f + kiln::exp(-in.x));
    kiln::realize({y});
  }
  state.SetBytesProcessed(state.iterations() * elements() * 8);
  state.counters["kernels/iter"] =
      static_cast<double>(kiln::stats().kernels_dispatched) / state.iterations();
}
BENCHMARK(BM_Chain6Fused)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Chain6OpByOp(benchmark::State &state) {
  ChainInputs in;
  kiln::reset_stats();
  auto step = [](kiln::Tensor t) {
    kiln::realize({t});
    return t;
  };
  for (auto _ : state) {
    kiln::Tensor a = step(in.x * in.w);
    kiln::Tensor c = step(kiln::tanh(step(a + in.b)));
    kiln::Tensor d = step(kiln::gelu(step(c - 0.5f)));
    kiln::Tensor e = step(1.0f + step(kiln::exp(step(-in.x))));
    step(d / e);
  }
  state.SetBytesProcessed(state.iterations() * elements() * 8);
  state.counters["kernels/iter"] =
      static_cast<double>(kiln::stats().kernels_dispatched) / state.iterations();
}
BENCHMARK(BM_Chain6OpByOp)->Unit(benchmark::kMillisecond)->UseRealTime();
} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  try {
    kiln::Device device = kiln::Device::default_device();
    benchmark::AddCustomContext("kiln_device", device.name() + " (" + device.adapter_name() + ")");
  } catch (const kiln::Error &error) {
    std::fprintf(stderr, "kiln-bench-ops: %s\n", error.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
