// A program compiled ahead of time folds each batch norm whose parameters
// are weights into the convolution in front of it (the filter scaled per
// output channel, and a bias): the stored weights are the folded filter and
// bias, the batch norm's own four are gone, and the results match a
// float64 reference of the unfolded network. What cannot fold stays as
// written: a convolution another op reads too, parameters that are model
// inputs, a parameter viewed so that it broadcasts along other dimensions.
// The user's tensors keep computing what they wrote. An f16 model (weights
// realized in f16) folds too, its folded weights rounded once to f16.

#include "ReferenceOps.h"
#include "TestUtil.h"

#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace kiln;
using kiln::test::occurrences;

namespace {

struct BatchNorm {
  Tensor mean, var, gamma, beta;
  explicit BatchNorm(int64_t c)
      : mean(Tensor::randn({c}) * 0.1f), var(Tensor::rand({c}) * 0.5f + 0.75f),
        gamma(Tensor::rand({c}) * 0.5f + 0.75f), beta(Tensor::randn({c}) * 0.1f) {
    // Leaves of the graph (weights), as a model's loader makes them.
    for (Tensor *t : {&mean, &var, &gamma, &beta})
      *t = Tensor::from(t->to_vector(), t->shape());
  }
  Tensor operator()(const Tensor &x) const { return batch_norm(x, mean, var, gamma, beta); }
  /// y = (x - mean) / sqrt(var + 1e-5) * gamma + beta per channel, in double.
  void apply(kiln::test::Ref &y) const {
    std::vector<float> m = mean.to_vector(), v = var.to_vector(), g = gamma.to_vector(),
                       b = beta.to_vector();
    size_t plane = y.size() / size_t(y.dims[0] * y.dims[1]);
    for (size_t i = 0; i < y.size(); ++i) {
      size_t c = (i / plane) % m.size();
      y.v[i] = (y.v[i] - m[c]) / std::sqrt(double(v[c]) + 1e-5) * g[c] + b[c];
    }
  }
};

TEST(FoldBatchNorm, ProgramsFoldBatchNormsIntoTheirConvolutions) {
  manual_seed(5);
  Tensor x = Tensor::randn({1, 16, 12, 12});
  Tensor w1 = Tensor::from(Tensor::randn({32, 16, 3, 3}).to_vector(), {32, 16, 3, 3});
  Tensor w2 = Tensor::from(Tensor::randn({32, 32, 1, 1}).to_vector(), {32, 32, 1, 1});
  Tensor wd = Tensor::from(Tensor::randn({32, 1, 3, 3}).to_vector(), {32, 1, 3, 3});
  BatchNorm bn1(32), bn2(32), bnd(32);
  auto model = [&](const Tensor &in) {
    Tensor h = relu(bn1(conv2d(in, w1, {1, 1}, {1, 1})));
    h = relu6(bnd(conv2d(h, wd, {1, 1}, {1, 1}, {1, 1}, 32))); // depthwise
    return bn2(conv2d(h, w2, {1, 1}, {0, 0})) + h;
  };
  Program program = compile({model(x)}, {x}, {{"cpu"}, {"x"}});
  std::string described = program.describe("cpu");
  // Three filters folded (each with its bias), no batch-norm parameter left.
  EXPECT_EQ(occurrences(described, "with the batch norm at"), 3u) << described;
  EXPECT_EQ(occurrences(described, "bias of the batch norm"), 3u) << described;
  EXPECT_EQ(occurrences(described, "weight '"), 6u) << described;

  Tensor y = Tensor::randn({1, 16, 12, 12});
  std::vector<float> got = program.run({y})[0].to_vector();
  kiln::test::RefOps ops;
  kiln::test::Ref h = ops.conv2d(kiln::test::refOf(y), kiln::test::refOf(w1), 1, 1, 1);
  bn1.apply(h);
  for (double &v : h.v)
    v = std::max(v, 0.0);
  kiln::test::Ref d = ops.conv2d(h, kiln::test::refOf(wd), 1, 1, 32);
  bnd.apply(d);
  for (double &v : d.v)
    v = std::min(std::max(v, 0.0), 6.0);
  kiln::test::Ref z = ops.conv2d(d, kiln::test::refOf(w2), 1, 0, 1);
  bn2.apply(z);
  for (size_t i = 0; i < z.size(); ++i)
    z.v[i] += d.v[i];
  EXPECT_TRUE(kiln::test::allClose(got, z.v, 1e-4, 1e-4));
  // The JIT computes what the user wrote, after the compile as before.
  std::vector<float> jit = model(y).to_vector();
  EXPECT_TRUE(kiln::test::allClose(jit, z.v, 1e-4, 1e-4));
}

TEST(FoldBatchNorm, WhatCannotFoldStaysAsWritten) {
  manual_seed(6);
  Tensor x = Tensor::randn({1, 8, 6, 6});
  Tensor w = Tensor::from(Tensor::randn({8, 8, 3, 3}).to_vector(), {8, 8, 3, 3});
  BatchNorm bn(8);
  // The convolution is read by the batch norm and by the sum: folding would
  // compute it twice.
  Tensor c = conv2d(x, w, {1, 1}, {1, 1});
  Program shared = compile({bn(c) + c}, {x}, {{"cpu"}, {"x"}});
  EXPECT_EQ(occurrences(shared.describe("cpu"), "batch norm"), 0u) << shared.describe("cpu");
  // Statistics given at run time are not weights.
  Tensor mean = Tensor::from(std::vector<float>(8, 0.0f), {8});
  Program given = compile({batch_norm(conv2d(x, w, {1, 1}, {1, 1}), mean, bn.var, bn.gamma,
                                      bn.beta)},
                          {x, mean}, {{"cpu"}, {"x", "mean"}});
  EXPECT_EQ(occurrences(given.describe("cpu"), "batch norm"), 0u) << given.describe("cpu");

  // The batch norm's formula written out, but the mean viewed as [1, 8, 1]:
  // it broadcasts along the rows (8 of them), not the channels.
  Tensor x8 = Tensor::randn({1, 8, 8, 8});
  Tensor c8 = conv2d(x8, w, {1, 1}, {1, 1});
  Tensor scale = bn.gamma.reshape({8, 1, 1}) * rsqrt(bn.var.reshape({8, 1, 1}) + 1e-5f);
  Tensor rows = (c8 - bn.mean.reshape({1, 8, 1})) * scale + bn.beta.reshape({8, 1, 1});
  Program byRow = compile({rows}, {x8}, {{"cpu"}, {"x"}});
  EXPECT_EQ(occurrences(byRow.describe("cpu"), "batch norm"), 0u) << byRow.describe("cpu");
  {
    Tensor in = Tensor::randn({1, 8, 8, 8});
    kiln::test::RefOps ops;
    kiln::test::Ref r = ops.conv2d(kiln::test::refOf(in), kiln::test::refOf(w), 1, 1, 1);
    std::vector<float> mean = bn.mean.to_vector(), var = bn.var.to_vector(),
                       gamma = bn.gamma.to_vector(), beta = bn.beta.to_vector();
    for (size_t i = 0; i < r.size(); ++i) {
      size_t c = i / 64, h = (i / 8) % 8;
      r.v[i] = (r.v[i] - mean[h]) * gamma[c] / std::sqrt(double(var[c]) + 1e-5) + beta[c];
    }
    EXPECT_TRUE(kiln::test::allClose(byRow.run({in})[0].to_vector(), r.v, 1e-4, 1e-4));
  }

  Tensor y = Tensor::randn({1, 8, 6, 6}), m = Tensor::randn({8});
  kiln::test::RefOps ops;
  kiln::test::Ref ref = ops.conv2d(kiln::test::refOf(y), kiln::test::refOf(w), 1, 1, 1);
  kiln::test::Ref normed = ref;
  bn.apply(normed);
  std::vector<double> want(ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    want[i] = normed.v[i] + ref.v[i];
  EXPECT_TRUE(kiln::test::allClose(shared.run({y})[0].to_vector(), want, 1e-4, 1e-4));
  BatchNorm moved = bn;
  moved.mean = m;
  kiln::test::Ref other = ops.conv2d(kiln::test::refOf(y), kiln::test::refOf(w), 1, 1, 1);
  moved.apply(other);
  EXPECT_TRUE(kiln::test::allClose(given.run({y, m})[0].to_vector(), other.v, 1e-4, 1e-4));
}

} // namespace

// An f16 model's weights are realized casts: its batch norm folds into the
// convolution, the folded filter and bias rounded once to f16; the result
// stays within f16 rounding of the float64 reference of the unfolded block.
TEST(FoldBatchNorm, HalfPrecisionModelsFoldToo) {
  for (DType half : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(half == DType::f16 ? "f16" : "bf16");
    manual_seed(7);
    auto toHalf = [&](const Tensor &t) {
      Tensor h = t.to(half);
      realize({h});
      return h;
    };
    Tensor x = toHalf(Tensor::randn({1, 16, 10, 10}));
    Tensor w = toHalf(Tensor::from((Tensor::randn({32, 16, 3, 3}) * 0.1f).to_vector(), {32, 16, 3, 3}));
    BatchNorm bn(32);
    Tensor mean = toHalf(bn.mean), var = toHalf(bn.var), gamma = toHalf(bn.gamma),
           beta = toHalf(bn.beta);
    auto model = [&](const Tensor &in) {
      return relu(batch_norm(conv2d(in, w, {1, 1}, {1, 1}), mean, var, gamma, beta));
    };
    Program program = compile({model(x)}, {x}, {{"cpu"}, {"x"}});
    std::string described = program.describe("cpu");
    EXPECT_EQ(occurrences(described, "with the batch norm at"), 1u) << described;
    EXPECT_EQ(occurrences(described, "bias of the batch norm"), 1u) << described;

    Tensor y = toHalf(Tensor::randn({1, 16, 10, 10}));
    std::vector<float> got = program.run({y})[0].to_vector();
    // The reference reads the f16 values (inputs, filter, parameters) in double.
    kiln::test::RefOps ops;
    kiln::test::Ref r = ops.conv2d(kiln::test::refOf(y), kiln::test::refOf(w), 1, 1, 1);
    BatchNorm halves = bn;
    halves.mean = mean, halves.var = var, halves.gamma = gamma, halves.beta = beta;
    halves.apply(r);
    for (double &v : r.v)
      v = std::max(v, 0.0);
    // (bf16 keeps 8 bits: its results round to 2^-8 relative.)
    const double tolerance = half == DType::f16 ? 1e-2 : 4e-2;
    EXPECT_TRUE(kiln::test::allClose(got, r.v, tolerance, tolerance));
    EXPECT_TRUE(kiln::test::allClose(model(y).to_vector(), r.v, tolerance, tolerance));
    if (half == DType::bf16)
      continue;

    // A variance of 0 scales by gamma / sqrt(1e-5): 64 x 316 = 20240 per unit
    // of filter, past f16's 65504 for a filter value of 4. That batch norm
    // stays as written.
    Tensor big = toHalf(Tensor::from(std::vector<float>(32 * 16 * 9, 4.0f), {32, 16, 3, 3}));
    Tensor zero = toHalf(Tensor::from(std::vector<float>(32, 0.0f), {32}));
    Tensor scale = toHalf(Tensor::from(std::vector<float>(32, 64.0f), {32}));
    Program kept = compile({batch_norm(conv2d(x, big, {1, 1}, {1, 1}), zero, zero, scale, zero)},
                           {x}, {{"cpu"}, {"x"}});
    EXPECT_EQ(occurrences(kept.describe("cpu"), "batch norm"), 0u) << kept.describe("cpu");
  }
}
