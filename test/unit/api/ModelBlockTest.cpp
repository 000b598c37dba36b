// A transformer block written with the Tensor API, on every device, against
// a float64 reference, dispatching the number of kernels the fusion rules
// predict.

#include "TestUtil.h"

using namespace kiln;
using kiln::test::allClose;

namespace {
using Matrix = std::vector<double>; // row-major

Matrix toDouble(const Tensor &t) {
  std::vector<float> v = t.to_vector<float>();
  return {v.begin(), v.end()};
}

/// [r, k] x [c, k]^T + bias[c]
Matrix linearRef(const Matrix &x, const Matrix &w, const Matrix &b, int r, int k, int c) {
  Matrix y(r * c);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j) {
      double acc = b[j];
      for (int p = 0; p < k; ++p)
        acc += x[i * k + p] * w[j * k + p];
      y[i * c + j] = acc;
    }
  return y;
}

Matrix layerNormRef(const Matrix &x, const Matrix &g, const Matrix &b, int r, int c) {
  Matrix y(r * c);
  for (int i = 0; i < r; ++i) {
    double mu = 0, var = 0;
    for (int j = 0; j < c; ++j)
      mu += x[i * c + j] / c;
    for (int j = 0; j < c; ++j)
      var += (x[i * c + j] - mu) * (x[i * c + j] - mu) / c;
    for (int j = 0; j < c; ++j)
      y[i * c + j] = (x[i * c + j] - mu) / std::sqrt(var + 1e-5) * g[j] + b[j];
  }
  return y;
}

class BlockOnEveryDevice : public kiln::test::OnEveryDevice {};

TEST_P(BlockOnEveryDevice, TransformerBlock) {
  const int T = 12, D = 32, H = 2, Dh = D / H, F = 64;
  auto param = [&](Shape shape, float scale) {
    Tensor t = Tensor::randn(shape, *device) * scale;
    realize({t}); // parameters are data
    return t;
  };
  Tensor x = param({T, D}, 1.0f);
  Tensor g1 = param({D}, 0.1f) + 1.0f, b1 = param({D}, 0.1f);
  Tensor wq = param({D, D}, 0.2f), wk = param({D, D}, 0.2f), wv = param({D, D}, 0.2f),
         wo = param({D, D}, 0.2f);
  Tensor bq = param({D}, 0.1f), bk = param({D}, 0.1f), bv = param({D}, 0.1f),
         bo = param({D}, 0.1f);
  Tensor g2 = param({D}, 0.1f) + 1.0f, b2 = param({D}, 0.1f);
  Tensor w1 = param({F, D}, 0.2f), c1 = param({F}, 0.1f), w2 = param({D, F}, 0.2f),
         c2 = param({D}, 0.1f);
  realize({g1, g2});

  // Attention: heads split with views, batched matmuls, softmax on the keys.
  Tensor h = layer_norm(x, g1, b1);
  Tensor q = linear(h, wq, bq).reshape({T, H, Dh}).permute({1, 0, 2}); // [H, T, Dh]
  Tensor k = linear(h, wk, bk).reshape({T, H, Dh}).permute({1, 2, 0}); // [H, Dh, T]
  Tensor v = linear(h, wv, bv).reshape({T, H, Dh}).permute({1, 0, 2}); // [H, T, Dh]
  Tensor p = softmax(matmul(q, k) * (1.0f / std::sqrt(float(Dh))), -1);
  Tensor attn = matmul(p, v).permute({1, 0, 2}).reshape({T, D});
  Tensor x1 = linear(attn, wo, bo) + x;
  // MLP with GELU.
  Tensor y = linear(gelu(linear(layer_norm(x1, g2, b2), w1, c1)), w2, c2) + x1;

  reset_stats();
  std::vector<float> got = y.to_vector<float>();
  // What the fusion rules predict: layer norm 1 (mean, variance and the
  // normalization in one row kernel); q, k, v 3 (matmul + bias each); scores
  // 1 (head views folded in); softmax 1 (the scale, max, sum of exp and the
  // division in one row kernel); p @ v 1; output projection + bias +
  // residual 1 (the head-merge views fold into it); layer norm 1; fc1 + bias
  // + GELU 1; fc2 + bias + residual 1. A kernel count change is a fusion
  // change: update it on purpose.
  EXPECT_EQ(stats().kernels_dispatched, 11u);

  // float64 reference.
  Matrix X = toDouble(x), Hd = layerNormRef(X, toDouble(g1), toDouble(b1), T, D);
  Matrix Q = linearRef(Hd, toDouble(wq), toDouble(bq), T, D, D);
  Matrix K = linearRef(Hd, toDouble(wk), toDouble(bk), T, D, D);
  Matrix V = linearRef(Hd, toDouble(wv), toDouble(bv), T, D, D);
  Matrix A(T * D, 0);
  for (int hh = 0; hh < H; ++hh)
    for (int i = 0; i < T; ++i) {
      std::vector<double> s(T);
      double m = -INFINITY, sum = 0;
      for (int j = 0; j < T; ++j) {
        double acc = 0;
        for (int d = 0; d < Dh; ++d)
          acc += Q[i * D + hh * Dh + d] * K[j * D + hh * Dh + d];
        s[j] = acc / std::sqrt(double(Dh));
        m = std::max(m, s[j]);
      }
      for (int j = 0; j < T; ++j)
        sum += std::exp(s[j] - m);
      for (int d = 0; d < Dh; ++d) {
        double acc = 0;
        for (int j = 0; j < T; ++j)
          acc += std::exp(s[j] - m) / sum * V[j * D + hh * Dh + d];
        A[i * D + hh * Dh + d] = acc;
      }
    }
  Matrix X1 = linearRef(A, toDouble(wo), toDouble(bo), T, D, D);
  for (int i = 0; i < T * D; ++i)
    X1[i] += X[i];
  Matrix F1 = linearRef(layerNormRef(X1, toDouble(g2), toDouble(b2), T, D), toDouble(w1),
                        toDouble(c1), T, D, F);
  for (double &f : F1)
    f = 0.5 * f * (1 + std::erf(f / std::sqrt(2.0)));
  Matrix Y = linearRef(F1, toDouble(w2), toDouble(c2), T, F, D);
  for (int i = 0; i < T * D; ++i)
    Y[i] += X1[i];
  EXPECT_TRUE(allClose(got, Y, 1e-4, 1e-5));
}

KILN_ON_EVERY_DEVICE(BlockOnEveryDevice);
} // namespace
