// A transformer block written with the Tensor API, on every device, against
// a float64 reference, dispatching the number of kernels the fusion rules
// predict.

#include "TestUtil.h"
#include "TransformerReference.h"

using namespace kiln;
using kiln::test::allClose;

namespace {
using kiln::test::Matrix;
using kiln::test::toDouble;

class BlockOnEveryDevice : public kiln::test::OnEveryDevice {};

// The block in `dtype` (f32, or f16 as a half-precision model runs:
// parameters and input converted once, every kernel reading and writing
// halves, matmuls accumulating in f32), against the float64 reference of
// the parameters as they are stored.
void checkTransformerBlock(const Device &device, DType dtype, double rtol, double atol) {
  const int T = 12, D = 32, H = 2, Dh = D / H, F = 64;
  auto param = [&](Shape shape, float scale, float offset = 0.0f) {
    Tensor t = Tensor::randn(shape, device) * scale + offset;
    if (dtype != DType::f32)
      t = t.to(dtype);
    realize({t}); // parameters are data
    return t;
  };
  Tensor x = param({T, D}, 1.0f);
  Tensor g1 = param({D}, 0.1f, 1.0f), b1 = param({D}, 0.1f);
  Tensor wq = param({D, D}, 0.2f), wk = param({D, D}, 0.2f), wv = param({D, D}, 0.2f),
         wo = param({D, D}, 0.2f);
  Tensor bq = param({D}, 0.1f), bk = param({D}, 0.1f), bv = param({D}, 0.1f),
         bo = param({D}, 0.1f);
  Tensor g2 = param({D}, 0.1f, 1.0f), b2 = param({D}, 0.1f);
  Tensor w1 = param({F, D}, 0.2f), c1 = param({F}, 0.1f), w2 = param({D, F}, 0.2f),
         c2 = param({D}, 0.1f);

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
  EXPECT_EQ(y.dtype(), dtype);

  reset_stats();
  std::vector<float> got = y.to_vector<float>();
  // What the fusion rules predict: layer norm 1 (mean, variance and the
  // normalization in one row kernel); q, k, v 3 (matmul + bias each); scores
  // 1 (head views folded in); softmax 1 (the scale, max, sum of exp and the
  // division in one row kernel); p @ v 1; output projection + bias +
  // residual 1 (the head-merge views fold into it); layer norm 1; fc1 + bias
  // + GELU 1; fc2 + bias + residual 1. A kernel count change is a fusion
  // change: update it on purpose. f16 fuses the same.
  EXPECT_EQ(stats().kernels_dispatched, 11u);

  // float64 reference.
  kiln::test::TransformerRef ref{T, D, H, F};
  ref.x = toDouble(x);
  ref.g1 = toDouble(g1), ref.b1 = toDouble(b1), ref.g2 = toDouble(g2), ref.b2 = toDouble(b2);
  ref.wq = toDouble(wq), ref.wk = toDouble(wk), ref.wv = toDouble(wv), ref.wo = toDouble(wo);
  ref.bq = toDouble(bq), ref.bk = toDouble(bk), ref.bv = toDouble(bv), ref.bo = toDouble(bo);
  ref.w1 = toDouble(w1), ref.c1 = toDouble(c1), ref.w2 = toDouble(w2), ref.c2 = toDouble(c2);
  Matrix Y = kiln::test::transformerReference(ref);
  EXPECT_TRUE(allClose(got, Y, rtol, atol));
}

TEST_P(BlockOnEveryDevice, TransformerBlock) {
  checkTransformerBlock(*device, DType::f32, 1e-4, 1e-5);
}

// The half-precision model: each kernel rounds its result to f16
// (2^-11 relative), eleven of them in a chain, so the f16 row of the
// tolerance table with room for the chain.
TEST_P(BlockOnEveryDevice, TransformerBlockInHalfPrecision) {
  checkTransformerBlock(*device, DType::f16, 2e-2, 2e-2);
}

// A ResNet basic block in f16 against the same block computed in f32 from
// the same (f16-valued) parameters: two 3x3 convolutions with batch norms,
// ReLU and the residual, two kernels.
TEST_P(BlockOnEveryDevice, ResNetBlockInHalfPrecision) {
  const int64_t C = 16, S = 10;
  auto param = [&](Shape shape, float scale, float offset = 0.0f) {
    Tensor t = (Tensor::randn(shape, *device) * scale + offset).to(DType::f16);
    realize({t});
    return t;
  };
  Tensor x = param({2, C, S, S}, 1.0f);
  Tensor k1 = param({C, C, 3, 3}, 0.1f), k2 = param({C, C, 3, 3}, 0.1f);
  Tensor m1 = param({C}, 0.1f), v1 = param({C}, 0.1f, 1.0f), s1 = param({C}, 0.1f, 1.0f),
         t1 = param({C}, 0.1f);
  Tensor m2 = param({C}, 0.1f), v2 = param({C}, 0.1f, 1.0f), s2 = param({C}, 0.1f, 1.0f),
         t2 = param({C}, 0.1f);
  auto block = [&](auto c) {
    Tensor y = relu(batch_norm(conv2d(c(x), c(k1), {1, 1}, {1, 1}), c(m1), c(v1), c(s1), c(t1)));
    return relu(batch_norm(conv2d(y, c(k2), {1, 1}, {1, 1}), c(m2), c(v2), c(s2), c(t2)) + c(x));
  };
  Tensor half = block([](const Tensor &t) { return t; });
  EXPECT_EQ(half.dtype(), DType::f16);
  reset_stats();
  std::vector<float> got = half.to_vector<float>();
  EXPECT_EQ(stats().kernels_dispatched, 2u);
  std::vector<float> want = block([](const Tensor &t) { return t.to(DType::f32); }).to_vector<float>();
  EXPECT_TRUE(allClose(got, std::vector<double>(want.begin(), want.end()), 2e-2, 2e-2));
}

KILN_ON_EVERY_DEVICE(BlockOnEveryDevice);
} // namespace
