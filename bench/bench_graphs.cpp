// Graph-size and many-shapes behaviour, on every device.
//
//   BM_DeepChain/<dev>/<ops>  a chain of <ops> elementwise ops (a random
//                             mix of four) over [4, n] floats, compiled cold
//                             (a shape no earlier iteration used, no two
//                             kernels alike) and run: us per op must
//                             stay flat as the chain grows (linear time);
//                             counters: kernels per chain, us per op
//   BM_ManyShapes/<dev>       graphs of ever new shapes (a small MLP step),
//                             1000 per iteration (KILN_BENCH_SHAPE_ROUNDS
//                             iterations, default 3): resident memory after
//                             each 1000 (rss_mb), its growth over the last
//                             1000 (growth_mb: flat at steady state), and
//                             the kernel cache's entries and bytes
//   BM_WarmRealize/<dev>      the host cost of realizing a graph again: a
//                             50-op elementwise graph over [4, 64] floats
//                             recorded anew each iteration (new input data,
//                             a new scalar) and realized (not read back): the
//                             recording, the realize and one dispatch. After
//                             the first, the
//                             graph cache reuses its Program (no MLIR).
//                             Counters: graphs compiled, cache hits, kernels
//                             dispatched per realize
//   BM_RecordOps/<trace>      recording alone (no realize): 1000 ops of a
//                             small block (linear, relu, layer_norm) per
//                             iteration, with KILN_TRACE's call-stack
//                             recording off (0) and on (1), side by side:
//                             counter ns_per_op
//
// KILN_BENCH_SMOKE=1 keeps the chains and shape counts small (CI runs each
// benchmark once).

#include "kiln/kiln.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {
bool smoke() {
  const char *text = std::getenv("KILN_BENCH_SMOKE");
  return text && *text == '1';
}

/// Resident set size in MiB (/proc/self/statm).
double residentMiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * 4096.0 / double(1 << 20);
}

/// Rounds of 1000 shapes: KILN_BENCH_SHAPE_ROUNDS, default 3.
int rounds() {
  const char *text = std::getenv("KILN_BENCH_SHAPE_ROUNDS");
  return text && std::atoi(text) > 0 ? std::atoi(text) : 3;
}

int64_t uniqueWidth() {
  static int64_t next = 1;
  return 64 + next++;
}

void BM_DeepChain(benchmark::State &state, kiln::Device device) {
  int64_t ops = smoke() ? std::min<int64_t>(state.range(0), 200) : state.range(0);
  double kernels = 0, seconds = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    kiln::Tensor x = kiln::Tensor::full({4, uniqueWidth()}, 0.5f, device);
    kiln::Tensor y = x;
    // A pseudo-random mix, so no two kernels of the chain are alike and
    // the kernel cache cannot hide the compile time.
    uint32_t seed = 12345;
    for (int64_t i = 0; i < ops; ++i) {
      seed = seed * 1664525u + 1013904223u;
      switch (seed >> 30) {
      case 0: y = y + 0.25f; break;
      case 1: y = y * 0.999f; break;
      case 2: y = kiln::tanh(y); break;
      default: y = kiln::abs(y); break;
      }
    }
    kiln::reset_stats();
    kiln::realize({y});
    kernels = double(kiln::stats().kernels_dispatched);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  state.counters["ops"] = double(ops);
  state.counters["kernels"] = kernels;
  state.counters["us_per_op"] = seconds * 1e6 / double(ops * state.iterations());
}

void BM_ManyShapes(benchmark::State &state, kiln::Device device) {
  int shapes = smoke() ? 20 : 1000;
  double before = residentMiB(), last = before, growth = 0;
  for (auto _ : state) {
    for (int i = 0; i < shapes; ++i) {
      int64_t n = uniqueWidth();
      kiln::Tensor x = kiln::Tensor::full({8, n}, 0.01f, device);
      kiln::Tensor w = kiln::Tensor::full({n, 16}, 0.02f);
      kiln::Tensor y = kiln::softmax(kiln::relu(kiln::matmul(x, w) + 1.0f), -1);
      benchmark::DoNotOptimize(kiln::sum(y).item<float>());
    }
    double now = residentMiB();
    growth = now - last;
    last = now;
  }
  kiln::Stats stats = kiln::stats();
  state.counters["rss_mb"] = last;
  state.counters["growth_mb"] = growth;
  state.counters["first_mb"] = last - before - growth * (state.iterations() - 1);
  state.counters["cache_entries"] = double(stats.kernel_cache_entries);
  state.counters["cache_mb"] = double(stats.kernel_cache_bytes) / double(1 << 20);
  state.counters["evictions"] = double(stats.kernel_cache_evictions);
}

void BM_WarmRealize(benchmark::State &state, kiln::Device device) {
  std::vector<float> data(256, 0.5f);
  auto step = [&](float scale) {
    kiln::Tensor x = kiln::Tensor::from(data, {4, 64}, device);
    kiln::Tensor y = x;
    for (int i = 0; i < 50; ++i)
      y = (i % 2) ? kiln::tanh(y) : y * scale;
    kiln::realize({y});
    return y;
  };
  benchmark::DoNotOptimize(step(0.5f)); // compiles
  kiln::reset_stats();
  float scale = 0.25f;
  for (auto _ : state)
    benchmark::DoNotOptimize(step(scale += 1e-3f));
  kiln::Stats stats = kiln::stats();
  double n = double(state.iterations());
  state.counters["compiled"] = double(stats.graphs_compiled);
  state.counters["cache_hits"] = double(stats.graph_cache_hits) / n;
  state.counters["dispatches"] = double(stats.kernels_dispatched) / n;
}

/// Four calls deep below the benchmark, as a model's layers would be.
__attribute__((noinline)) kiln::Tensor block(const kiln::Tensor &x, const kiln::Tensor &w,
                                             const kiln::Tensor &b) {
  return kiln::layer_norm(kiln::relu(kiln::linear(x, w, b)), b, b);
}

void BM_RecordOps(benchmark::State &state) {
  kiln::set_trace(state.range(0) != 0);
  kiln::Tensor x = kiln::Tensor::full({4, 8}, 0.5f);
  kiln::Tensor w = kiln::Tensor::full({8, 8}, 0.1f), b = kiln::Tensor::zeros({8});
  // linear (3 nodes) + relu + layer_norm (10): 14 recorded nodes per block.
  constexpr int kBlocks = 1000 / 14 + 1, kNodesPerBlock = 14;
  double seconds = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    kiln::Tensor y = x;
    for (int i = 0; i < kBlocks; ++i)
      y = block(y, w, b);
    benchmark::DoNotOptimize(y);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  kiln::set_trace(false);
  state.counters["ns_per_op"] =
      seconds * 1e9 / (double(kBlocks * kNodesPerBlock) * double(state.iterations()));
}

void registerAll() {
  benchmark::RegisterBenchmark("BM_RecordOps", BM_RecordOps)->Arg(0)->Arg(1)
      ->Unit(benchmark::kMicrosecond);
  for (const kiln::Device &device : kiln::devices()) {
    std::string name = device.name();
    for (int64_t ops : {1000, 2000, 4000, 10000, 100000})
      benchmark::RegisterBenchmark(("BM_DeepChain/" + name).c_str(), BM_DeepChain, device)
          ->Arg(ops)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1);
    benchmark::RegisterBenchmark(("BM_WarmRealize/" + name).c_str(), BM_WarmRealize, device)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_ManyShapes/" + name).c_str(), BM_ManyShapes, device)
        ->Unit(benchmark::kSecond)
        ->Iterations(smoke() ? 1 : rounds());
  }
}
} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
