// Reductions on every device against a float64 reference: every kind, axes
// sets with and without keepdims, odd and size-1 shapes; prologue fusion;
// softmax, log-softmax and variance built from them.

#include "TestUtil.h"

#include <functional>
#include <numeric>

using namespace kiln;
using kiln::test::allClose;

namespace {
class ReduceOnEveryDevice : public kiln::test::OnEveryDevice {};

/// The float64 reduction of `xs` (of `shape`) over sorted `axes`.
std::vector<double> reference(const std::vector<float> &xs, const Shape &shape,
                              const std::vector<int64_t> &axes, const std::string &kind) {
  Shape outShape;
  for (size_t d = 0; d < shape.size(); ++d)
    outShape.push_back(std::count(axes.begin(), axes.end(), int64_t(d)) ? 1 : shape[d]);
  int64_t outCount = std::accumulate(outShape.begin(), outShape.end(), int64_t(1),
                                     std::multiplies<>());
  double init = kind == "max" ? -INFINITY : kind == "min" ? INFINITY : kind == "prod" ? 1 : 0;
  std::vector<double> out(outCount, init);
  std::vector<int64_t> counts(outCount, 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      int64_t c = rest % shape[d];
      rest /= shape[d];
      if (outShape[d] != 1)
        o += c * stride;
      stride *= outShape[d];
    }
    double v = xs[i];
    double &acc = out[o];
    acc = kind == "max" ? std::max(acc, v) : kind == "min" ? std::min(acc, v)
        : kind == "prod" ? acc * v : acc + v;
    ++counts[o];
  }
  if (kind == "mean")
    for (int64_t o = 0; o < outCount; ++o)
      out[o] /= counts[o];
  return out;
}

TEST_P(ReduceOnEveryDevice, EveryKindAxesAndShape) {
  using Fn = Tensor (*)(const Tensor &, std::vector<int64_t>, bool, std::source_location);
  std::pair<const char *, Fn> kinds[] = {{"sum", sum}, {"mean", mean}, {"max", amax},
                                         {"min", amin}, {"prod", prod}};
  std::pair<Shape, std::vector<int64_t>> cases[] = {
      {{7, 13}, {1}},   {{7, 13}, {0}},    {{1000}, {0}},     {{1023}, {}},
      {{3, 1, 5}, {0, 2}}, {{1}, {0}},     {{13, 1000}, {-1}}, {{4, 6, 5}, {1}},
  };
  for (auto [kind, fn] : kinds)
    for (auto &[shape, axes] : cases)
      for (bool keepdims : {false, true}) {
        // prod: values near 1 keep the product finite.
        Tensor x = std::string(kind) == "prod" ? Tensor::randn(shape, *device) * 0.05f + 1.0f
                                               : Tensor::rand(shape, *device) + 0.5f;
        Tensor r = fn(x, axes, keepdims, std::source_location::current());
        std::vector<int64_t> sorted = axes;
        if (sorted.empty())
          for (size_t d = 0; d < shape.size(); ++d)
            sorted.push_back(d);
        for (int64_t &a : sorted)
          a = a < 0 ? a + shape.size() : a;
        std::vector<double> want = reference(x.to_vector<float>(), shape, sorted, kind);
        int64_t reduced = x.numel() / int64_t(want.size());
        EXPECT_TRUE(allClose(r.to_vector<float>(), want, 1e-5 * std::max(1.0, std::sqrt(reduced))))
            << kind << " over " << sorted.size() << " axes of a rank-" << shape.size()
            << " tensor, keepdims " << keepdims;
        EXPECT_EQ(r.numel(), int64_t(want.size()));
      }
}

TEST_P(ReduceOnEveryDevice, PrologueFusesIntoTheReduction) {
  Tensor x = Tensor::randn({37, 129}, *device);
  Tensor w = Tensor::randn({129});
  Tensor r = sum(kiln::exp(x * w) * 0.5f, {1});
  reset_stats();
  std::vector<float> got = r.to_vector<float>();
  EXPECT_EQ(stats().kernels_dispatched, 1u);
  std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>();
  std::vector<double> want(37, 0);
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 129; ++j)
      want[i] += 0.5 * std::exp(double(xs[i * 129 + j]) * ws[j]);
  EXPECT_TRUE(allClose(got, want, 1e-4));
}

TEST_P(ReduceOnEveryDevice, SoftmaxLogSoftmaxAndVariance) {
  Tensor x = Tensor::randn({9, 1000}, *device) * 3.0f;
  std::vector<float> xs = x.to_vector<float>();
  std::vector<double> soft, logSoft, variance;
  for (int i = 0; i < 9; ++i) {
    double m = -INFINITY, s = 0, mu = 0, v = 0;
    for (int j = 0; j < 1000; ++j)
      m = std::max(m, double(xs[i * 1000 + j]));
    for (int j = 0; j < 1000; ++j) {
      s += std::exp(xs[i * 1000 + j] - m);
      mu += xs[i * 1000 + j] / 1000.0;
    }
    for (int j = 0; j < 1000; ++j) {
      soft.push_back(std::exp(xs[i * 1000 + j] - m) / s);
      logSoft.push_back(xs[i * 1000 + j] - m - std::log(s));
      v += (xs[i * 1000 + j] - mu) * (xs[i * 1000 + j] - mu);
    }
    variance.push_back(v / 999.0);
  }
  EXPECT_TRUE(allClose(softmax(x).to_vector<float>(), soft, 1e-4, 1e-7));
  EXPECT_TRUE(allClose(log_softmax(x, 1).to_vector<float>(), logSoft, 1e-4, 1e-5));
  EXPECT_TRUE(allClose(var(x, {1}).to_vector<float>(), variance, 1e-4));
}

TEST_P(ReduceOnEveryDevice, ArgmaxAndArgmin) {
  // Ties and NaN: the first maximum wins; NaN beats every number.
  std::vector<float> xs = {1, 5, 5, 2,   -1, -7, 3, -7,   0, NAN, 9, NAN};
  Tensor x = Tensor::from(xs, {3, 4}, *device);
  EXPECT_EQ(argmax(x, 1).to_vector<float>(), (std::vector<float>{1, 2, 1}));
  EXPECT_EQ(argmin(x, 1).to_vector<float>(), (std::vector<float>{0, 1, 1}));
  EXPECT_EQ(argmax(x, 0, true).shape(), (Shape{1, 4}));
  EXPECT_EQ(argmax(x, 0).to_vector<float>(), (std::vector<float>{0, 2, 2, 2}));
  EXPECT_EQ(argmax(x).item<float>(), 9.0f); // flattened: the first NaN
  EXPECT_EQ(argmax(x).dtype(), DType::i32);
  // Random rows against the reference.
  Tensor r = Tensor::randn({37, 1023}, *device);
  std::vector<float> rs = r.to_vector<float>(), got = argmin(r, -1).to_vector<float>();
  for (int i = 0; i < 37; ++i)
    EXPECT_EQ(got[i], float(std::min_element(rs.begin() + i * 1023, rs.begin() + (i + 1) * 1023) -
                            (rs.begin() + i * 1023)));
}

KILN_ON_EVERY_DEVICE(ReduceOnEveryDevice);

TEST(Reduce, BadAxesAreErrors) {
  Tensor x = Tensor::zeros({4, 3});
  EXPECT_THROW(sum(x, {2}), Error);
  EXPECT_THROW(sum(x, {0, -2}), Error);
  EXPECT_THROW(sum(Tensor::zeros({4, 0}), {1}), Error);
  EXPECT_THROW(var(Tensor::zeros({4, 1}), {1}), Error);
  EXPECT_EQ(sum(x, {0}, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(sum(x).shape(), Shape{});
}
} // namespace
