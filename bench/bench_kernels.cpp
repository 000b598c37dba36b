// One benchmark per kernel kind, on every device (filter with
// --benchmark_filter=cpu etc.):
//
//   chain/<dev>        gelu(tanh(x * w + b) - 0.5) * x, GB/s (x read, y written)
//   softmax/<dev>      row softmax, R x C f32, GB/s (read + write)
//   layer_norm/<dev>   layer norm over rows of R x C, GB/s
//   row_sum/<dev>      sum over rows of R x C, GB/s (read)
//   matmul<N>/<dev>    N x N x N f32, GFLOP/s (N = 1024, 4096)
//   conv_resnet/<dev>  3x3 conv, 64 -> 64 channels, 56 x 56, batch B (a
//                      ResNet-18 stage-1 layer), GFLOP/s
//
// R x C is 4096 x 1024 and B is 1 (bench/torch_kernels.py, PyTorch on the
// CPU, uses the same); KILN_BENCH_SIZES=gpu makes them 4096 x 8192 (128 MiB: what lavapipe
// binds, the dump runs there) and 32
// (bench/torch_kernels_cuda.py). KILN_BENCH_SMOKE=1 shrinks every size (CI
// runs each benchmark once). Each benchmark sets KILN_DUMP_LABEL around its
// first realize, so with KILN_DUMP_SPIRV the dumped kernels carry their name
// and work for kiln-spirv-replay (scripts/gpu-bench.sh).

#include "kiln/kiln.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <functional>

namespace {
bool smoke() {
  const char *s = std::getenv("KILN_BENCH_SMOKE");
  return s && *s == '1';
}

/// The running benchmark's name without the device (its dump label).
std::string currentBenchmark;

/// Times `make()` realized each iteration; inputs are built (and realized)
/// once by the caller.
void run(benchmark::State &state, const std::function<kiln::Tensor()> &make, double work,
         const char *unit) {
  std::string label = currentBenchmark + " " + std::to_string(work) + " " +
                      (std::string(unit) == "FLOP/s" ? "FLOP" : "B");
  setenv("KILN_DUMP_LABEL", label.c_str(), 1);
  kiln::realize({make()}); // compile outside the timing
  unsetenv("KILN_DUMP_LABEL");
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
  const char *sizes = std::getenv("KILN_BENCH_SIZES");
  bool gpuSizes = sizes && std::string(sizes) == "gpu";
  int64_t rows = smoke() ? 64 : 4096;
  int64_t cols = smoke() ? 128 : gpuSizes ? 8192 : 1024;
  int64_t convBatch = smoke() ? 1 : gpuSizes ? 32 : 1;
  auto add = [&](std::string name, auto fn) {
    benchmark::RegisterBenchmark((name + "/" + device.name()).c_str(),
                                 [name, fn](benchmark::State &state) {
                                   currentBenchmark = name;
                                   fn(state);
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  };
  add("chain", [=](benchmark::State &state) {
    kiln::Tensor x = data({rows, cols}, device), w = data({cols}, device), b = data({cols}, device);
    run(state, [&] { return kiln::gelu(kiln::tanh(x * w + b) - 0.5f) * x; }, rows * cols * 8.0,
        "bytes/s");
  });
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
  for (int64_t n : {int64_t(1024), int64_t(4096)}) {
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
    kiln::Tensor x = data({convBatch, c, hw, hw}, device), w = data({c, c, 3, 3}, device);
    run(state, [&] { return kiln::conv2d(x, w, {1, 1}, {1, 1}); },
        2.0 * convBatch * c * c * 9 * hw * hw, "FLOP/s");
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
