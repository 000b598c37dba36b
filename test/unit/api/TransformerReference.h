// The float64 reference of the pre-norm transformer block the tests write
// with the Tensor API (ModelBlockTest, AotTest): layer norm, attention with
// H heads, residual, layer norm, GELU MLP, residual.

#ifndef KILN_TEST_TRANSFORMERREFERENCE_H
#define KILN_TEST_TRANSFORMERREFERENCE_H

#include "kiln/kiln.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::test {
using Matrix = std::vector<double>; // row-major

inline Matrix toDouble(const Tensor &t) {
  std::vector<float> v = t.to_vector<float>();
  return {v.begin(), v.end()};
}

/// [r, k] x [c, k]^T + bias[c]
inline Matrix linearRef(const Matrix &x, const Matrix &w, const Matrix &b, int r, int k, int c) {
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

inline Matrix layerNormRef(const Matrix &x, const Matrix &g, const Matrix &b, int r, int c) {
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


struct TransformerRef {
  int T, D, H, F;
  Matrix x, g1, b1, wq, bq, wk, bk, wv, bv, wo, bo, g2, b2, w1, c1, w2, c2;
};

inline Matrix transformerReference(const TransformerRef &r) {
  const int T = r.T, D = r.D, H = r.H, F = r.F, Dh = D / H;
  Matrix Hd = layerNormRef(r.x, r.g1, r.b1, T, D);
  Matrix Q = linearRef(Hd, r.wq, r.bq, T, D, D);
  Matrix K = linearRef(Hd, r.wk, r.bk, T, D, D);
  Matrix V = linearRef(Hd, r.wv, r.bv, T, D, D);
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
  Matrix X1 = linearRef(A, r.wo, r.bo, T, D, D);
  for (int i = 0; i < T * D; ++i)
    X1[i] += r.x[i];
  Matrix F1 = linearRef(layerNormRef(X1, r.g2, r.b2, T, D), r.w1, r.c1, T, D, F);
  for (double &f : F1)
    f = 0.5 * f * (1 + std::erf(f / std::sqrt(2.0)));
  Matrix Y = linearRef(F1, r.w2, r.c2, T, F, D);
  for (int i = 0; i < T * D; ++i)
    Y[i] += X1[i];
  return Y;
}

} // namespace kiln::test

#endif // KILN_TEST_TRANSFORMERREFERENCE_H
