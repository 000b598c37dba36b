// This CPU's limits for one thread, the yardsticks of bench/RESULTS.md's
// profile tables: the f32 FMA peak (24 independent vector FMA chains, the
// widest vectors the compiler targets, no loads) and the memory bandwidth
// (reading and copying 256 MB, far past the caches).
//
//   build/bin/kiln-bench-cpu-limits
//
// Built with -O3 -march=native: it measures the machine it is built on.

#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

namespace {
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
typedef float Vec __attribute__((vector_size(kLanes * 4)));

void FmaPeak(benchmark::State &state) {
  Vec acc[24], a, b;
  for (int i = 0; i < 24; ++i)
    for (int l = 0; l < kLanes; ++l)
      acc[i][l] = float(i + l);
  for (int l = 0; l < kLanes; ++l) {
    a[l] = 0.999999f;
    b[l] = 1e-7f;
  }
  const int64_t steps = 1 << 20;
  for (auto _ : state) {
    for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 24
      for (int i = 0; i < 24; ++i)
        acc[i] = acc[i] * a + b;
      __asm__ volatile("" : "+v"(a)); // one multiplier the compiler cannot fold
    }
    benchmark::DoNotOptimize(acc);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(double(steps) * 24 * kLanes * 2 * state.iterations(),
                                                 benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
  state.counters["lanes"] = kLanes;
}
BENCHMARK(FmaPeak)->Unit(benchmark::kMillisecond)->UseRealTime();

constexpr size_t kBytes = size_t(256) << 20;

void ReadBandwidth(benchmark::State &state) {
  std::vector<float> x(kBytes / 4, 1.0f);
  for (auto _ : state) {
    Vec sum[4] = {};
    const Vec *p = reinterpret_cast<const Vec *>(x.data());
    for (size_t i = 0; i + 4 <= x.size() / kLanes; i += 4)
      for (int j = 0; j < 4; ++j)
        sum[j] += p[i + j];
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(int64_t(kBytes) * state.iterations());
}
BENCHMARK(ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();

void CopyBandwidth(benchmark::State &state) {
  std::vector<float> x(kBytes / 4, 1.0f), y(kBytes / 4);
  for (auto _ : state) {
    std::memcpy(y.data(), x.data(), kBytes);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(2 * kBytes) * state.iterations()); // read and written
}
BENCHMARK(CopyBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();
} // namespace

BENCHMARK_MAIN();
