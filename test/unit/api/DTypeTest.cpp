// Casts between f32, f16, i32 and bool, and f16 math, on every device.

#include "TestUtil.h"

#include <cmath>
#include <cstring>

using namespace kiln;
using kiln::test::allClose;

namespace {
class DTypeOnEveryDevice : public kiln::test::OnEveryDevice {};

TEST_P(DTypeOnEveryDevice, CastsFollowTheirRules) {
  std::vector<float> xs = {-2.75f, -1.0f, -0.5f, 0.0f, 0.25f, 1.5f, 3.99f, 65504.0f, 1e-6f};
  Tensor x = Tensor::from(xs, {9}, *device);
  // f32 -> i32 truncates toward zero.
  Tensor i = x.to(DType::i32);
  EXPECT_EQ(i.dtype(), DType::i32);
  std::vector<int32_t> ints = i.to_vector<int32_t>();
  for (size_t k = 0; k < xs.size(); ++k)
    EXPECT_EQ(ints[k], int32_t(std::trunc(xs[k]))) << xs[k];
  // -> bool is "not zero"; bool -> f32 is 0 or 1.
  std::vector<float> flags = x.to(DType::boolean).to(DType::f32).to_vector<float>();
  for (size_t k = 0; k < xs.size(); ++k)
    EXPECT_EQ(flags[k], xs[k] != 0 ? 1.0f : 0.0f);
  // f16 round trip: within half precision (2^-11 relative), 1e-6 underflows
  // to a half subnormal.
  std::vector<float> halves = x.to(DType::f16).to_vector<float>();
  for (size_t k = 0; k < xs.size(); ++k)
    EXPECT_NEAR(halves[k], xs[k], std::abs(xs[k]) * 4.9e-4 + 6e-8) << xs[k];
  std::vector<float> back = x.to(DType::f16).to(DType::i32).to(DType::f32).to_vector<float>();
  EXPECT_EQ(back[0], -2.0f);
}

TEST_P(DTypeOnEveryDevice, HalfPrecisionMathWithinTolerance) {
  Tensor x = Tensor::randn({33, 65}, *device);
  std::vector<float> xs = x.to_vector<float>();
  Tensor h = x.to(DType::f16);
  Tensor y = kiln::tanh(h * h.slice(1, 0, 1).broadcast_to({33, 65})) + kiln::exp(-kiln::abs(h));
  EXPECT_EQ(y.dtype(), DType::f16);
  std::vector<float> got = y.to_vector<float>();
  std::vector<double> want;
  for (int i = 0; i < 33; ++i)
    for (int j = 0; j < 65; ++j) {
      double v = xs[i * 65 + j];
      want.push_back(std::tanh(v * xs[i * 65]) + std::exp(-std::abs(v)));
    }
  EXPECT_TRUE(allClose(got, want, 1e-2, 1e-3)); // the f16 row of the tolerance table
}

TEST_P(DTypeOnEveryDevice, HalfReductionsAccumulateInFloat) {
  // In f16 a running sum stops at 2048 (+1 rounds away) and 1/40000
  // underflows: both must come out right.
  Tensor ones = Tensor::full({5000}, 1.0f, *device).to(DType::f16);
  EXPECT_EQ(sum(ones).item<float>(), 5000.0f);
  EXPECT_EQ(mean(Tensor::full({40000}, 1.0f, *device).to(DType::f16)).item<float>(), 1.0f);
  Tensor a = Tensor::full({2, 3000}, 1.0f, *device).to(DType::f16);
  Tensor b = Tensor::full({3000, 2}, 1.0f).to(DType::f16);
  EXPECT_EQ(matmul(a, b).to_vector<float>(), (std::vector<float>{3000, 3000, 3000, 3000}));
}

// f16 operands through the tiled and register-blocked GEMM forms: read as
// f16, accumulated in f32, rounded once (the f16 row of the tolerance table).
TEST_P(DTypeOnEveryDevice, HalfMatmulAndConvWithinTolerance) {
  Tensor a = (Tensor::randn({37, 50}, *device) * 0.5f).to(DType::f16);
  Tensor b = (Tensor::randn({50, 29}, *device) * 0.5f).to(DType::f16);
  realize({a, b});
  std::vector<float> as = a.to_vector<float>(), bs = b.to_vector<float>();
  std::vector<double> want(37 * 29, 0);
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 29; ++j)
      for (int p = 0; p < 50; ++p)
        want[i * 29 + j] += double(as[i * 50 + p]) * bs[p * 29 + j];
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.dtype(), DType::f16);
  EXPECT_TRUE(allClose(c.to_vector<float>(), want, 1e-2, 1e-2));

  Tensor x = (Tensor::randn({1, 4, 6, 6}, *device) * 0.5f).to(DType::f16);
  Tensor w = (Tensor::randn({20, 4, 3, 3}, *device) * 0.5f).to(DType::f16);
  realize({x, w});
  std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>();
  std::vector<double> conv(20 * 36, 0);
  for (int co = 0; co < 20; ++co)
    for (int h = 0; h < 6; ++h)
      for (int v = 0; v < 6; ++v)
        for (int ci = 0; ci < 4; ++ci)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) {
              int ih = h + kh - 1, iw = v + kw - 1;
              if (ih >= 0 && ih < 6 && iw >= 0 && iw < 6)
                conv[(co * 6 + h) * 6 + v] +=
                    double(xs[(ci * 6 + ih) * 6 + iw]) * ws[((co * 4 + ci) * 3 + kh) * 3 + kw];
            }
  EXPECT_TRUE(allClose(conv2d(x, w, {1, 1}, {1, 1}).to_vector<float>(), conv, 1e-2, 1e-2));
}

TEST_P(DTypeOnEveryDevice, HalfTensorsTakeScalarsAndNormalize) {
  Tensor x = Tensor::randn({4, 64}, *device);
  Tensor h = x.to(DType::f16);
  std::vector<float> xs = x.to_vector<float>();
  std::vector<float> got = (2.0f * h - 0.5f).to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(got[i], 2 * xs[i] - 0.5, 2e-2 * (std::abs(2 * xs[i]) + 1));
  Tensor g = Tensor::full({64}, 1.0f).to(DType::f16), b = Tensor::zeros_like(g);
  EXPECT_EQ(b.dtype(), DType::f16);
  std::vector<float> n = layer_norm(h, g, b).to_vector<float>();
  double mu = 0;
  for (int j = 0; j < 64; ++j)
    mu += n[j] / 64;
  EXPECT_NEAR(mu, 0.0, 1e-2);
}

KILN_ON_EVERY_DEVICE(DTypeOnEveryDevice);

// bf16: computed in f32 (rounded to bf16 between ops, as
// PyTorch's eager bf16), reductions and matmuls accumulating in f32. On the
// CPU through arith's emulation; on a GPU its buffers are 16-bit integers
// (kiln-emulate-bf16-storage: SPIR-V has no bf16 type), with the same results.
TEST_P(DTypeOnEveryDevice, BFloat16ComputedInFloat) {
  Device d = *device;
  std::vector<float> xs = {1.0f, 2.5f, -3.0f, 1.0f / 3, 1000.7f, 65504.0f, 1e30f, 0.0f};
  std::vector<float> rounded = Tensor::from(xs, {8}, d).to(DType::bf16).to_vector<float>();
  // 8 mantissa bits: to nearest, ties to even.
  auto toBf16 = [](float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000u;
    std::memcpy(&v, &bits, 4);
    return v;
  };
  EXPECT_EQ(rounded, (std::vector<float>{1.0f, 2.5f, -3.0f, 0.333984375f, 1000.0f, 65536.0f,
                                         toBf16(1e30f), 0.0f}));
  Tensor b = Tensor::from(xs, {8}, d).to(DType::bf16);
  EXPECT_EQ(b.dtype(), DType::bf16);
  std::vector<float> y = (b * 2.0f + 1.0f).to_vector<float>();
  EXPECT_EQ(y[3], 1.671875f) << "2 x 0.333984375 + 1 = 1.66797, rounded to bf16";
  EXPECT_EQ(y[4], 2000.0f) << "2001 in bf16";
  // 5000 ones: accumulated in f32 (a bf16 running sum stops at 256), the
  // result rounded once.
  EXPECT_EQ(sum(Tensor::full({5000}, 1.0f, d).to(DType::bf16)).item<float>(), 4992.0f);
  // Small integers: exact through the GEMM forms.
  std::vector<float> as(64 * 96), bs(96 * 128);
  for (size_t i = 0; i < as.size(); ++i)
    as[i] = float(int(i * 7 % 5) - 2);
  for (size_t i = 0; i < bs.size(); ++i)
    bs[i] = float(int(i * 3 % 5) - 2);
  Tensor c = matmul(Tensor::from(as, {64, 96}, d).to(DType::bf16),
                    Tensor::from(bs, {96, 128}, d).to(DType::bf16));
  EXPECT_EQ(c.dtype(), DType::bf16);
  std::vector<float> got = c.to_vector<float>();
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 128; ++j) {
      double acc = 0;
      for (int p = 0; p < 96; ++p)
        acc += double(as[i * 96 + p]) * bs[p * 128 + j];
      ASSERT_EQ(got[i * 128 + j], acc) << i << ", " << j;
    }
  EXPECT_NEAR(gelu(b).to_vector<float>()[1], 2.484375f, 1e-6f);
  // Values only moved (a concat's select, a transpose) keep their bits.
  std::vector<float> left = {0.333984375f, -2.0f, 1e30f}, right = {7.0f, -0.0f, 65536.0f};
  std::vector<float> joined = concat({Tensor::from(left, {3, 1}, d).to(DType::bf16),
                                      Tensor::from(right, {3, 1}, d).to(DType::bf16)},
                                     1)
                                  .transpose(0, 1)
                                  .to_vector<float>();
  EXPECT_EQ(joined, (std::vector<float>{0.333984375f, -2.0f, toBf16(1e30f), 7.0f, -0.0f,
                                        65536.0f}));
  // bf16 <-> f16 (one width: through f32): 1/3 in bf16 is exact in f16;
  // 1000.7 rounds to 1000 in bf16; 65536 is past f16's largest (inf); an
  // f16 1/3 (0.33325195) rounds to bf16's 0.33398438.
  EXPECT_EQ(b.to(DType::f16).to_vector<float>(),
            (std::vector<float>{1.0f, 2.5f, -3.0f, 0.333984375f, 1000.0f, INFINITY, INFINITY,
                                0.0f}));
  EXPECT_EQ(Tensor::from(xs, {8}, d).to(DType::f16).to(DType::bf16).to_vector<float>()[3],
            0.333984375f);
}

// A bf16 block of each kind on this device agrees with the CPU's: the same
// f32 arithmetic, rounded to bf16 where each kernel ends (kernels end at
// different ops on the two, hence the tolerance).
TEST_P(DTypeOnEveryDevice, BFloat16BlocksAgreeWithTheCpu) {
  auto on = [](Device d, Shape shape, unsigned seed) {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    std::vector<float> v(n);
    for (float &f : v) {
      seed = seed * 1664525u + 1013904223u;
      f = float(seed >> 8) / 8388608.0f - 1.0f; // uniform in [-1, 1)
    }
    return Tensor::from(v, shape, d).to(DType::bf16);
  };
  auto block = [&](Device d) {
    Tensor x = on(d, {8, 64}, 1);
    Tensor h = layer_norm(x, on(d, {64}, 2), on(d, {64}, 3));
    Tensor a = softmax(matmul(h, on(d, {64, 32}, 4) * 0.1f), -1);
    Tensor img = on(d, {1, 8, 6, 6}, 5);
    Tensor conv = relu(conv2d(img, on(d, {4, 8, 3, 3}, 6) * 0.2f, {1, 1}, {1, 1}));
    return concat({gelu(a).reshape({256}), conv.reshape({144})}, 0);
  };
  std::vector<float> here = block(*device).to_vector<float>(),
                     cpu = block(Device::cpu()).to_vector<float>();
  ASSERT_EQ(here.size(), cpu.size());
  for (size_t i = 0; i < here.size(); ++i)
    EXPECT_NEAR(here[i], cpu[i], 2e-2 * (1 + std::abs(cpu[i]))) << i;
}

TEST(DType, MathOnIntegersNeedsACast) {
  Tensor i = Tensor::zeros({4}).to(DType::i32);
  EXPECT_THROW(kiln::exp(i), Error);
  EXPECT_THROW(i + i, Error);
  EXPECT_NO_THROW(i.to(DType::f32) + 1.0f);
}
} // namespace
