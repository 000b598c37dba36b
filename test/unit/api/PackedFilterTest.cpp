// What a program compiled ahead of time for the CPU fixes at compile time.
// Each convolution filter that is a weight is stored packed for the direct
// form ([Cout / block][C][tap][block]), so no inference repacks it; a 7 x 7
// plane, whose filters the JIT's GEMM form reads in place, then takes the
// direct form too. The results match a float64 reference, from memory and
// from the file, on every target of one file (the Vulkan program keeps the
// filter as written). And its scalar constants are literals in the kernels.

#include "ReferenceOps.h"
#include "TestUtil.h"

#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unistd.h>

using namespace kiln;
using kiln::test::occurrences;

namespace {

std::vector<double> reference(const Tensor &x, const Tensor &w, const Tensor &bias,
                              int64_t stride, int64_t padding = 1) {
  kiln::test::RefOps ops;
  kiln::test::Ref y =
      ops.conv2d(kiln::test::refOf(x), kiln::test::refOf(w), stride, padding, 1);
  std::vector<float> b = bias.to_vector<float>();
  size_t plane = y.size() / size_t(y.dims[0] * y.dims[1]);
  for (size_t i = 0; i < y.size(); ++i)
    y.v[i] = std::max(y.v[i] + b[(i / plane) % b.size()], 0.0);
  return y.v;
}

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/kiln-packed-" + std::to_string(::getpid()) +
         "-" + name;
}

TEST(PackedFilters, CpuProgramsReadWeightFiltersPackedOnce) {
  Device cpu = Device::cpu();
  manual_seed(11);
  // 14 x 14 (rows in blocks of 7), 7 x 7 (the direct form only when packed),
  // stride 2 into 7 x 7, and a filter shared by two convolutions (stored as
  // written: each use would want its own packing).
  Tensor x14 = Tensor::randn({1, 48, 14, 14}, cpu), x7 = Tensor::randn({2, 64, 7, 7}, cpu);
  // (Weights are the tensors the graph starts from: `randn(...) * 0.2f`
  // would be computed by the program, as `wc * 1.0f` below is.)
  Tensor w14 = Tensor::randn({32, 48, 3, 3}, cpu), b14 = Tensor::randn({32}, cpu);
  Tensor w7 = Tensor::randn({64, 64, 3, 3}, cpu), b7 = Tensor::randn({64}, cpu);
  Tensor ws = Tensor::randn({32, 48, 3, 3}, cpu), bs = Tensor::randn({32}, cpu);
  Tensor wc = Tensor::randn({32, 48, 3, 3}, cpu);
  // A 1x1 expansion on 7 x 7 (the direct form only when packed).
  Tensor we = Tensor::randn({192, 64, 1, 1}, cpu), be = Tensor::randn({192}, cpu);
  auto expand = [&](const Tensor &x) {
    return relu(conv2d(x, we, {1, 1}, {0, 0}) + be.reshape({192, 1, 1}));
  };
  auto block = [](const Tensor &x, const Tensor &w, const Tensor &b, int64_t s) {
    return relu(conv2d(x, w, {s, s}, {1, 1}) + b.reshape({b.shape()[0], 1, 1}));
  };
  std::vector<std::string> targets = {"cpu"};
  for (const Device &d : kiln::test::availableDevices())
    if (d.api() == "vulkan") {
      targets.push_back("vulkan");
      break;
    }
  Program program = compile({block(x14, w14, b14, 1), block(x7, w7, b7, 1),
                             block(x14, wc * 1.0f, b14, 2), block(x14, ws, bs, 1),
                             block(x14, ws, bs, 2), expand(x7)},
                            {x14, x7}, {targets, {"x14", "x7"}});
  std::string described = program.describe("cpu");
  // Three filters packed: w14, w7 and we (wc * 1.0 is computed by the
  // program, and ws has two uses).
  EXPECT_EQ(occurrences(described, "(packed by "), 3u) << described;
  EXPECT_NE(described.find("model input 'x14'"), std::string::npos) << described;

  std::string path = tempPath("convs.kiln");
  program.save(path);
  for (const std::string &target : targets) {
    SCOPED_TRACE(target);
    Device device = target == "cpu" ? cpu : Device::vulkan(0);
    Program loaded = load(path, device);
    Tensor y14 = Tensor::randn({1, 48, 14, 14}, device), y7 = Tensor::randn({2, 64, 7, 7}, device);
    std::vector<Tensor> out = loaded.run({y14, y7});
    ASSERT_EQ(out.size(), 6u);
    EXPECT_TRUE(kiln::test::allClose(out[0].to_vector(), reference(y14, w14, b14, 1), 1e-4, 1e-4));
    EXPECT_TRUE(kiln::test::allClose(out[1].to_vector(), reference(y7, w7, b7, 1), 1e-4, 1e-4));
    EXPECT_TRUE(kiln::test::allClose(out[2].to_vector(), reference(y14, wc, b14, 2), 1e-4, 1e-4));
    EXPECT_TRUE(kiln::test::allClose(out[3].to_vector(), reference(y14, ws, bs, 1), 1e-4, 1e-4));
    EXPECT_TRUE(kiln::test::allClose(out[4].to_vector(), reference(y14, ws, bs, 2), 1e-4, 1e-4));
    EXPECT_TRUE(kiln::test::allClose(out[5].to_vector(), reference(y7, we, be, 1, 0), 1e-4, 1e-4));
    if (target == "cpu") {
      // The 14 x 14 convolution takes the direct form in the JIT too, with
      // the same order of adds: the same bits.
      EXPECT_EQ(out[0].to_vector(), block(y14, w14, b14, 1).to_vector());
      // The program in memory and the file agree.
      std::vector<Tensor> again = program.run({y14, y7});
      for (size_t i = 0; i < out.size(); ++i)
        EXPECT_EQ(again[i].to_vector(), out[i].to_vector()) << "output " << i;
    }
  }
  std::remove(path.c_str());
}

// SqueezeNet's classifier: a 1x1 convolution of a fire module's
// concatenated output to 1000 classes, whose 2 MB filter takes the direct
// form packed (its GEMM form would stream it unprefetched). 1000 and 1016
// are no whole number of 48-channel blocks (AVX-512): the last holds 40
// (two whole vectors and a masked one) or 8 (a masked one); with AVX2 both
// are whole blocks of 8. Small
// integers, so every sum is exact: a channel read from the wrong part or
// block shows.
TEST(PackedFilters, ConcatenatedInputsAndANarrowerLastBlock) {
  Device cpu = Device::cpu();
  auto integers = [&](Shape shape, int seed) {
    std::vector<float> v(size_t(shape[0] * shape[1] * shape[2] * shape[3]));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = float(int((i * 7 + size_t(seed) * 13 + i / 97) % 5) - 2);
    return Tensor::from(v, shape, cpu);
  };
  Tensor a = integers({1, 256, 13, 13}, 1), b = integers({1, 256, 13, 13}, 2);
  Tensor w1000 = integers({1000, 512, 1, 1}, 3), bias = integers({1000, 1, 1, 1}, 4);
  Tensor w1016 = integers({1016, 512, 1, 1}, 5);
  auto model = [&](const Tensor &x, const Tensor &y) {
    Tensor cat = concat({relu(x), y}, 1);
    return std::vector<Tensor>{relu(conv2d(cat, w1000, {1, 1}, {0, 0}) + bias.reshape({1000, 1, 1})),
                               conv2d(cat, w1016, {1, 1}, {0, 0})};
  };
  Program program = compile(model(a, b), {a, b}, {{"cpu"}, {"a", "b"}});
  std::string described = program.describe("cpu");
  EXPECT_EQ(occurrences(described, "(packed by "), 2u) << described;

  Tensor x = integers({1, 256, 13, 13}, 6), y = integers({1, 256, 13, 13}, 7);
  std::vector<Tensor> out = program.run({x, y});
  ASSERT_EQ(out.size(), 2u);
  Tensor cat = concat({relu(x), y}, 1);
  std::vector<double> want1000 = reference(cat, w1000, bias.reshape({1000}), 1, 0);
  kiln::test::RefOps ops;
  std::vector<double> want1016 =
      ops.conv2d(kiln::test::refOf(cat), kiln::test::refOf(w1016), 1, 0, 1).v;
  std::vector<float> got1000 = out[0].to_vector(), got1016 = out[1].to_vector();
  ASSERT_EQ(got1000.size(), want1000.size());
  ASSERT_EQ(got1016.size(), want1016.size());
  for (size_t i = 0; i < want1000.size(); ++i)
    ASSERT_EQ(double(got1000[i]), want1000[i]) << "class " << i / 169 << " pixel " << i % 169;
  for (size_t i = 0; i < want1016.size(); ++i)
    ASSERT_EQ(double(got1016[i]), want1016[i]) << "channel " << i / 169 << " pixel " << i % 169;
  // The JIT (GEMM form, filters as written) agrees.
  EXPECT_EQ(model(x, y)[0].to_vector(), got1000);
}

} // namespace

namespace {

// A CPU program's scalar constants are literals in its kernels (no
// constant steps): ReLU6's bounds cost no NaN check per vector. The
// results keep IEEE maximum / minimum exactly: NaN stays NaN, +0 above -0,
// bit for bit the JIT's (whose scalars stay kernel operands).
TEST(ScalarLiterals, CpuProgramsFoldTheirScalarsAndKeepIeeeMinMax) {
  Device cpu = Device::cpu();
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {nan, -0.0f, 0.0f, -1.0f, 3.0f, 6.0f, 7.0f, inf, -inf, 5.999f};
  Tensor x = Tensor::from(values, {10}, cpu);
  auto model = [](const Tensor &t) {
    return std::vector<Tensor>{clamp(t, 0.0f, 6.0f), minimum(t, Tensor::scalar(-0.0f)),
                               maximum(t * 2.0f, Tensor::scalar(-6.0f))};
  };
  Program program = compile(model(x), {x}, {{"cpu"}});
  std::string described = program.describe("cpu");
  EXPECT_EQ(described.find("= constant"), std::string::npos) << described;
  Tensor y = Tensor::from(values, {10}, cpu);
  std::vector<Tensor> aot = program.run({y});
  std::vector<Tensor> jit = model(y);
  for (size_t i = 0; i < aot.size(); ++i) {
    std::vector<float> a = aot[i].to_vector(), j = jit[i].to_vector();
    ASSERT_EQ(a.size(), j.size());
    EXPECT_EQ(std::memcmp(a.data(), j.data(), a.size() * sizeof(float)), 0) << "output " << i;
  }
  std::vector<float> relu6 = aot[0].to_vector(), negZero = aot[1].to_vector();
  EXPECT_TRUE(std::isnan(relu6[0]));
  EXPECT_FALSE(std::signbit(relu6[1])) << "max(-0, +0) is +0";
  EXPECT_EQ(relu6[6], 6.0f);
  EXPECT_EQ(relu6[8], 0.0f);
  EXPECT_TRUE(std::signbit(negZero[2])) << "min(+0, -0) is -0";
  EXPECT_TRUE(std::isnan(negZero[0]));
}

} // namespace

namespace {

/// [m, k] x B with B[k, n] = b(k, n), in float64, plus a bias, then ReLU.
std::vector<double> productReference(const std::vector<float> &x, int64_t m, int64_t k,
                                     int64_t n, const std::function<double(int64_t, int64_t)> &b,
                                     const std::vector<float> &bias) {
  std::vector<double> y(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias[j];
      for (int64_t p = 0; p < k; ++p)
        acc += double(x[i * k + p]) * b(p, j);
      y[i * n + j] = std::max(acc, 0.0);
    }
  return y;
}

// A matmul whose right operand is a weight is stored as the GEMM form's
// panels ([N / panel][K][panel]), so no inference packs it: a plain [K, N]
// weight (k sliced: 1536), a linear layer's W read through a transpose,
// and N not a whole number of panels of 64 (kept as written), a weight
// shared by two products (kept as written), a single row (the matrix-vector
// form reads W in place). Bit for bit the JIT's results (the same order of
// adds), and a float64 reference, from memory and from the file.
TEST(PackedMatrices, CpuProgramsReadWeightMatricesAsPanels) {
  Device cpu = Device::cpu();
  manual_seed(13);
  Tensor x = Tensor::randn({40, 1536}, cpu), h = Tensor::randn({33, 256}, cpu);
  Tensor b = Tensor::randn({1536, 256}, cpu), bb = Tensor::randn({256}, cpu);
  Tensor w = Tensor::randn({384, 256}, cpu), wb = Tensor::randn({384}, cpu);
  Tensor r = Tensor::randn({256, 100}, cpu), rb = Tensor::randn({100}, cpu);
  Tensor s = Tensor::randn({256, 128}, cpu), sb = Tensor::randn({128}, cpu);
  Tensor v = Tensor::randn({384, 256}, cpu), row = Tensor::randn({1, 256}, cpu);
  auto model = [&](const Tensor &xi, const Tensor &hi, const Tensor &rowi) {
    return std::vector<Tensor>{relu(matmul(xi, b) + bb), relu(linear(hi, w, wb)),
                               relu(matmul(hi, r) + rb), relu(matmul(hi, s) + sb),
                               relu(matmul(hi * 2.0f, s) + sb), relu(linear(rowi, v, wb))};
  };
  Program program = compile(model(x, h, row), {x, h, row}, {{"cpu"}, {"x", "h", "row"}});
  std::string described = program.describe("cpu");
  // b and w are packed; r (100 columns), s (two uses) and v (a single row)
  // are not.
  EXPECT_EQ(occurrences(described, "(packed in panels of "), 2u) << described;

  std::string path = tempPath("matrices.kiln");
  program.save(path);
  Program loaded = load(path, cpu);
  Tensor xi = Tensor::randn({40, 1536}, cpu), hi = Tensor::randn({33, 256}, cpu),
         rowi = Tensor::randn({1, 256}, cpu);
  std::vector<Tensor> out = loaded.run({xi, hi, rowi});
  ASSERT_EQ(out.size(), 6u);
  std::vector<float> bv = b.to_vector(), wv = w.to_vector(), vv = v.to_vector(), rv = r.to_vector(),
                     sv = s.to_vector(), xv = xi.to_vector(), hv = hi.to_vector();
  std::vector<float> h2(hv.size());
  for (size_t i = 0; i < hv.size(); ++i)
    h2[i] = 2.0f * hv[i];
  auto plain = [](const std::vector<float> &m, int64_t n) {
    return [&m, n](int64_t p, int64_t j) { return double(m[p * n + j]); };
  };
  auto transposed = [&](int64_t p, int64_t j) { return double(wv[j * 256 + p]); };
  using kiln::test::allClose;
  EXPECT_TRUE(allClose(out[0].to_vector(),
                       productReference(xv, 40, 1536, 256, plain(bv, 256), bb.to_vector()), 1e-4,
                       1e-4));
  EXPECT_TRUE(allClose(out[1].to_vector(),
                       productReference(hv, 33, 256, 384, transposed, wb.to_vector()), 1e-4, 1e-4));
  EXPECT_TRUE(allClose(out[2].to_vector(),
                       productReference(hv, 33, 256, 100, plain(rv, 100), rb.to_vector()), 1e-4,
                       1e-4));
  EXPECT_TRUE(allClose(out[3].to_vector(),
                       productReference(hv, 33, 256, 128, plain(sv, 128), sb.to_vector()), 1e-4,
                       1e-4));
  EXPECT_TRUE(allClose(out[4].to_vector(),
                       productReference(h2, 33, 256, 128, plain(sv, 128), sb.to_vector()), 1e-4,
                       1e-4));
  EXPECT_TRUE(allClose(out[5].to_vector(),
                       productReference(rowi.to_vector(), 1, 256, 384,
                                        [&](int64_t p, int64_t j) { return double(vv[j * 256 + p]); },
                                        wb.to_vector()),
                       1e-4, 1e-4));
  // The JIT packs per inference, in the same order of adds.
  std::vector<Tensor> jit = model(xi, hi, rowi);
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i].to_vector(), jit[i].to_vector()) << "output " << i;
  std::vector<Tensor> again = program.run({xi, hi, rowi});
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(again[i].to_vector(), out[i].to_vector()) << "output " << i;
  std::remove(path.c_str());
}

} // namespace
