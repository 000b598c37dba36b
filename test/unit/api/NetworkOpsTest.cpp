//===- NetworkOpsTest.cpp - activations, shapes, attention, pooling -------===//
//
// The ops networks are written with, on every device, against float64
// references written from PyTorch's definitions: activations over a range
// with NaN and infinities, the shape helpers, conv2d's bias, ceil_mode
// pooling (sizes and divisors), adaptive average pooling with overlapping
// windows, and scaled_dot_product_attention with each kind of mask. Kernel
// counts pin that the activations fuse into the op before them.

#include "TestUtil.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace kiln;
using kiln::test::allClose;
using kiln::test::messageOf;

namespace {
class NetworkOps : public kiln::test::OnEveryDevice {
protected:
  Tensor on(std::vector<float> data, Shape shape) {
    return Tensor::from(std::move(data), std::move(shape), *device);
  }
  size_t kernelsOf(const Tensor &y) {
    reset_stats();
    realize({y});
    return stats().kernels_dispatched;
  }
};

std::vector<float> randomValues(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

std::vector<double> mapped(const std::vector<float> &x, double (*f)(double)) {
  std::vector<double> y;
  for (float v : x)
    y.push_back(f(double(v)));
  return y;
}

double clampRef(double x, double lo, double hi) {
  return std::isnan(x) ? x : std::min(std::max(x, lo), hi);
}

TEST_P(NetworkOps, ActivationsMatchTheirDefinitions) {
  std::vector<float> x = randomValues(509, 1, -8.0f, 8.0f);
  float inf = std::numeric_limits<float>::infinity();
  // The bends of each activation, NaN and both infinities.
  for (float v : {-3.0f, 0.0f, 3.0f, 6.0f, -1.0f, 1.0f, inf, -inf,
                  std::numeric_limits<float>::quiet_NaN()})
    x.push_back(v);
  Tensor t = on(x, {int64_t(x.size())});
  struct Case {
    const char *name;
    Tensor got;
    double (*ref)(double);
  } cases[] = {
      {"relu6", relu6(t), [](double v) { return clampRef(v, 0, 6); }},
      {"hardtanh", hardtanh(t), [](double v) { return clampRef(v, -1, 1); }},
      {"clamp", clamp(t, -2.5f, 4.0f), [](double v) { return clampRef(v, -2.5, 4); }},
      {"clamp min", clamp(t, 0.5f, std::nullopt),
       [](double v) { return std::isnan(v) ? v : std::max(v, 0.5); }},
      {"clamp max", clamp(t, std::nullopt, 0.5f),
       [](double v) { return std::isnan(v) ? v : std::min(v, 0.5); }},
      {"hardswish", hardswish(t),
       [](double v) { return std::isinf(v) ? (v > 0 ? v : -0.0) : v * clampRef(v + 3, 0, 6) / 6; }},
      {"hardsigmoid", hardsigmoid(t), [](double v) { return clampRef(v + 3, 0, 6) / 6; }},
      {"silu", silu(t),
       [](double v) { return std::isinf(v) ? (v > 0 ? v : 0.0) : v / (1 + std::exp(-v)); }},
      {"gelu tanh", gelu(t, "tanh"),
       [](double v) {
         if (std::isinf(v))
           return v > 0 ? v : 0.0;
         return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
       }},
      {"gelu none", gelu(t, "none"),
       [](double v) {
         if (std::isinf(v))
           return v > 0 ? v : 0.0;
         return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
       }},
  };
  for (Case &c : cases) {
    std::vector<float> got = c.got.to_vector<float>();
    std::vector<double> want = mapped(x, c.ref);
    // -inf * 0 is NaN in f32 where the limit is 0: compare finite inputs
    // for the gated forms, and every input for the clamps.
    for (size_t i = 0; i < x.size(); ++i)
      if (std::isinf(x[i]) && std::isnan(got[i]) && want[i] == 0.0)
        got[i] = 0.0f;
    EXPECT_TRUE(allClose(got, want, 2e-6, 2e-6)) << c.name;
  }
  EXPECT_NE(messageOf([&] { gelu(t, "erf"); }).find("\"none\" or \"tanh\""), std::string::npos);
  EXPECT_NE(messageOf([&] { hardtanh(t, 2.0f, 1.0f); }).find("above max_val"),
            std::string::npos);
  EXPECT_NE(messageOf([&] { clamp(t, std::nullopt, std::nullopt); }).find("at least one"),
            std::string::npos);
  EXPECT_NE(messageOf([&] { silu(Tensor::from(std::vector<int32_t>{1, 2}, {2})); })
                .find("floating-point"),
            std::string::npos);
}

TEST_P(NetworkOps, ActivationChainsAreOneKernel) {
  Tensor x = on(randomValues(4096, 2, -6.0f, 6.0f), {64, 64});
  EXPECT_EQ(kernelsOf(hardswish(silu(relu6(x)) * 2.0f)), 1u);
}

TEST_P(NetworkOps, ShapeHelpers) {
  std::vector<float> v(2 * 3 * 1 * 4);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = float(i);
  Tensor x = on(v, {2, 3, 1, 4});
  EXPECT_EQ(flatten(x).shape(), (Shape{24}));
  EXPECT_EQ(flatten(x, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(flatten(x, 1, 2).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(flatten(Tensor::scalar(2.0f)).shape(), (Shape{1}));
  EXPECT_EQ(squeeze(x).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(squeeze(x, {-2}).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(unsqueeze(x, 0).shape(), (Shape{1, 2, 3, 1, 4}));
  EXPECT_EQ(unsqueeze(x, -1).shape(), (Shape{2, 3, 1, 4, 1}));
  EXPECT_EQ(flatten(x, 1).to_vector<float>(), v);
  EXPECT_NE(messageOf([&] { squeeze(x, {1}); }).find("has size 3, not 1"), std::string::npos);
  EXPECT_NE(messageOf([&] { flatten(x, 2, 1); }).find("comes after"), std::string::npos);
  EXPECT_NE(messageOf([&] { unsqueeze(x, 5); }).find("out of range"), std::string::npos);

  // Pieces along dimension 3 (size 4) and 1 (size 3).
  std::vector<Tensor> halves = chunk(x, 2, -1);
  ASSERT_EQ(halves.size(), 2u);
  std::vector<Tensor> uneven = split(x, 2, 1);
  ASSERT_EQ(uneven.size(), 2u);
  EXPECT_EQ(uneven[0].shape(), (Shape{2, 2, 1, 4}));
  EXPECT_EQ(uneven[1].shape(), (Shape{2, 1, 1, 4}));
  std::vector<Tensor> sized = split(x, std::vector<int64_t>{1, 3}, 3);
  ASSERT_EQ(sized.size(), 2u);
  EXPECT_EQ(sized[1].shape(), (Shape{2, 3, 1, 3}));
  std::vector<float> second = halves[1].to_vector<float>(), rest = sized[1].to_vector<float>();
  for (size_t row = 0; row < 6; ++row) {
    for (size_t j = 0; j < 2; ++j)
      EXPECT_EQ(second[row * 2 + j], v[row * 4 + 2 + j]);
    for (size_t j = 0; j < 3; ++j)
      EXPECT_EQ(rest[row * 3 + j], v[row * 4 + 1 + j]);
  }
  EXPECT_EQ(uneven[1].to_vector<float>(),
            std::vector<float>({8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(chunk(x, 3, 3).size(), 2u); // ceil(4 / 3) = 2 per piece, as torch.chunk
  EXPECT_NE(messageOf([&] { split(x, std::vector<int64_t>{1, 2}, 3); }).find("add up to 3"),
            std::string::npos);
  EXPECT_NE(messageOf([&] { chunk(x, 0); }).find("must be positive"), std::string::npos);
}

TEST_P(NetworkOps, ConvolutionWithBiasIsOneKernel) {
  std::vector<float> xv = randomValues(2 * 3 * 6 * 6, 3), wv = randomValues(4 * 3 * 3 * 3, 4),
                     bv = {0.5f, -1.0f, 2.0f, 0.0f};
  Tensor x = on(xv, {2, 3, 6, 6}), w = on(wv, {4, 3, 3, 3}), b = on(bv, {4});
  Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
  Tensor plain = conv2d(x, w, {1, 1}, {1, 1});
  std::vector<float> p = plain.to_vector<float>();
  std::vector<double> want(p.size());
  for (size_t i = 0; i < p.size(); ++i)
    want[i] = double(p[i]) + bv[(i / 36) % 4];
  EXPECT_TRUE(allClose(y.to_vector<float>(), want, 1e-6, 1e-6));
  EXPECT_EQ(kernelsOf(relu6(conv2d(x, w, b, {1, 1}, {1, 1}))), 1u);
  EXPECT_NE(messageOf([&] { conv2d(x, w, on({1, 2, 3}, {3})); }).find("one value per output"),
            std::string::npos);
}

/// PyTorch's pooling with ceil_mode, written from its definition: the
/// output count, windows clipped to input plus padding, the average's
/// divisor counting padding but not what lies past it.
std::vector<double> poolReference(const std::vector<float> &x, int64_t planes, int64_t h,
                                  int64_t w, int64_t k, int64_t s, int64_t p, bool isMax,
                                  int64_t &oh, int64_t &ow) {
  auto count = [&](int64_t size) {
    int64_t out = (size + 2 * p - k + s - 1) / s + 1;
    if ((out - 1) * s >= size + p)
      --out;
    return out;
  };
  oh = count(h);
  ow = count(w);
  std::vector<double> y;
  for (int64_t c = 0; c < planes; ++c)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int64_t r0 = i * s - p, c0 = j * s - p;
        int64_t r1 = std::min(r0 + k, h + p), c1 = std::min(c0 + k, w + p);
        double best = -INFINITY, sum = 0;
        for (int64_t r = std::max<int64_t>(r0, 0); r < std::min(r1, h); ++r)
          for (int64_t q = std::max<int64_t>(c0, 0); q < std::min(c1, w); ++q) {
            double v = x[size_t((c * h + r) * w + q)];
            best = std::max(best, v);
            sum += v;
          }
        y.push_back(isMax ? best : sum / double((r1 - r0) * (c1 - c0)));
      }
  return y;
}

TEST_P(NetworkOps, CeilModePooling) {
  struct {
    int64_t h, w, k, s, p;
  } cases[] = {{8, 8, 3, 2, 0}, {10, 7, 3, 3, 1}, {5, 6, 2, 2, 1}, {7, 7, 3, 2, 1},
               {13, 13, 3, 2, 0}, {112, 112, 3, 2, 0} /* SqueezeNet's stem: 56, not 55 */};
  for (auto c : cases) {
    std::vector<float> xv = randomValues(size_t(2 * 3 * c.h * c.w), 5);
    Tensor x = on(xv, {2, 3, c.h, c.w});
    for (bool isMax : {true, false}) {
      int64_t oh, ow;
      std::vector<double> want =
          poolReference(xv, 6, c.h, c.w, c.k, c.s, c.p, isMax, oh, ow);
      Tensor y = isMax ? max_pool2d(x, {c.k, c.k}, {c.s, c.s}, {c.p, c.p}, true)
                       : avg_pool2d(x, {c.k, c.k}, {c.s, c.s}, {c.p, c.p}, true);
      EXPECT_EQ(y.shape(), (Shape{2, 3, oh, ow})) << c.h << "x" << c.w << " k" << c.k;
      EXPECT_TRUE(allClose(y.to_vector<float>(), want, 1e-6, 1e-6))
          << (isMax ? "max " : "avg ") << c.h << "x" << c.w << " k" << c.k << " s" << c.s
          << " p" << c.p;
    }
  }
  Tensor x = on(randomValues(2 * 3 * 112 * 112, 6), {2, 3, 112, 112});
  EXPECT_EQ(kernelsOf(max_pool2d(relu(x), {3, 3}, {2, 2}, {0, 0}, true)), 1u);
}

std::vector<double> adaptiveReference(const std::vector<float> &x, int64_t planes, int64_t h,
                                      int64_t w, int64_t oh, int64_t ow) {
  std::vector<double> y;
  for (int64_t c = 0; c < planes; ++c)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int64_t r0 = i * h / oh, r1 = ((i + 1) * h + oh - 1) / oh;
        int64_t c0 = j * w / ow, c1 = ((j + 1) * w + ow - 1) / ow;
        double sum = 0;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t q = c0; q < c1; ++q)
            sum += x[size_t((c * h + r) * w + q)];
        y.push_back(sum / double((r1 - r0) * (c1 - c0)));
      }
  return y;
}

TEST_P(NetworkOps, AdaptiveAveragePooling) {
  struct {
    int64_t h, w, oh, ow;
  } cases[] = {{7, 7, 3, 3}, {8, 8, 2, 2}, {7, 9, 1, 1}, {5, 10, 4, 3}, {6, 6, 6, 6}};
  for (auto c : cases) {
    std::vector<float> xv = randomValues(size_t(2 * 4 * c.h * c.w), 7);
    Tensor y = adaptive_avg_pool2d(on(xv, {2, 4, c.h, c.w}), {c.oh, c.ow});
    EXPECT_EQ(y.shape(), (Shape{2, 4, c.oh, c.ow}));
    EXPECT_TRUE(allClose(y.to_vector<float>(), adaptiveReference(xv, 8, c.h, c.w, c.oh, c.ow),
                         1e-5, 1e-6))
        << c.h << "x" << c.w << " -> " << c.oh << "x" << c.ow;
  }
  EXPECT_NE(messageOf([&] { adaptive_avg_pool2d(on({1, 2}, {2}), {1, 1}); }).find("NCHW"),
            std::string::npos);
}

/// softmax(q k^T scale + bias) v per batch, in float64; `keep(b, i, j)`
/// says whether a score is kept, `bias(b, i, j)` what is added to it.
std::vector<double> attentionReference(const std::vector<float> &q, const std::vector<float> &k,
                                       const std::vector<float> &v, int64_t batch, int64_t l,
                                       int64_t s, int64_t e, int64_t ev, double scale,
                                       const std::function<bool(int64_t, int64_t, int64_t)> &keep,
                                       const std::function<double(int64_t, int64_t, int64_t)> &bias) {
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < l; ++i) {
      std::vector<double> score(static_cast<size_t>(s));
      double top = -INFINITY;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < e; ++d)
          dot += double(q[size_t((b * l + i) * e + d)]) * k[size_t((b * s + j) * e + d)];
        score[size_t(j)] = keep(b, i, j) ? dot * scale + bias(b, i, j) : -INFINITY;
        top = std::max(top, score[size_t(j)]);
      }
      double total = 0;
      for (double &x : score)
        total += (x = std::exp(x - top));
      for (int64_t d = 0; d < ev; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < s; ++j)
          acc += score[size_t(j)] / total * v[size_t((b * s + j) * ev + d)];
        out.push_back(acc);
      }
    }
  return out;
}

TEST_P(NetworkOps, AttentionOverManyKeyBlocks) {
  // 300 keys are five of the CPU kernel's 64-key blocks: every block after
  // the first rescales what the online softmax summed before. Heads come
  // from a [batch, L, heads * E] projection by reshape and transpose (views
  // the kernel reads through); k is stored [E, S] and transposed, so its
  // rows are not contiguous.
  const int64_t batch = 2, heads = 2, l = 150, s = 300, e = 32, ev = 16, bh = batch * heads;
  std::vector<float> qv = randomValues(size_t(bh * l * e), 20, -1, 1),
                     kv = randomValues(size_t(bh * s * e), 21, -1, 1),
                     vv = randomValues(size_t(bh * s * ev), 22);
  // q as [batch, L, heads, E] in memory; k as [batch, heads, E, S].
  std::vector<float> qStored(qv.size()), kStored(kv.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < l; ++i)
        for (int64_t d = 0; d < e; ++d)
          qStored[size_t(((b * l + i) * heads + h) * e + d)] =
              qv[size_t(((b * heads + h) * l + i) * e + d)];
  for (int64_t bhi = 0; bhi < bh; ++bhi)
    for (int64_t j = 0; j < s; ++j)
      for (int64_t d = 0; d < e; ++d)
        kStored[size_t((bhi * e + d) * s + j)] = kv[size_t((bhi * s + j) * e + d)];
  Tensor q = on(qStored, {batch, l, heads * e}).reshape({batch, l, heads, e}).transpose(1, 2);
  Tensor k = on(kStored, {batch, heads, e, s}).transpose(2, 3);
  Tensor v = on(vv, {batch, heads, s, ev});
  auto all = [](int64_t, int64_t, int64_t) { return true; };
  auto none = [](int64_t, int64_t, int64_t) { return 0.0; };
  const bool cpu = device->name().rfind("cpu", 0) == 0;

  Tensor plain = scaled_dot_product_attention(q, k, v);
  // One fused kernel on the CPU; the decomposition elsewhere (the scores
  // with their scale, the softmax, the product with v).
  EXPECT_EQ(kernelsOf(plain), cpu ? 1u : 3u);
  EXPECT_TRUE(allClose(plain.to_vector<float>(),
                       attentionReference(qv, kv, vv, bh, l, s, e, ev, 1 / std::sqrt(32.0), all,
                                          none),
                       1e-5, 1e-5));
  Tensor causal = scaled_dot_product_attention(q, k, v, Tensor(), true, 0.3f);
  EXPECT_TRUE(allClose(causal.to_vector<float>(),
                       attentionReference(qv, kv, vv, bh, l, s, e, ev, 0.3,
                                          [](int64_t, int64_t i, int64_t j) { return j <= i; },
                                          none),
                       1e-5, 1e-5));
  // A float mask of [L, S] with -inf in whole key blocks: rows whose first
  // blocks see nothing but -inf start the online softmax from nothing.
  std::vector<float> addv = randomValues(size_t(l * s), 23, -2, 2);
  for (int64_t i = 0; i < l; ++i)
    for (int64_t j = 0; j < s; ++j)
      if (j < 64 * (i % 4))
        addv[size_t(i * s + j)] = -std::numeric_limits<float>::infinity();
  Tensor added = scaled_dot_product_attention(q, k, v, on(addv, {l, s}));
  EXPECT_TRUE(allClose(added.to_vector<float>(),
                       attentionReference(qv, kv, vv, bh, l, s, e, ev, 1 / std::sqrt(32.0), all,
                                          [&](int64_t, int64_t i, int64_t j) {
                                            return double(addv[size_t(i * s + j)]);
                                          }),
                       1e-5, 1e-5));
  // f16 operands: f16 storage, f32 arithmetic; within f16's rounding.
  Tensor half = scaled_dot_product_attention(q.to(DType::f16), k.to(DType::f16),
                                             v.to(DType::f16));
  EXPECT_TRUE(allClose(half.to(DType::f32).to_vector<float>(),
                       attentionReference(qv, kv, vv, bh, l, s, e, ev, 1 / std::sqrt(32.0), all,
                                          none),
                       2e-3, 2e-3));
}

TEST_P(NetworkOps, AttentionWithWideHeads) {
  // Head sizes over 256 (E = 300, Ev = 260) take the decomposition on the
  // CPU too: three kernels everywhere, the same answer.
  const int64_t bh = 2, l = 5, s = 7, e = 300, ev = 260;
  std::vector<float> qv = randomValues(size_t(bh * l * e), 40, -0.2f, 0.2f),
                     kv = randomValues(size_t(bh * s * e), 41, -0.2f, 0.2f),
                     vv = randomValues(size_t(bh * s * ev), 42);
  Tensor y = scaled_dot_product_attention(on(qv, {bh, l, e}), on(kv, {bh, s, e}),
                                          on(vv, {bh, s, ev}), Tensor(), true);
  EXPECT_EQ(kernelsOf(y), 3u);
  EXPECT_TRUE(allClose(y.to_vector<float>(),
                       attentionReference(qv, kv, vv, bh, l, s, e, ev, 1 / std::sqrt(300.0),
                                          [](int64_t, int64_t i, int64_t j) { return j <= i; },
                                          [](int64_t, int64_t, int64_t) { return 0.0; }),
                       1e-5, 1e-6));
}

// The fused attention kernel is the CPU's (other devices decompose it):
// 2048 x 2048 scores are 16 MiB, and nothing that size is ever allocated,
// only q, k, v and the result.
TEST(AttentionOnTheCpu, LongAttentionNeverHoldsTheScores) {
  Device cpu = Device::parse("cpu:0");
  const int64_t n = 2048, e = 16;
  Tensor q = Tensor::from(randomValues(size_t(n * e), 30), {1, n, e}, cpu);
  Tensor k = Tensor::from(randomValues(size_t(n * e), 31), {1, n, e}, cpu);
  Tensor v = Tensor::from(randomValues(size_t(n * e), 32), {1, n, e}, cpu);
  realize({q, k, v});
  Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), true);
  reset_stats();
  realize({y});
  EXPECT_EQ(stats().kernels_dispatched, 1u);
  EXPECT_LE(stats().last_graph_peak_bytes, uint64_t(4 * n * e * 4));
  // Row 0 sees key 0 alone; row 1 keys 0 and 1.
  std::vector<float> out = y.to_vector<float>(), qs = q.to_vector<float>(),
                     ks = k.to_vector<float>(), vs = v.to_vector<float>();
  for (int64_t d = 0; d < e; ++d)
    EXPECT_NEAR(out[size_t(d)], vs[size_t(d)], 1e-6);
  double s0 = 0, s1 = 0;
  for (int64_t d = 0; d < e; ++d) {
    s0 += double(qs[size_t(e + d)]) * ks[size_t(d)];
    s1 += double(qs[size_t(e + d)]) * ks[size_t(e + d)];
  }
  double w0 = 1 / (1 + std::exp((s1 - s0) / std::sqrt(double(e))));
  for (int64_t d = 0; d < e; ++d)
    EXPECT_NEAR(out[size_t(e + d)], w0 * vs[size_t(d)] + (1 - w0) * vs[size_t(e + d)], 1e-5);
}

TEST_P(NetworkOps, ScaledDotProductAttention) {
  const int64_t batch = 2, heads = 3, l = 5, s = 7, e = 8, ev = 4, bh = batch * heads;
  std::vector<float> qv = randomValues(size_t(bh * l * e), 8, -2, 2),
                     kv = randomValues(size_t(bh * s * e), 9, -2, 2),
                     vv = randomValues(size_t(bh * s * ev), 10);
  Tensor q = on(qv, {batch, heads, l, e}), k = on(kv, {batch, heads, s, e}),
         v = on(vv, {batch, heads, s, ev});
  auto all = [](int64_t, int64_t, int64_t) { return true; };
  auto none = [](int64_t, int64_t, int64_t) { return 0.0; };
  double scale = 1 / std::sqrt(double(e));

  Tensor plain = scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(plain.shape(), (Shape{batch, heads, l, ev}));
  EXPECT_TRUE(allClose(plain.to_vector<float>(),
                       attentionReference(qv, kv, vv, bh, l, s, e, ev, scale, all, none), 1e-5,
                       1e-6));

  Tensor causal = scaled_dot_product_attention(q, k, v, Tensor(), true, 0.25f);
  EXPECT_TRUE(allClose(causal.to_vector<float>(),
                       attentionReference(qv, kv, vv, bh, l, s, e, ev, 0.25,
                                          [](int64_t, int64_t i, int64_t j) { return j <= i; },
                                          none),
                       1e-5, 1e-6));

  // A boolean [L, S] mask broadcast over batch and heads (padding: the last
  // two keys dropped), and a float [batch, 1, 1, S] one added.
  std::vector<int32_t> keepBits(size_t(l * s));
  for (int64_t i = 0; i < l; ++i)
    for (int64_t j = 0; j < s; ++j)
      keepBits[size_t(i * s + j)] = j < s - 2 || i == 0;
  Tensor boolMask = Tensor::from(keepBits, {l, s}, *device).to(DType::boolean);
  Tensor masked = scaled_dot_product_attention(q, k, v, boolMask);
  EXPECT_TRUE(allClose(
      masked.to_vector<float>(),
      attentionReference(qv, kv, vv, bh, l, s, e, ev, scale,
                         [](int64_t, int64_t i, int64_t j) { return j < 5 || i == 0; }, none),
      1e-5, 1e-6));
  std::vector<float> addv = randomValues(size_t(batch * s), 11, -3, 3);
  Tensor added = scaled_dot_product_attention(q, k, v, on(addv, {batch, 1, 1, s}));
  EXPECT_TRUE(allClose(added.to_vector<float>(),
                       attentionReference(qv, kv, vv, bh, l, s, e, ev, scale, all,
                                          [&](int64_t b, int64_t, int64_t j) {
                                            return double(addv[size_t((b / heads) * s + j)]);
                                          }),
                       1e-5, 1e-6));

  // A row with every key masked out is NaN, as in PyTorch.
  Tensor nothing = Tensor::from(std::vector<int32_t>(size_t(l * s), 0), {l, s}, *device)
                       .to(DType::boolean);
  for (float y : scaled_dot_product_attention(q, k, v, nothing).to_vector<float>())
    EXPECT_TRUE(std::isnan(y));

  EXPECT_NE(messageOf([&] { scaled_dot_product_attention(q, v, k); }).find("do not fit"),
            std::string::npos);
  EXPECT_NE(messageOf([&] {
              scaled_dot_product_attention(q, on(kv, {heads, batch, s, e}), v);
            }).find("batch dimensions"),
            std::string::npos);
  EXPECT_NE(messageOf([&] {
              scaled_dot_product_attention(q, on({}, {batch, heads, 0, e}),
                                           on({}, {batch, heads, 0, ev}));
            }).find("no keys"),
            std::string::npos);
  EXPECT_NE(messageOf([&] { scaled_dot_product_attention(q, k.to(DType::f16), v); })
                .find("give them one dtype"),
            std::string::npos);
  EXPECT_NE(messageOf([&] { scaled_dot_product_attention(q, k, v, boolMask, true); })
                .find("not both"),
            std::string::npos);
  // A key padding mask given as [batch, S]: the error says how to shape it.
  EXPECT_NE(messageOf([&] { scaled_dot_product_attention(q, k, v, on(addv, {batch, s})); })
                .find("mask.reshape({2, 1, 1, 7})"),
            std::string::npos);
}

TEST_P(NetworkOps, CompiledBatchNormTakesItsParametersAtRun) {
  // Parameters that are program inputs are read when the program runs,
  // never baked in from the example values at compile time (the ONNX node
  // tests feed batch norm's parameters as inputs).
  Tensor x = on({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2});
  Tensor m = on({0, 0}, {2}), v = on({1, 1}, {2}), g = on({1, 1}, {2}), b = on({0, 0}, {2});
  Tensor y = batch_norm(x, m, v, g, b);
  Program program = compile({y}, {x, m, v, g, b});
  Tensor m2 = on({1, 2}, {2}), v2 = on({3, 0.5f}, {2}), g2 = on({2, -1}, {2}), b2 = on({0.5f, 4}, {2});
  std::vector<float> got = program.run({x, m2, v2, g2, b2})[0].to_vector<float>();
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) {
    int c = i / 4;
    double mean[] = {1, 2}, var[] = {3, 0.5}, gamma[] = {2, -1}, beta[] = {0.5, 4};
    want.push_back((i + 1 - mean[c]) / std::sqrt(var[c] + 1e-5) * gamma[c] + beta[c]);
  }
  EXPECT_TRUE(allClose(got, want, 1e-5, 1e-5));
}
} // namespace

KILN_ON_EVERY_DEVICE(NetworkOps);
