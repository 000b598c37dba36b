// One benchmark per kernel kind, on every device (filter with
// --benchmark_filter=cpu etc.):
//
//   softmax/<dev>      row softmax, 4096 x 1024 f32, GB/s (read + write)
//   layer_norm/<dev>   layer norm over rows of 4096 x 1024, GB/s
//   row_sum/<dev>      sum over rows of 4096 x 1024, GB/s (read)
//   matmul<N>/<dev>    N x N x N f32, GFLOP/s (N = 256, 1024)
//   conv_resnet/<dev>  3x3 conv, 64 -> 64 channels, 56 x 56, batch 1 (a
//                      ResNet-18 stage-1 layer), GFLOP/s
//
// bench/torch_kernels.py prints the same rows for PyTorch on the CPU.
// KILN_BENCH_SMOKE=1 shrinks every size (CI runs each benchmark once).

#include "kiln/kiln.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <functional>

namespace {
bool smoke() {
  const char *s = std::getenv("KILN_BENCH_SMOKE");
  return s && *s == '1';
}

/// Times `make()` realized each iteration; inputs are built (and realized)
/// once by the caller.
void run(benchmark::State &state, const std::function<kiln::Tensor()> &make, double work,
         const char *unit) {
  kiln::realize({make()}); // compile outside the timing
  kiln::reset_stats();
  for (auto _ : state)
    kiln::realize({make()});
  state.counters[unit] = benchmark::Counter(work * state.iterations(),
                                            benchmark::Counter::kIsRate);
  state.counters["kernels/iter"] =
      double(kiln::stats().kernels_dispatched) / double(state.iterations());
}

kiln::Tensor data(kiln::Shape shape, const kiln::Device &device) {
  kiln::Tensor t = kiln::Tensor::randn(std::move(shape), device);
  kiln::realize({t});
  return t;
}

void registerAll(const kiln::Device &device) {
  int64_t rows = smoke() ? 64 : 4096, cols = smoke() ? 128 : 1024;
  auto add = [&](std::string name, auto fn) {
    benchmark::RegisterBenchmark((name + "/" + device.name()).c_str(), fn)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  };
  add("softmax", [=](benchmark::State &state) {
    kiln::Tensor x = data({rows, cols}, device);
    run(state, [&] { return kiln::softmax(x, -1); }, rows * cols * 8.0, "bytes/s");
  });
  add("layer_norm", [=](benchmark::State &state) {
    kiln::Tensor x = data({rows, cols}, device), g = data({cols}, device), b = data({cols}, device);
    run(state, [&] { return kiln::layer_norm(x, g, b); }, rows * cols * 8.0, "bytes/s");
  });
  add("row_sum", [=](benchmark::State &state) {
    kiln::Tensor x = data({rows, cols}, device);
    run(state, [&] { return kiln::sum(x, {1}); }, rows * cols * 4.0, "bytes/s");
  });
  for (int64_t n : {int64_t(256), int64_t(1024)}) {
    if (smoke())
      n = 32;
    add("matmul" + std::to_string(n), [=](benchmark::State &state) {
      kiln::Tensor a = data({n, n}, device), b = data({n, n}, device);
      run(state, [&] { return kiln::matmul(a, b); }, 2.0 * n * n * n, "FLOP/s");
    });
    if (smoke())
      break;
  }
  add("conv_resnet", [=](benchmark::State &state) {
    int64_t hw = smoke() ? 8 : 56, c = smoke() ? 8 : 64;
    kiln::Tensor x = data({1, c, hw, hw}, device), w = data({c, c, 3, 3}, device);
    run(state, [&] { return kiln::conv2d(x, w, {1, 1}, {1, 1}); },
        2.0 * c * c * 9 * hw * hw, "FLOP/s");
  });
}
} // namespace

int main(int argc, char **argv) {
  benchmark::Initialize(&argc, argv);
  try {
    for (const kiln::Device &device : kiln::devices()) {
      benchmark::AddCustomContext("kiln_" + device.name(), device.adapter_name());
      registerAll(device);
    }
  } catch (const kiln::Error &error) {
    std::fprintf(stderr, "kiln-bench-kernels: %s\n", error.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
