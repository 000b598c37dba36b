// Benchmarks of the Tensor API, on every device of the machine.
//
//   BM_RecordOp              cost of recording one op (no compilation, no work)
//   BM_Chain6Fused/<dev>     y = gelu(tanh(x*w + b) - 0.5) * x over 16M floats
//                            (six ops, two broadcasts), realized once: one kernel
//   BM_Chain6OpByOp/<dev>    the same math realized after every op
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
  explicit ChainInputs(const kiln::Device &device) {
    x = kiln::Tensor::randn({elements() / kCols, kCols}, device);
    w = kiln::Tensor::rand({kCols});
    b = kiln::Tensor::randn({1, kCols});
    kiln::realize({x});
  }
};

void BM_Chain6Fused(benchmark::State &state, kiln::Device device) {
  ChainInputs in(device);
  kiln::reset_stats();
  for (auto _ : state) {
    kiln::Tensor y = kiln::gelu(kiln::tanh(in.x * in.w + in.b) - 0.5f) * in.x;
    kiln::realize({y});
  }
  state.SetBytesProcessed(state.iterations() * elements() * 8);
  state.counters["kernels/iter"] =
      static_cast<double>(kiln::stats().kernels_dispatched) / state.iterations();
}

void BM_Chain6OpByOp(benchmark::State &state, kiln::Device device) {
  ChainInputs in(device);
  kiln::reset_stats();
  auto step = [](kiln::Tensor t) {
    kiln::realize({t});
    return t;
  };
  for (auto _ : state) {
    kiln::Tensor a = step(in.x * in.w);
    kiln::Tensor c = step(kiln::tanh(step(a + in.b)));
    kiln::Tensor d = step(kiln::gelu(step(c - 0.5f)));
    step(d * in.x);
  }
  state.SetBytesProcessed(state.iterations() * elements() * 8);
  state.counters["kernels/iter"] =
      static_cast<double>(kiln::stats().kernels_dispatched) / state.iterations();
}
} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  try {
    for (const kiln::Device &device : kiln::devices()) {
      benchmark::AddCustomContext("kiln_" + device.name(), device.adapter_name());
      for (auto [name, fn] : {std::pair{"BM_Chain6Fused/", &BM_Chain6Fused},
                              std::pair{"BM_Chain6OpByOp/", &BM_Chain6OpByOp}})
        benchmark::RegisterBenchmark((name + device.name()).c_str(), fn, device)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
  } catch (const kiln::Error &error) {
    std::fprintf(stderr, "kiln-bench-ops: %s\n", error.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
