// Matrix products on every device: exact on small integers, close to
// float64 on random inputs, batch broadcasting, transposed operands as
// views, and the elementwise epilogue fused into the same kernel.

#include "TestUtil.h"
#include "kiln/Codegen/KernelConfig.h"
#include "kiln/Compiler/Target.h"

#include <random>

using namespace kiln;
using kiln::test::allClose;

namespace {
class MatmulOnEveryDevice : public kiln::test::OnEveryDevice {};

std::vector<float> smallIntegers(size_t n, std::mt19937 &rng) {
  std::uniform_int_distribution<int> dist(-4, 4);
  std::vector<float> v(n);
  for (float &x : v)
    x = float(dist(rng));
  return v;
}

/// [batch?, m, k] x [k, n] reference in double.
std::vector<double> reference(const std::vector<float> &a, const std::vector<float> &b,
                              int64_t batch, int64_t m, int64_t k, int64_t n, bool bBatched) {
  std::vector<double> c(batch * m * n, 0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(a[(t * m + i) * k + p]) * b[((bBatched ? t : 0) * k + p) * n + j];
        c[(t * m + i) * n + j] = acc;
      }
  return c;
}

TEST_P(MatmulOnEveryDevice, ExactOnSmallIntegers) {
  std::mt19937 rng(7);
  // Past one tile in every dimension, partial edge tiles, k beyond one
  // staged slice: the tiled GPU form's edges.
  for (auto [m, k, n] : {std::tuple{1, 1, 1}, {7, 13, 5}, {13, 1, 7}, {33, 64, 17},
                         {100, 70, 130}, {1, 300, 1}, {129, 17, 65},
                         // N a multiple of 4: B read as 16-byte vectors on GPUs
                         {36, 20, 44}, {70, 33, 132}, {5, 64, 256},
                         // long k: split over work items where the device
                         // has many compute units (api.SmallestGemmTiles),
                         // 13 and 33 slices of 16 over 2 and 8 groups
                         {40, 200, 36}, {48, 520, 64},
                         // k past 1024: the CPU's GEMM form in slices of 512
                         // (four and a ragged one; three with a last panel
                         // past N), rows split in two per panel
                         {37, 2100, 130}, {20, 1536, 520}}) {
    std::vector<float> as = smallIntegers(m * k, rng), bs = smallIntegers(k * n, rng);
    Tensor a = Tensor::from(as, {m, k}, *device), b = Tensor::from(bs, {k, n});
    std::vector<float> got = matmul(a, b).to_vector<float>();
    std::vector<double> want = reference(as, bs, 1, m, k, n, false);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << m << "x" << k << "x" << n << " at " << i;
  }
}

// A linear layer at batch 1 (the CPU's matrix-vector form over the weight's
// rows: k in whole vectors and a tail, outputs in groups of 4 and a
// remainder), with a bias and ReLU, exact on small integers.
TEST_P(MatmulOnEveryDevice, LinearAtBatchOne) {
  std::mt19937 rng(9);
  for (auto [k, n] : {std::pair{7, 5}, {37, 1}, {300, 6}, {1280, 1000}, {64, 16}}) {
    std::vector<float> xs = smallIntegers(k, rng), ws = smallIntegers(n * k, rng),
                       bs = smallIntegers(n, rng);
    Tensor y = relu(linear(Tensor::from(xs, {1, k}, *device), Tensor::from(ws, {n, k}, *device),
                           Tensor::from(bs, {n}, *device)));
    std::vector<float> got = y.to_vector<float>();
    ASSERT_EQ(got.size(), size_t(n));
    for (int j = 0; j < n; ++j) {
      double want = bs[j];
      for (int q = 0; q < k; ++q)
        want += double(xs[q]) * ws[j * k + q];
      ASSERT_EQ(got[j], std::max(want, 0.0)) << k << "x" << n << " at " << j;
    }
  }
}

// A batch sharing its B is one GEMM of all the batch's rows (B packed
// once): [L, 1, E] x [E, F] as the ONNX export of attention projects, a
// two-dimensional batch, and a transposed A whose rows do not follow each
// other (kept batched), each with a bias, exact on small integers.
TEST_P(MatmulOnEveryDevice, SharedRightOperandAcrossTheBatch) {
  std::mt19937 rng(5);
  struct Case {
    Shape a;
    int64_t k, n;
    bool transposeA;
  };
  for (const Case &c : {Case{{37, 1, 24}, 24, 40, false}, Case{{3, 4, 5, 16}, 16, 12, false},
                        Case{{4, 16, 6}, 16, 20, true}}) {
    int64_t batch = 1;
    for (size_t d = 0; d + 2 < c.a.size(); ++d)
      batch *= c.a[d];
    int64_t m = c.transposeA ? c.a.back() : c.a[c.a.size() - 2];
    std::vector<float> as = smallIntegers(batch * m * c.k, rng);
    std::vector<float> bs = smallIntegers(c.k * c.n, rng), bias = smallIntegers(c.n, rng);
    Tensor a = Tensor::from(as, c.a, *device);
    if (c.transposeA)
      a = a.transpose(-1, -2);
    Tensor y = matmul(a, Tensor::from(bs, {c.k, c.n}, *device)) +
               Tensor::from(bias, {c.n}, *device);
    std::vector<float> got = y.to_vector<float>();
    ASSERT_EQ(got.size(), size_t(batch * m * c.n));
    for (int64_t p = 0; p < batch; ++p)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double want = bias[j];
          for (int64_t q = 0; q < c.k; ++q) {
            int64_t at = c.transposeA ? (p * c.k + q) * m + i : (p * m + i) * c.k + q;
            want += double(as[at]) * bs[q * c.n + j];
          }
          ASSERT_EQ(got[(p * m + i) * c.n + j], want) << "batch " << p << " row " << i;
        }
  }
}

TEST_P(MatmulOnEveryDevice, BatchedWithBroadcastAndTransposedOperand) {
  Tensor a = Tensor::randn({3, 9, 31}, *device);
  Tensor bt = Tensor::randn({11, 31}); // used transposed: [31, 11]
  Tensor c = matmul(a, bt.transpose(0, 1));
  EXPECT_EQ(c.shape(), (Shape{3, 9, 11}));
  std::vector<float> bs = bt.to_vector<float>(), b(31 * 11);
  for (int p = 0; p < 31; ++p)
    for (int j = 0; j < 11; ++j)
      b[p * 11 + j] = bs[j * 31 + p];
  EXPECT_TRUE(allClose(c.to_vector<float>(),
                       reference(a.to_vector<float>(), b, 3, 9, 31, 11, false), 1e-4, 1e-5));
}

// A batched B that is a plain input (its 16-byte-vector form on GPUs),
// next to a broadcast one.
TEST_P(MatmulOnEveryDevice, BatchedPlainOperandsExact) {
  std::mt19937 rng(11);
  std::vector<float> as = smallIntegers(2 * 9 * 24, rng), bs = smallIntegers(2 * 24 * 16, rng);
  Tensor a = Tensor::from(as, {2, 9, 24}, *device), b = Tensor::from(bs, {2, 24, 16});
  std::vector<float> got = matmul(a, b).to_vector<float>();
  std::vector<double> want = reference(as, bs, 2, 9, 24, 16, true);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "batched, at " << i;
  std::vector<float> shared(bs.begin(), bs.begin() + 24 * 16);
  got = matmul(a, Tensor::from(shared, {24, 16})).to_vector<float>();
  want = reference(as, shared, 2, 9, 24, 16, false);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "broadcast, at " << i;
}

TEST_P(MatmulOnEveryDevice, LinearWithActivationIsOneKernel) {
  Tensor x = Tensor::randn({16, 40}, *device);
  Tensor w = Tensor::randn({24, 40}) * 0.2f;
  Tensor bias = Tensor::randn({24});
  Tensor residual = Tensor::randn({16, 24});
  realize({w}); // weights are data, as in a model (w * 0.2 is its own kernel)
  Tensor y = gelu(linear(x, w, bias)) + residual;
  reset_stats();
  std::vector<float> got = y.to_vector<float>();
  EXPECT_EQ(stats().kernels_dispatched, 1u) << "matmul + bias + gelu + residual";
  std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>(),
                     bs = bias.to_vector<float>(), rs = residual.to_vector<float>();
  std::vector<double> want;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 24; ++j) {
      double acc = bs[j];
      for (int p = 0; p < 40; ++p)
        acc += double(xs[i * 40 + p]) * ws[j * 40 + p];
      want.push_back(0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0))) + rs[i * 24 + j]);
    }
  EXPECT_TRUE(allClose(got, want, 1e-4, 1e-5));
}

// f16 operands, f32 accumulation: small integers stay exact
// through f16 products and sums below 2048, on every device, whichever form
// runs them (cooperative matrices where the GPU has them, the tiled form,
// the CPU in f32); a linear layer with GELU within the f16 tolerance.
TEST_P(MatmulOnEveryDevice, HalfPrecisionExactOnSmallIntegers) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> dist(-2, 2);
  auto ints = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = float(dist(rng));
    return v;
  };
  // Ragged (k not a multiple of 8: element by element), aligned (16-byte
  // groups), and B through a transpose.
  for (auto [m, k, n] : {std::tuple{100, 70, 130}, {64, 96, 128}, {33, 16, 40}}) {
    std::vector<float> as = ints(m * k), bs = ints(k * n), cs = ints(n);
    Tensor a = Tensor::from(as, {m, k}, *device).to(DType::f16);
    Tensor b = Tensor::from(bs, {k, n}, *device).to(DType::f16);
    Tensor c = Tensor::from(cs, {n}, *device).to(DType::f16);
    realize({a, b, c});
    Tensor y = relu(matmul(a, b) + c);
    EXPECT_EQ(y.dtype(), DType::f16);
    std::vector<float> got = y.to(DType::f32).to_vector<float>();
    std::vector<double> want = reference(as, bs, 1, m, k, n, false);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], std::max(0.0, want[i] + cs[i % n])) << m << "x" << k << "x" << n << " at " << i;
  }
  std::normal_distribution<float> normal(0.0f, 0.1f);
  auto randoms = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = float(_Float16(normal(rng))); // representable in f16
    return v;
  };
  const int64_t T = 48, D = 96, F = 160;
  std::vector<float> xs = randoms(T * D), ws = randoms(F * D), bs = randoms(F);
  Tensor x = Tensor::from(xs, {T, D}, *device).to(DType::f16);
  Tensor w = Tensor::from(ws, {F, D}, *device).to(DType::f16);
  Tensor bias = Tensor::from(bs, {F}, *device).to(DType::f16);
  realize({x, w, bias});
  std::vector<float> got = gelu(linear(x, w, bias)).to(DType::f32).to_vector<float>();
  std::vector<double> want;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < F; ++j) {
      double acc = bs[j];
      for (int64_t p = 0; p < D; ++p)
        acc += double(xs[i * D + p]) * ws[j * D + p];
      want.push_back(0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0))));
    }
  EXPECT_TRUE(allClose(got, want, 1e-2, 1e-3)); // the f16 row of the tolerance table
}

KILN_ON_EVERY_DEVICE(MatmulOnEveryDevice);

TEST(Matmul, ShapeErrors) {
  EXPECT_THROW(matmul(Tensor::zeros({4}), Tensor::zeros({3, 2})), Error);
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}), Tensor::zeros({2})), Error);
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 2})), Error);
  EXPECT_THROW(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 2})), Error);
  EXPECT_EQ(matmul(Tensor::zeros({5, 1, 2, 3}), Tensor::zeros({4, 3, 6})).shape(),
            (Shape{5, 4, 2, 6}));
}
} // namespace

// K = 0: zeros, as in PyTorch (and a bias on top still applies).
TEST_P(MatmulOnEveryDevice, AnEmptyInnerDimensionGivesZeros) {
  Tensor a = Tensor::rand({4, 0}, *device), b = Tensor::rand({0, 5}, *device);
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{4, 5}));
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(20, 0.0f));
  Tensor w = Tensor::rand({3, 0}, *device), bias = Tensor::full({3}, 2.0f, *device);
  EXPECT_EQ(linear(Tensor::rand({2, 0}, *device), w, bias).to_vector<float>(),
            std::vector<float>(6, 2.0f));
}

// Rank-1 operands as in PyTorch's matmul: a dot product, vector x matrix,
// matrix x vector, and a vector against a batch.
TEST_P(MatmulOnEveryDevice, VectorOperandsAsInPyTorch) {
  Tensor v = Tensor::from({1, 2, 3}, {3}, *device);
  Tensor m = Tensor::from({1, 0, 2, -1, 0, 3}, {3, 2}, *device);
  Tensor dot = matmul(v, Tensor::from({4, 5, 6}, {3}, *device));
  EXPECT_EQ(dot.shape(), Shape{});
  EXPECT_EQ(dot.item<float>(), 32.0f);
  Tensor vm = matmul(v, m);
  EXPECT_EQ(vm.shape(), Shape{2});
  EXPECT_EQ(vm.to_vector<float>(), (std::vector<float>{5, 7}));
  Tensor mv = matmul(m.transpose(0, 1), v);
  EXPECT_EQ(mv.shape(), Shape{2});
  EXPECT_EQ(mv.to_vector<float>(), (std::vector<float>{5, 7}));
  Tensor batch = Tensor::from({1, 0, 2, -1, 0, 3, 1, 1, 1, 1, 1, 1}, {2, 3, 2}, *device);
  Tensor vb = matmul(v, batch);
  EXPECT_EQ(vb.shape(), (Shape{2, 2}));
  EXPECT_EQ(vb.to_vector<float>(), (std::vector<float>{5, 7, 6, 6}));
  Tensor bv = matmul(batch.transpose(1, 2), v);
  EXPECT_EQ(bv.shape(), (Shape{2, 2}));
  EXPECT_EQ(bv.to_vector<float>(), (std::vector<float>{5, 7, 6, 6}));
  try {
    matmul(v, Tensor::from({1, 2}, {2}, *device));
    ADD_FAILURE() << "[3] x [2]";
  } catch (const Error &e) { // the shapes as written, not as reshaped
    EXPECT_NE(std::string(e.what()).find("[3] x [2]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(matmul(Tensor::scalar(2.0f), v), Error);
}

// linear without a bias is x @ w^T, as F.linear(x, w).
TEST_P(MatmulOnEveryDevice, LinearWithoutBias) {
  std::vector<float> xs = {1, 2, 3, 4, 5, 6}, ws = {1, 0, -1, 2, 1, 0};
  Tensor y = linear(Tensor::from(xs, {2, 3}, *device), Tensor::from(ws, {2, 3}, *device));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-2, 4, -2, 13}));
}

namespace {
kiln::DeviceLimits hopperLimits() {
  const kiln::TargetProfile *hopper =
      kiln::findTargetProfile(kiln::TargetApi::vulkan, "nvidia-hopper");
  std::string error;
  return (*kiln::describeTarget(kiln::TargetApi::vulkan, hopper->gpu, "", error)).limits;
}

/// Where the device reports its compute units, GEMM tiles shrink until each
/// unit has two workgroups (the H200, 132 SMs: a 128x512 result took 61 us
/// as 8 workgroups of 64x128); unknown units keep the large tiles.
TEST(MatmulConfigChoice, ShrinksTilesUntilEveryComputeUnitHasWork) {
  // The Hopper profile's limits, its compute units unknown at first.
  kiln::DeviceLimits h200 = hopperLimits();
  h200.computeUnits = 0;
  kiln::MatmulConfig big = kiln::MatmulConfig::defaultFor(h200, 4096, 4096, 4096);
  EXPECT_EQ(big.tileM, 64);
  EXPECT_EQ(big.tileN, 128);
  kiln::MatmulConfig unknown = kiln::MatmulConfig::defaultFor(h200, 128, 512, 512);
  EXPECT_EQ(unknown.tileM * unknown.tileN, 64 * 128);
  h200.computeUnits = 132;
  EXPECT_EQ(kiln::MatmulConfig::defaultFor(h200, 4096, 4096, 4096).tileN, 128);
  kiln::MatmulConfig small = kiln::MatmulConfig::defaultFor(h200, 128, 512, 512);
  EXPECT_TRUE(small.check(h200).empty());
  EXPECT_EQ(small.tileM, 16);
  EXPECT_EQ(small.tileN, 32);
  kiln::MatmulConfig conv = kiln::MatmulConfig::defaultFor(h200, 64, 3136, 576);
  EXPECT_GE(((64 + conv.tileM - 1) / conv.tileM) * ((3136 + conv.tileN - 1) / conv.tileN), 264);
}

/// Still short of warps after the smallest tiles (128 workgroups of one
/// warp on 132 SMs), k is split over groups of work items: eight warps per
/// SM at most, four k slices per group at least, within the device's
/// shared memory; a grid that fills the GPU is not split.
TEST(MatmulConfigChoice, SplitsKWhereTheGridLeavesTheGpuShortOfWarps) {
  // The Hopper profile's limits, its compute units unknown at first.
  kiln::DeviceLimits h200 = hopperLimits();
  h200.computeUnits = 0;
  EXPECT_EQ(kiln::MatmulConfig::defaultFor(h200, 128, 512, 512).splitK, 1) << "units unknown";
  h200.computeUnits = 132;
  EXPECT_EQ(kiln::MatmulConfig::defaultFor(h200, 4096, 4096, 4096).splitK, 1);
  EXPECT_EQ(kiln::MatmulConfig::defaultFor(h200, 128, 512, 512).splitK, 8);
  EXPECT_EQ(kiln::MatmulConfig::defaultFor(h200, 128, 512, 256).splitK, 4) << "16 k slices";
  EXPECT_EQ(kiln::MatmulConfig::defaultFor(h200, 64, 3136, 576).splitK, 4);
  // The ResNet convolution at batch 32: 32 x 25 workgroups of 64 x 128
  // already fill the GPU.
  kiln::MatmulConfig batched = kiln::MatmulConfig::defaultFor(h200, 64, 3136, 576, 32);
  EXPECT_EQ(batched.tileM * batched.tileN, 64 * 128);
  EXPECT_EQ(batched.splitK, 1);
  kiln::MatmulConfig mlpDown = kiln::MatmulConfig::defaultFor(h200, 128, 512, 2048);
  EXPECT_EQ(mlpDown.splitK, 8) << "16 groups would need 80 KiB of shared memory";
  EXPECT_TRUE(mlpDown.check(h200).empty());
  EXPECT_LE(mlpDown.sharedBytes(), h200.sharedMemoryBytes);
  kiln::MatmulConfig tooMany = mlpDown;
  tooMany.splitK = 64;
  EXPECT_NE(tooMany.check(h200), "");
}
} // namespace

namespace {
// CPU configs default to the vector width of the ISA compiled for, not the
// host's: an x86-64-v3 program built on an AVX-512 machine takes 8-lane
// blocks that fit AVX2's 16 registers (16-lane ones were split in two and
// spilled: the exported encoder ran 24 ms there against 9.8).
TEST(MatmulConfigChoice, CpuDefaultsFollowTheIsaCompiledFor) {
  const int host = cpuDefaultLanes();
  EXPECT_TRUE(host == 8 || host == 16);
  {
    CpuTargetLanes avx2(8);
    EXPECT_EQ(cpuDefaultLanes(), 8);
    CpuMatmulConfig gemm = CpuMatmulConfig::defaultForHost();
    CpuDirectConvConfig direct = CpuDirectConvConfig::defaultForHost();
    EXPECT_EQ(gemm.lanes, 8);
    EXPECT_EQ(direct.lanes, 8);
    // Accumulators, B's vectors and a broadcast within 16 registers.
    EXPECT_LE(gemm.rows * gemm.vectors + gemm.vectors + 1, 16);
    EXPECT_LE(direct.pixels * direct.vectors + direct.vectors + 1, 16);
    {
      CpuTargetLanes avx512(16);
      EXPECT_EQ(CpuMatmulConfig::defaultForHost().lanes, 16);
    }
    EXPECT_EQ(cpuDefaultLanes(), 8);
  }
  EXPECT_EQ(cpuDefaultLanes(), host);

  // A program for x86-64-v3 runs here (an x86-64 host has AVX2 at least in
  // CI) and computes the same products.
  Device cpu = Device::cpu();
  Tensor x = Tensor::randn({37, 300}, cpu), w = Tensor::randn({300, 130}, cpu);
  CompileOptions options;
  options.targets = {"cpu"};
  options.cpu_isa = "x86-64-v3";
  Program program = compile({matmul(x, w)}, {x}, options);
  std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>();
  EXPECT_TRUE(allClose(program.run({x})[0].to_vector<float>(),
                       reference(xs, ws, 1, 37, 300, 130, false), 1e-4, 1e-4));
}
} // namespace
