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
  Tensor ls = log_softmax(x, 1);
  reset_stats();
  EXPECT_TRUE(allClose(ls.to_vector<float>(), logSoft, 1e-4, 1e-5));
  EXPECT_EQ(stats().kernels_dispatched, 1u) << "log-softmax is one row kernel";
  EXPECT_TRUE(allClose(var(x, {1}).to_vector<float>(), variance, 1e-4));
}

// Far from zero the f32 mean's rounding is as large as the spread: 1e8 +
// [1, 3, 5, 7] is [1e8, 1e8, 1e8 + 8, 1e8 + 8] in f32, variance 21.33 (not
// the 42.67 an unshifted two-pass gave), as PyTorch's Welford gives it.
TEST_P(ReduceOnEveryDevice, VarianceFarFromZero) {
  std::vector<float> xs;
  for (float offset : {1e8f, -3e7f, 5e5f})
    for (float d : {1.0f, 3.0f, 5.0f, 7.0f})
      xs.push_back(offset + d);
  Tensor x = Tensor::from(xs, {3, 4}, *device);
  auto reference = [&](int64_t rowBegin, int64_t rowEnd) {
    double mu = 0, v = 0;
    int64_t n = (rowEnd - rowBegin) * 4;
    for (int64_t i = rowBegin * 4; i < rowEnd * 4; ++i)
      mu += xs[i] / double(n);
    for (int64_t i = rowBegin * 4; i < rowEnd * 4; ++i)
      v += (xs[i] - mu) * (xs[i] - mu);
    return v / double(n - 1);
  };
  std::vector<double> rows = {reference(0, 1), reference(1, 2), reference(2, 3)};
  EXPECT_NEAR(rows[0], 21.3333, 1e-3);
  EXPECT_TRUE(allClose(var(x, {1}).to_vector<float>(), rows, 1e-5));
  EXPECT_TRUE(allClose(var(x, {-1}, true).to_vector<float>(), rows, 1e-5));
  EXPECT_TRUE(allClose(var(x).to_vector<float>(), {reference(0, 3)}, 1e-5));
  EXPECT_TRUE(allClose(var(x, {0, 1}).to_vector<float>(), {reference(0, 3)}, 1e-5));
}

TEST_P(ReduceOnEveryDevice, ArgmaxAndArgmin) {
  // Ties and NaN: the first maximum wins; NaN beats every number.
  std::vector<float> xs = {1, 5, 5, 2,   -1, -7, 3, -7,   0, NAN, 9, NAN};
  Tensor x = Tensor::from(xs, {3, 4}, *device);
  EXPECT_EQ(argmax(x, 1).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 1}));
  EXPECT_EQ(argmin(x, 1).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(argmax(x, 0, true).shape(), (Shape{1, 4}));
  EXPECT_EQ(argmax(x, 0).to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 2, 2}));
  EXPECT_EQ(argmax(x).item<int32_t>(), 9); // flattened: the first NaN
  EXPECT_EQ(argmax(x).dtype(), DType::i32);
  // Random rows against the reference.
  Tensor r = Tensor::randn({37, 1023}, *device);
  std::vector<float> rs = r.to_vector<float>();
  std::vector<int32_t> got = argmin(r, -1).to_vector<int32_t>();
  for (int i = 0; i < 37; ++i)
    EXPECT_EQ(got[i], int32_t(std::min_element(rs.begin() + i * 1023, rs.begin() + (i + 1) * 1023) -
                            (rs.begin() + i * 1023)));
}

KILN_ON_EVERY_DEVICE(ReduceOnEveryDevice);

TEST(Reduce, BadAxesAreErrors) {
  Tensor x = Tensor::zeros({4, 3});
  EXPECT_THROW(sum(x, {2}), Error);
  EXPECT_THROW(sum(x, {0, -2}), Error);
  EXPECT_THROW(amax(Tensor::zeros({4, 0}), {1}), Error); // no identity (sum: 0)
  EXPECT_THROW(var(Tensor::zeros({4, 1}), {1}), Error);
  // The error names the op the user called, not the one it is made of.
  auto message = [](const std::function<void()> &f) {
    try {
      f();
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { softmax(x, 5); }).find("softmax: dimension 5"), std::string::npos);
  EXPECT_NE(message([&] { var(x, {1, 1}); }).find("var: axes [1, 1]"), std::string::npos);
  EXPECT_EQ(sum(x, {0}, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(sum(x).shape(), Shape{});
}
} // namespace

// softmax and layer norm are one kernel each at every width: narrow rows (a
// work item per row), rows that fit in registers (a workgroup per row, the
// last chunk partial) and rows too wide for that (a loop over chunks).
TEST_P(ReduceOnEveryDevice, SoftmaxAndLayerNormAreOneKernelAtEveryWidth) {
  for (int64_t width : {1, 7, 13, 129, 1000, 1023, 3000}) {
    const int64_t rows = 5;
    Tensor x = Tensor::randn({rows, width}, *device) * 2.0f;
    Tensor g = Tensor::randn({width}, *device) * 0.1f + 1.0f;
    Tensor b = Tensor::randn({width}, *device) * 0.1f;
    realize({x, g, b});
    std::vector<float> xs = x.to_vector<float>(), gs = g.to_vector<float>(),
                       bs = b.to_vector<float>();
    std::vector<double> soft, norm;
    for (int64_t i = 0; i < rows; ++i) {
      const float *row = &xs[i * width];
      double m = -INFINITY, s = 0, mu = 0, v = 0;
      for (int64_t j = 0; j < width; ++j) {
        m = std::max(m, double(row[j]));
        mu += row[j];
      }
      mu /= width;
      for (int64_t j = 0; j < width; ++j) {
        s += std::exp(row[j] - m);
        v += (row[j] - mu) * (row[j] - mu);
      }
      v /= width;
      for (int64_t j = 0; j < width; ++j) {
        soft.push_back(std::exp(row[j] - m) / s);
        norm.push_back((row[j] - mu) / std::sqrt(v + 1e-5) * gs[j] + bs[j]);
      }
    }
    Tensor p = softmax(x, -1), y = layer_norm(x, g, b, 1e-5f);
    reset_stats();
    std::vector<float> gotSoft = p.to_vector<float>();
    EXPECT_EQ(stats().kernels_dispatched, 1u) << "softmax, width " << width;
    reset_stats();
    std::vector<float> gotNorm = y.to_vector<float>();
    EXPECT_EQ(stats().kernels_dispatched, 1u) << "layer norm, width " << width;
    EXPECT_TRUE(allClose(gotSoft, soft, 1e-4, 1e-7)) << "softmax, width " << width;
    EXPECT_TRUE(allClose(gotNorm, norm, 1e-4, 1e-4)) << "layer norm, width " << width;
  }
}

// Many rows, in f32 and f16: rows of whole 4-column groups are read and
// written 4 columns at a time (the residual too), and rows a subgroup covers
// go several to a workgroup, the last workgroup partly empty (1027 rows).
TEST_P(ReduceOnEveryDevice, ManyRowsInGroupsOfColumns) {
  const int64_t rows = 1027;
  for (DType dtype : {DType::f32, DType::f16})
    for (int64_t width : {8, 40, 100, 128, 512}) {
      Tensor x = (Tensor::randn({rows, width}, *device) * 2.0f).to(dtype);
      Tensor r = Tensor::randn({rows, width}, *device).to(dtype);
      Tensor g = (Tensor::randn({width}, *device) * 0.1f + 1.0f).to(dtype);
      realize({x, r, g});
      std::vector<float> xs = x.to_vector<float>(), rs = r.to_vector<float>(),
                         gs = g.to_vector<float>();
      std::vector<double> soft, norm;
      for (int64_t i = 0; i < rows; ++i) {
        double m = -INFINITY, s = 0, mu = 0, v = 0;
        std::vector<double> h(width);
        for (int64_t j = 0; j < width; ++j) {
          h[j] = double(xs[i * width + j]) + rs[i * width + j];
          m = std::max(m, double(xs[i * width + j]));
          mu += h[j] / width;
        }
        for (int64_t j = 0; j < width; ++j) {
          s += std::exp(xs[i * width + j] - m);
          v += (h[j] - mu) * (h[j] - mu) / width;
        }
        for (int64_t j = 0; j < width; ++j) {
          soft.push_back(std::exp(xs[i * width + j] - m) / s);
          norm.push_back((h[j] - mu) / std::sqrt(v + 1e-5) * gs[j]);
        }
      }
      Tensor b = Tensor::zeros_like(g);
      std::vector<float> gotSoft = softmax(x, -1).to_vector<float>();
      std::vector<float> gotNorm = layer_norm(x + r, g, b, 1e-5f).to_vector<float>();
      // f16 results: 2^-11 relative rounding, f16 residual sums.
      double tol = dtype == DType::f16 ? 4e-3 : 1e-4;
      EXPECT_TRUE(allClose(gotSoft, soft, tol, 1e-6)) << "softmax, width " << width;
      EXPECT_TRUE(allClose(gotNorm, norm, tol, 2 * tol)) << "layer norm, width " << width;
    }
}

// Over a leading axis the reduced elements are strided: still one kernel.
TEST_P(ReduceOnEveryDevice, SoftmaxOverALeadingAxis) {
  Tensor x = Tensor::randn({257, 6}, *device);
  std::vector<float> xs = x.to_vector<float>();
  std::vector<double> want(xs.size());
  for (int j = 0; j < 6; ++j) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < 257; ++i)
      m = std::max(m, double(xs[i * 6 + j]));
    for (int i = 0; i < 257; ++i)
      s += std::exp(xs[i * 6 + j] - m);
    for (int i = 0; i < 257; ++i)
      want[i * 6 + j] = std::exp(xs[i * 6 + j] - m) / s;
  }
  Tensor p = softmax(x, 0);
  reset_stats();
  std::vector<float> got = p.to_vector<float>();
  EXPECT_EQ(stats().kernels_dispatched, 1u);
  EXPECT_TRUE(allClose(got, want, 1e-4, 1e-7));
}

// NaN anywhere in a row makes its max (and its softmax) NaN, as in PyTorch,
// including when it sits in another work item's columns than the maximum.
TEST_P(ReduceOnEveryDevice, MaxPropagatesNaNAcrossWorkItems) {
  std::vector<float> xs(3 * 700);
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = float(i % 97) * 0.01f;
  xs[1 * 700 + 613] = NAN;
  Tensor x = Tensor::from(xs, {3, 700}, *device);
  std::vector<float> m = amax(x, {1}).to_vector<float>();
  EXPECT_FALSE(std::isnan(m[0]));
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_FALSE(std::isnan(m[2]));
  std::vector<float> p = softmax(x, -1).to_vector<float>();
  EXPECT_TRUE(std::isnan(p[700 + 5]));
  EXPECT_FALSE(std::isnan(p[5]));
}

// More rows than a grid dimension holds on many GPUs (65535): the row
// kernel's workgroups spread over a second grid dimension, the last ones
// idle.
TEST_P(ReduceOnEveryDevice, MoreRowsThanOneGridDimension) {
  const int64_t rows = 70001, cols = 40;
  Tensor x = Tensor::rand({rows, cols}, *device);
  std::vector<float> xs = x.to_vector<float>();
  std::vector<float> got = softmax(x, -1).to_vector<float>();
  ASSERT_EQ(got.size(), xs.size());
  for (int64_t i : {int64_t(0), int64_t(65535), int64_t(65536), rows - 1}) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < cols; ++j)
      m = std::max(m, double(xs[i * cols + j]));
    for (int64_t j = 0; j < cols; ++j)
      s += std::exp(xs[i * cols + j] - m);
    for (int64_t j = 0; j < cols; ++j)
      ASSERT_NEAR(got[i * cols + j], std::exp(xs[i * cols + j] - m) / s, 1e-6) << "row " << i;
  }
}

// Reducing an empty dimension, as in PyTorch: sum 0, prod 1, mean NaN; max
// and min have no value and say so.
TEST_P(ReduceOnEveryDevice, EmptyDimensionsGiveTheIdentity) {
  Tensor x = Tensor::rand({3, 0, 2}, *device);
  EXPECT_EQ(sum(x, {1}).to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(prod(x, {1}, true).to_vector<float>(), std::vector<float>(6, 1.0f));
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{3, 1, 2}));
  for (float m : mean(x, {1}).to_vector<float>())
    EXPECT_TRUE(std::isnan(m));
  EXPECT_EQ(sum(x).to_vector<float>(), std::vector<float>{0.0f});
  try {
    amax(x, {1});
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("has no identity"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(argmin(x, 1), Error);
  // Reducing the non-empty axis keeps the empty one: an empty result.
  EXPECT_EQ(sum(x, {2}).numel(), 0);
}
