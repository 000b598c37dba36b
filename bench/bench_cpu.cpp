// The CPU device against plain C++ on the same inputs, side by side:
//
//   BM_KilnCpuFused    y = tanh(x * w + b) * 0.5 - x * 0.25, 16M floats, w and
//                      b broadcast along rows: one fused, vectorized,
//                      threaded kernel
//   BM_KilnCpuOpByOp   the same, realized after each of the six ops
//   BM_CppScalarLoop   the same math as a -O3 -march=native loop (std::tanh)
//   BM_AddLoop         c = a + b on every core: the memory-bandwidth limit
//
// GB/s counts the minimal traffic (chain: read x, write y; add: read a and
// b, write c). bench/torch_chain.py prints the same figure for PyTorch.
// KILN_BENCH_SMOKE=1 shrinks the inputs (CI runs each benchmark once).

#include "chain_loops.h"

#include "kiln/kiln.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <thread>
#include <vector>

namespace {
constexpr int64_t kCols = 4096;

int64_t rows() {
  const char *smoke = std::getenv("KILN_BENCH_SMOKE");
  return smoke && *smoke == '1' ? 16 : 4096;
}

struct Inputs {
  kiln::Tensor x, w, b;
  std::vector<float> xs, ws, bs;
  Inputs() {
    x = kiln::Tensor::randn({rows(), kCols}, kiln::Device::cpu());
    w = kiln::Tensor::randn({kCols});
    b = kiln::Tensor::randn({kCols});
    xs = x.to_vector<float>();
    ws = w.to_vector<float>();
    bs = b.to_vector<float>();
  }
};

kiln::Tensor chain(const Inputs &in) {
  return kiln::tanh(in.x * in.w + in.b) * 0.5f - in.x * 0.25f;
}

void report(benchmark::State &state, int64_t bytesPerIteration) {
  state.SetBytesProcessed(state.iterations() * bytesPerIteration);
}

void BM_KilnCpuFused(benchmark::State &state) {
  Inputs in;
  kiln::realize({chain(in)}); // compile outside the timing
  kiln::reset_stats();
  for (auto _ : state)
    kiln::realize({chain(in)});
  report(state, rows() * kCols * 8);
  state.counters["kernels/iter"] =
      double(kiln::stats().kernels_dispatched) / double(state.iterations());
}
BENCHMARK(BM_KilnCpuFused)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_KilnCpuOpByOp(benchmark::State &state) {
  Inputs in;
  auto step = [](kiln::Tensor t) {
    kiln::realize({t});
    return t;
  };
  auto run = [&] {
    kiln::Tensor a = step(in.x * in.w);
    kiln::Tensor t = step(kiln::tanh(step(a + in.b)));
    step(step(t * 0.5f) - step(in.x * 0.25f));
  };
  run();
  kiln::reset_stats();
  for (auto _ : state)
    run();
  report(state, rows() * kCols * 8);
  state.counters["kernels/iter"] =
      double(kiln::stats().kernels_dispatched) / double(state.iterations());
}
BENCHMARK(BM_KilnCpuOpByOp)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CppScalarLoop(benchmark::State &state) {
  Inputs in;
  std::vector<float> y(in.xs.size());
  for (auto _ : state) {
    kiln::bench::chainLoop(in.xs.data(), in.ws.data(), in.bs.data(), y.data(), rows(), kCols);
    benchmark::DoNotOptimize(y.data());
  }
  report(state, rows() * kCols * 8);
}
BENCHMARK(BM_CppScalarLoop)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_AddLoop(benchmark::State &state) {
  int64_t n = rows() * kCols;
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        kiln::bench::addLoop(a.data(), b.data(), c.data(), n * t / threads,
                             n * (t + 1) / threads);
      });
    for (std::thread &thread : pool)
      thread.join();
    benchmark::DoNotOptimize(c.data());
  }
  report(state, n * 12);
  state.counters["threads"] = threads;
}
BENCHMARK(BM_AddLoop)->Unit(benchmark::kMillisecond)->UseRealTime();
} // namespace

BENCHMARK_MAIN();
