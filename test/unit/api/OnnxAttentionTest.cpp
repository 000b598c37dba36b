// ONNX's Attention-23 and RotaryEmbedding-23 against loops written from
// ONNX's reference: a KV cache, grouped-query heads, a causal mask offset by
// the cache, a boolean mask, rank-3 inputs with head counts; the rotation of
// halves and of interleaved pairs, partial, with position ids.

#include "OnnxModelBuilder.h"
#include "TestUtil.h"
#include "kiln/Import.h"

#include <cmath>

using namespace kiln;
using kiln::test::importAndRun;
using kiln::test::ModelBuilder;

namespace {
class OnnxAttention : public kiln::test::OnEveryDevice {};

std::vector<float> ramp(size_t n, float scale, int period) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = float(int(i * 7 % size_t(period)) - period / 2) * scale;
  return v;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
}

// Q [1, 4, 3, 2] (four heads), K and V [1, 2, 3, 2] (two heads, each serving
// two query heads) after a cache of 2 positions; causal, so query i sees the
// cache and keys up to its own position; a boolean mask also hides key 1.
TEST_P(OnnxAttention, CacheGroupedHeadsAndMasks) {
  const int64_t H = 4, KH = 2, L = 3, P = 2, S = P + L, D = 2;
  ModelBuilder mb(23);
  mb.input("q", {1, H, L, D});
  mb.input("k", {1, KH, L, D});
  mb.input("v", {1, KH, L, D});
  mb.input("mask", {L, S}, onnx::TensorProto::BOOL);
  mb.input("past_k", {1, KH, P, D});
  mb.input("past_v", {1, KH, P, D});
  onnx::NodeProto *n = mb.node("Attention", {"q", "k", "v", "mask", "past_k", "past_v"},
                               {"y", "present_k", "present_v"});
  ModelBuilder::attr(n, "is_causal", int64_t(1));
  for (const char *out : {"y", "present_k", "present_v"})
    mb.output(out);
  std::vector<float> q = ramp(H * L * D, 0.25f, 9), k = ramp(KH * L * D, 0.5f, 5),
                     v = ramp(KH * L * D, 1.0f, 11), pk = ramp(KH * P * D, 0.3f, 7),
                     pv = ramp(KH * P * D, 0.7f, 13);
  std::vector<float> mask(L * S, 1.0f);
  for (int64_t i = 0; i < L; ++i)
    mask[size_t(i * S + 1)] = 0.0f;
  Tensor maskBool = ne(Tensor::from(mask, {L, S}, *device), Tensor::scalar(0.0f));
  std::vector<Tensor> y = importAndRun(
      mb.bytes(),
      {Tensor::from(q, {1, H, L, D}, *device), Tensor::from(k, {1, KH, L, D}, *device),
       Tensor::from(v, {1, KH, L, D}, *device), maskBool,
       Tensor::from(pk, {1, KH, P, D}, *device), Tensor::from(pv, {1, KH, P, D}, *device)},
      *device);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[1].shape(), (Shape{1, KH, S, D}));
  // present = past then new, per head.
  auto keyAt = [&](int64_t h, int64_t s, int64_t d) {
    return s < P ? pk[size_t((h * P + s) * D + d)] : k[size_t((h * L + s - P) * D + d)];
  };
  auto valueAt = [&](int64_t h, int64_t s, int64_t d) {
    return s < P ? pv[size_t((h * P + s) * D + d)] : v[size_t((h * L + s - P) * D + d)];
  };
  std::vector<float> present = y[1].to_vector<float>();
  for (int64_t h = 0; h < KH; ++h)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d)
        ASSERT_EQ(present[size_t((h * S + s) * D + d)], keyAt(h, s, d));
  std::vector<float> want;
  double scale = 1.0 / std::sqrt(double(D));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i) {
      int64_t kh = h / (H / KH);
      std::vector<double> w(S, 0.0);
      double top = -INFINITY, sum = 0;
      for (int64_t j = 0; j < S; ++j) {
        if (j > P + i || mask[size_t(i * S + j)] == 0.0f) {
          w[size_t(j)] = -INFINITY;
          continue;
        }
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += q[size_t((h * L + i) * D + d)] * keyAt(kh, j, d);
        w[size_t(j)] = dot * scale;
        top = std::max(top, w[size_t(j)]);
      }
      for (double &x : w)
        sum += x == -INFINITY ? 0 : (x = std::exp(x - top));
      for (int64_t d = 0; d < D; ++d) {
        double out = 0;
        for (int64_t j = 0; j < S; ++j)
          if (w[size_t(j)] != -INFINITY)
            out += w[size_t(j)] / sum * valueAt(kh, j, d);
        want.push_back(float(out));
      }
    }
  expectNear(y[0].to_vector<float>(), want, 1e-5f);
}

// Rank-3 inputs [B, S, heads * D] with q_num_heads and kv_num_heads: the
// same as the rank-4 form, heads split from the hidden size and joined back.
TEST_P(OnnxAttention, RankThreeInputsSplitHeads) {
  const int64_t L = 4, H = 2, D = 3;
  ModelBuilder mb(23);
  for (const char *name : {"q", "k", "v"})
    mb.input(name, {1, L, H * D});
  onnx::NodeProto *n = mb.node("Attention", {"q", "k", "v"}, {"y"});
  ModelBuilder::attr(n, "q_num_heads", H);
  ModelBuilder::attr(n, "kv_num_heads", H);
  ModelBuilder::attr(n, "scale", 0.5f);
  mb.output("y");
  std::vector<float> q = ramp(L * H * D, 0.2f, 7), k = ramp(L * H * D, 0.3f, 5),
                     v = ramp(L * H * D, 1.0f, 9);
  std::vector<Tensor> y = importAndRun(mb.bytes(),
                                       {Tensor::from(q, {1, L, H * D}, *device),
                                        Tensor::from(k, {1, L, H * D}, *device),
                                        Tensor::from(v, {1, L, H * D}, *device)},
                                       *device);
  EXPECT_EQ(y[0].shape(), (Shape{1, L, H * D}));
  std::vector<float> want(size_t(L * H * D));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> w(L);
      double top = -INFINITY, sum = 0;
      for (int64_t j = 0; j < L; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += q[size_t(i * H * D + h * D + d)] * k[size_t(j * H * D + h * D + d)];
        w[size_t(j)] = dot * 0.5;
        top = std::max(top, w[size_t(j)]);
      }
      for (double &x : w)
        sum += (x = std::exp(x - top));
      for (int64_t d = 0; d < D; ++d) {
        double out = 0;
        for (int64_t j = 0; j < L; ++j)
          out += w[size_t(j)] / sum * v[size_t(j * H * D + h * D + d)];
        want[size_t(i * H * D + h * D + d)] = float(out);
      }
    }
  expectNear(y[0].to_vector<float>(), want, 1e-5f);
}

// RotaryEmbedding on [B, H, S, D] = [1, 2, 3, 6], rotating the first 4 of 6
// (partial) with the caches' rows at position ids (2, 0, 1); both the
// halves form and the interleaved one.
TEST_P(OnnxAttention, RotaryEmbeddingHalvesAndInterleaved) {
  const int64_t H = 2, S = 3, D = 6, R = 4, rows = 5;
  for (int64_t interleaved : {0, 1}) {
    ModelBuilder mb(23);
    mb.input("x", {1, H, S, D});
    mb.weights("cos", {rows, R / 2}, ramp(rows * R / 2, 0.1f, 7));
    mb.weights("sin", {rows, R / 2}, ramp(rows * R / 2, 0.15f, 5));
    mb.ints("pos", {1, S}, {2, 0, 1});
    onnx::NodeProto *n = mb.node("RotaryEmbedding", {"x", "cos", "sin", "pos"}, {"y"});
    ModelBuilder::attr(n, "rotary_embedding_dim", R);
    ModelBuilder::attr(n, "interleaved", interleaved);
    mb.output("y");
    std::vector<float> x = ramp(H * S * D, 0.5f, 11), c = ramp(rows * R / 2, 0.1f, 7),
                       sn = ramp(rows * R / 2, 0.15f, 5);
    std::vector<Tensor> y =
        importAndRun(mb.bytes(), {Tensor::from(x, {1, H, S, D}, *device)}, *device);
    std::vector<float> want = x;
    const int64_t pos[] = {2, 0, 1};
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t i = 0; i < R / 2; ++i) {
          size_t base = size_t((h * S + s) * D);
          size_t a = base + size_t(interleaved ? 2 * i : i);
          size_t b = base + size_t(interleaved ? 2 * i + 1 : i + R / 2);
          float cv = c[size_t(pos[s] * R / 2 + i)], sv = sn[size_t(pos[s] * R / 2 + i)];
          want[a] = cv * x[a] - sv * x[b];
          want[b] = sv * x[a] + cv * x[b];
        }
    expectNear(y[0].to_vector<float>(), want, 1e-6f);

    // The same rotation of [B, S, H * D] with num_heads: the input and the
    // result are the [B, H, S, D] ones with heads and positions swapped.
    ModelBuilder flat(23);
    flat.input("x", {1, S, H * D});
    flat.weights("cos", {rows, R / 2}, c);
    flat.weights("sin", {rows, R / 2}, sn);
    flat.ints("pos", {1, S}, {2, 0, 1});
    onnx::NodeProto *f = flat.node("RotaryEmbedding", {"x", "cos", "sin", "pos"}, {"y"});
    ModelBuilder::attr(f, "rotary_embedding_dim", R);
    ModelBuilder::attr(f, "interleaved", interleaved);
    ModelBuilder::attr(f, "num_heads", H);
    flat.output("y");
    auto swapped = [&](const std::vector<float> &v) { // [H, S, D] <-> [S, H, D]
      std::vector<float> out(v.size());
      for (int64_t h = 0; h < H; ++h)
        for (int64_t p = 0; p < S; ++p)
          for (int64_t d = 0; d < D; ++d)
            out[size_t((p * H + h) * D + d)] = v[size_t((h * S + p) * D + d)];
      return out;
    };
    std::vector<Tensor> y3 =
        importAndRun(flat.bytes(), {Tensor::from(swapped(x), {1, S, H * D}, *device)}, *device);
    EXPECT_EQ(y3[0].shape(), (Shape{1, S, H * D}));
    expectNear(y3[0].to_vector<float>(), swapped(want), 1e-6f);
  }
}
} // namespace

KILN_ON_EVERY_DEVICE(OnnxAttention);
