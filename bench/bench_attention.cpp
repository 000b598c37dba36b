// scaled_dot_product_attention on the CPU: the fused kernel (an online
// softmax over blocks of keys, no L x S scores) against the same attention
// written as two matmuls and a softmax (three kernels, the scores written
// and read back), side by side:
//
//   BM_AttentionFused/bh/n/e        scaled_dot_product_attention(q, k, v)
//   BM_AttentionDecomposed/bh/n/e   softmax(q k^T * scale) v
//   (+ /1 as a fourth argument: causal)
//
// bh = batch x heads, n = L = S, e = E = Ev. GFLOP/s counts 4 bh n^2 e
// (halved when causal). bench/torch_attention.py prints PyTorch's
// F.scaled_dot_product_attention for the same shapes. KILN_BENCH_SMOKE=1
// shrinks the inputs (CI runs each benchmark once).

#include "kiln/kiln.h"

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>

namespace {
bool smoke() {
  const char *s = std::getenv("KILN_BENCH_SMOKE");
  return s && *s == '1';
}

template <bool Fused> void BM_Attention(benchmark::State &state) {
  int64_t bh = state.range(0), n = state.range(1), e = state.range(2);
  bool causal = state.range(3) != 0;
  if (smoke())
    n = std::min<int64_t>(n, 32);
  kiln::Device cpu = kiln::Device::cpu();
  kiln::Tensor q = kiln::Tensor::randn({bh, n, e}, cpu), k = kiln::Tensor::randn({bh, n, e}, cpu),
               v = kiln::Tensor::randn({bh, n, e}, cpu);
  kiln::realize({q, k, v});
  auto attend = [&] {
    if (Fused)
      return kiln::scaled_dot_product_attention(q, k, v, kiln::Tensor(), causal);
    kiln::Tensor scores =
        kiln::matmul(q, k.transpose(1, 2)) * float(1.0 / std::sqrt(double(e)));
    if (causal) {
      std::vector<float> index;
      for (int64_t i = 0; i < n; ++i)
        index.push_back(float(i));
      kiln::Tensor r = kiln::Tensor::from(index, {n, 1}, cpu);
      kiln::Tensor c = kiln::Tensor::from(index, {1, n}, cpu);
      scores = kiln::where(kiln::le(c, r), scores,
                           kiln::Tensor::full({}, -INFINITY, cpu));
    }
    return kiln::matmul(kiln::softmax(scores, -1), v);
  };
  kiln::realize({attend()}); // compile
  for (auto _ : state) {
    kiln::Tensor y = attend();
    kiln::realize({y});
    benchmark::DoNotOptimize(y);
  }
  double flops = 4.0 * double(bh) * double(n) * double(n) * double(e) * (causal ? 0.5 : 1.0);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

void shapes(benchmark::internal::Benchmark *b) {
  b->Args({12, 128, 64, 0})   // BERT-base, sequence 128
      ->Args({12, 512, 64, 0}) // sequence 512
      ->Args({4, 2048, 64, 1}) // a long causal sequence
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}
BENCHMARK_TEMPLATE(BM_Attention, true)->Name("BM_AttentionFused")->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Attention, false)->Name("BM_AttentionDecomposed")->Apply(shapes);
} // namespace

BENCHMARK_MAIN();
