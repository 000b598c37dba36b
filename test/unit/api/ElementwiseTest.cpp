// End-to-end numerics: every elementwise op, broadcasting on odd and size-1
// shapes, comparisons and where, on every device, against float64.

#include "TestUtil.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace kiln;
using kiln::test::allClose;
using kiln::test::broadcastIndex;

namespace {
using UnaryFn = Tensor (*)(const Tensor &, std::source_location);

struct UnaryCase {
  const char *name;
  UnaryFn op;
  std::function<double(double)> ref;
  bool positiveInput;
};

double erfGelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

const UnaryCase unaryCases[] = {
    {"neg", neg, [](double x) { return -x; }, false},
    {"abs", kiln::abs, [](double x) { return std::abs(x); }, false},
    {"exp", kiln::exp, [](double x) { return std::exp(x); }, false},
    {"log", kiln::log, [](double x) { return std::log(x); }, true},
    {"sqrt", kiln::sqrt, [](double x) { return std::sqrt(x); }, true},
    {"rsqrt", rsqrt, [](double x) { return 1 / std::sqrt(x); }, true},
    {"tanh", kiln::tanh, [](double x) { return std::tanh(x); }, false},
    {"sigmoid", sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, false},
    {"relu", relu, [](double x) { return x > 0 ? x : 0; }, false},
    {"gelu", gelu, erfGelu, false},
    {"erf", kiln::erf, [](double x) { return std::erf(x); }, false},
    {"sin", kiln::sin, [](double x) { return std::sin(x); }, false},
    {"cos", kiln::cos, [](double x) { return std::cos(x); }, false},
    {"floor", kiln::floor, [](double x) { return std::floor(x); }, false},
    {"ceil", kiln::ceil, [](double x) { return std::ceil(x); }, false},
    {"round", kiln::round, [](double x) { return std::nearbyint(x); }, false},
};

class ElementwiseOnEveryDevice : public kiln::test::OnEveryDevice {};

std::vector<double> widen(const std::vector<float> &v) { return {v.begin(), v.end()}; }

TEST_P(ElementwiseOnEveryDevice, UnaryOpsMatchFloat64) {
  for (const UnaryCase &c : unaryCases) {
    for (Shape shape : {Shape{1}, Shape{7}, Shape{13, 1000}, Shape{1023}}) {
      Tensor x = c.positiveInput ? Tensor::rand(shape, *device) + 0.01f
                                 : Tensor::randn(shape, *device) * 3.0f;
      std::vector<float> xs = x.to_vector<float>();
      std::vector<double> want;
      for (float v : xs)
        want.push_back(c.ref(v));
      EXPECT_TRUE(allClose(c.op(x, std::source_location::current()).to_vector<float>(), want))
          << c.name << " on " << device->name() << " shape size " << shape.size();
    }
  }
}

// GELU over its whole range at the f32 tolerance (the erfc form is good to
// 1.5e-7 absolute), in the vector and the scalar layouts; NaN and the
// infinities as in PyTorch (gelu(-inf) is NaN there too).
TEST_P(ElementwiseOnEveryDevice, GeluMatchesTheErfFormAcrossItsRange) {
  for (int64_t n : {int64_t(4001), int64_t(4000)}) {
    std::vector<float> xs(n);
    for (int64_t i = 0; i < n; ++i)
      xs[i] = -12.0f + 24.0f * float(i) / float(n - 1);
    Tensor x = Tensor::from(xs, {n}, *device);
    std::vector<double> want;
    for (float v : xs)
      want.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    EXPECT_TRUE(allClose(gelu(x).to_vector<float>(), want)) << n << " elements";
  }
  std::vector<float> special = gelu(Tensor::from({NAN, INFINITY, -INFINITY, 0.0f}, {4}, *device))
                                   .to_vector<float>();
  EXPECT_TRUE(std::isnan(special[0]));
  EXPECT_EQ(special[1], INFINITY);
  EXPECT_TRUE(std::isnan(special[2]));
  EXPECT_EQ(special[3], 0.0f);
}

TEST_P(ElementwiseOnEveryDevice, BinaryOpsBroadcastLikeNumpy) {
  struct Case {
    const char *name;
    Tensor (*op)(const Tensor &, const Tensor &, std::source_location);
    double (*ref)(double, double);
  } cases[] = {
      {"add", add, [](double a, double b) { return a + b; }},
      {"sub", sub, [](double a, double b) { return a - b; }},
      {"mul", mul, [](double a, double b) { return a * b; }},
      {"div", kiln::div, [](double a, double b) { return a / b; }},
      {"maximum", maximum, [](double a, double b) { return std::max(a, b); }},
      {"minimum", minimum, [](double a, double b) { return std::min(a, b); }},
      {"pow", kiln::pow, [](double a, double b) { return std::pow(a, b); }},
  };
  std::pair<Shape, Shape> shapes[] = {
      {{7}, {7}},          {{13, 1}, {1, 7}},  {{1000}, {1}},   {{3, 1, 5}, {4, 1}},
      {{1}, {1023}},       {{}, {2, 3}},       {{1, 1}, {1}},
  };
  for (const Case &c : cases)
    for (auto &[sa, sb] : shapes) {
      // pow: a positive base keeps the reference real.
      Tensor a = Tensor::rand(sa, *device) + 0.5f;
      Tensor b = Tensor::randn(sb) ;
      Tensor r = c.op(a, b, std::source_location::current());
      std::vector<float> as = a.to_vector<float>(), bs = b.to_vector<float>();
      auto ia = broadcastIndex(sa, r.shape()), ib = broadcastIndex(sb, r.shape());
      std::vector<double> want(ia.size());
      for (size_t i = 0; i < want.size(); ++i)
        want[i] = c.ref(as[ia[i]], bs[ib[i]]);
      EXPECT_TRUE(allClose(r.to_vector<float>(), want)) << c.name;
    }
}

TEST_P(ElementwiseOnEveryDevice, ComparisonsAndWhere) {
  Tensor a = Tensor::randn({9, 13}, *device);
  Tensor b = Tensor::randn({13});
  std::vector<float> as = a.to_vector<float>(), bs = b.to_vector<float>();
  struct Case {
    Tensor (*op)(const Tensor &, const Tensor &, std::source_location);
    bool (*ref)(float, float);
  } cases[] = {{eq, [](float x, float y) { return x == y; }},
               {ne, [](float x, float y) { return x != y; }},
               {lt, [](float x, float y) { return x < y; }},
               {le, [](float x, float y) { return x <= y; }},
               {gt, [](float x, float y) { return x > y; }},
               {ge, [](float x, float y) { return x >= y; }}};
  // Equal elements exist so eq/ne/le/ge see both outcomes.
  Tensor aa = where(lt(a, Tensor::scalar(0.0f)), a, Tensor::full({13}, 0.0f));
  std::vector<float> aas = aa.to_vector<float>();
  for (const Case &c : cases) {
    Tensor m = c.op(aa, maximum(b, Tensor::scalar(0.0f)), std::source_location::current());
    EXPECT_EQ(m.dtype(), DType::boolean);
    std::vector<float> got = m.to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], c.ref(aas[i], std::max(bs[i % 13], 0.0f)) ? 1.0f : 0.0f) << i;
  }
  std::vector<double> want;
  for (size_t i = 0; i < as.size(); ++i)
    want.push_back(as[i] > bs[i % 13] ? as[i] : 2.0 * bs[i % 13]);
  EXPECT_TRUE(allClose(where(gt(a, b), a, b * 2.0f).to_vector<float>(), want));
}

TEST_P(ElementwiseOnEveryDevice, SixOpChainWithBroadcastIsOneKernel) {
  const int64_t rows = 257, cols = 1000;
  Tensor x = Tensor::randn({rows, cols}, *device);
  Tensor w = Tensor::randn({cols});
  Tensor b = Tensor::randn({rows, 1});
  // Six ops: mul, add (two broadcasts), tanh, sub, gelu, mul.
  Tensor y = gelu(kiln::tanh(x * w + b) - 0.25f) * x;
  reset_stats();
  std::vector<float> got = y.to_vector<float>();
  Stats s = stats();
  EXPECT_EQ(s.kernels_dispatched, 1u);
  EXPECT_EQ(s.graphs_compiled, 1u);
  std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>(),
                     bs = b.to_vector<float>();
  std::vector<double> want(got.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double xv = xs[r * cols + c];
      want[r * cols + c] = erfGelu(std::tanh(xv * ws[c] + bs[r]) - 0.25) * xv;
    }
  EXPECT_TRUE(allClose(got, want));
}

// pow at C's special values, as PyTorch gives them: GLSL's Pow leaves x < 0
// and x = 0 with y <= 0 undefined (lavapipe returned 0 for 0^0, 0^-1 and
// (-8)^(1/3)), so the GPU kernels add the cases around it.
TEST_P(ElementwiseOnEveryDevice, PowAtSpecialValuesAsInC) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const std::vector<float> xs = {0, -0.0f, 1, -1, 2, -2, 0.5f, -0.5f, inf, -inf, nan, -8, 3};
  const std::vector<float> ys = {0, -0.0f, 1, -1, 2, 3, -3, 0.5f, -0.5f, 1.0f / 3, inf, -inf, nan};
  std::vector<float> xv, yv;
  for (float x : xs)
    for (float y : ys) {
      xv.push_back(x);
      yv.push_back(y);
    }
  auto n = static_cast<int64_t>(xv.size());
  std::vector<float> got =
      kiln::pow(Tensor::from(xv, {n}, *device), Tensor::from(yv, {n}, *device)).to_vector<float>();
  ASSERT_EQ(got.size(), xv.size());
  for (size_t i = 0; i < got.size(); ++i) {
    float want = std::pow(xv[i], yv[i]);
    bool same = std::isnan(want) ? std::isnan(got[i])
                : std::isinf(want) || want == 0
                    ? got[i] == want && std::signbit(got[i]) == std::signbit(want)
                    : std::fabs(got[i] - want) <= 1e-6f * std::fabs(want);
    EXPECT_TRUE(same) << "pow(" << xv[i] << ", " << yv[i] << ") = " << got[i] << ", C says "
                      << want << " on " << device->name();
  }
}

TEST_P(ElementwiseOnEveryDevice, ScalarAndEmptyTensors) {
  Tensor s = Tensor::scalar(2.0f) * Tensor::scalar(3.0f, std::source_location::current());
  EXPECT_FLOAT_EQ(s.item<float>(), 6.0f);
  Tensor e = Tensor::zeros({0, 5}, *device) + 1.0f;
  EXPECT_TRUE(e.to_vector<float>().empty());
}

KILN_ON_EVERY_DEVICE(ElementwiseOnEveryDevice);
} // namespace
