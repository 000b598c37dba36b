//===- FusionTest.cpp - kernel counts the fusion rules promise ------------===//
//
// Values read both by a contraction and by a later kernel's epilogue (the
// residuals of ResNet, MobileNet and pre-norm transformers): each is
// written once by its producers' kernel, so each graph takes the kernels
// named below, on every device, with the same values as the graph run one
// op at a time.

#include "TestUtil.h"

#include <functional>

using namespace kiln;
using kiln::test::allClose;

namespace {
class Fusion : public kiln::test::OnEveryDevice {
protected:
  /// Kernels `model` takes realized as one graph, after checking its values
  /// against the same model with every intermediate realized on its own.
  size_t kernelsOf(const std::function<Tensor(bool)> &model) {
    std::vector<float> stepwise = model(true).to_vector<float>();
    Tensor y = model(false);
    reset_stats();
    realize({y});
    size_t kernels = stats().kernels_dispatched;
    std::vector<double> want(stepwise.begin(), stepwise.end());
    EXPECT_TRUE(allClose(y.to_vector<float>(), want, 1e-5, 1e-5));
    return kernels;
  }
  Tensor input(Shape shape) {
    Tensor t = Tensor::randn(shape).to(*device);
    realize({t});
    return t;
  }
};

/// Realizes `t` when `eager`: the reference runs every step as its own graph.
Tensor step(Tensor t, bool eager) {
  if (eager)
    realize({t});
  return t;
}

TEST_P(Fusion, ResidualLinearIsThreeKernels) {
  Tensor x = input({8, 32}), w = input({32, 32}), w2 = input({32, 32}), c = input({32});
  auto model = [&](bool eager) {
    Tensor a = step(linear(x, w, c) + x, eager);
    return a + linear(step(linear(a, w2, c), eager), w, c);
  };
  EXPECT_EQ(kernelsOf(model), 3u);
}

TEST_P(Fusion, PreNormBlocksAreThreeKernels) {
  Tensor x = input({8, 32}), w = input({32, 32}), w2 = input({32, 32}), c = input({32});
  Tensor g = input({32}), b = input({32});
  auto withNorm = [&](std::function<Tensor(const Tensor &)> norm) {
    return [&, norm](bool eager) {
      Tensor h = step(norm(x), eager);
      return h + linear(step(linear(h, w, c), eager), w2, c);
    };
  };
  EXPECT_EQ(kernelsOf(withNorm([&](const Tensor &t) { return layer_norm(t, g, b); })), 3u);
  EXPECT_EQ(kernelsOf(withNorm([](const Tensor &t) { return softmax(t, -1); })), 3u);
}

TEST_P(Fusion, ResidualConvIsThreeKernels) {
  Tensor x = input({1, 8, 10, 10}), w1 = input({8, 8, 3, 3});
  Tensor w2 = input({8, 8, 1, 1}), w3 = input({8, 8, 1, 1});
  auto model = [&](bool eager) {
    Tensor b = step(conv2d(x, w1, {1, 1}, {1, 1}) + x, eager);
    return conv2d(step(conv2d(b, w2), eager), w3) + b;
  };
  EXPECT_EQ(kernelsOf(model), 3u);
}

TEST_P(Fusion, ConvReluReadTwiceIsNotRecomputed) {
  // MobileNet's inverted residual in small: the ReLU6 output feeds the
  // depthwise conv and nothing else, the block's input feeds the residual.
  Tensor x = input({1, 8, 12, 12}), expand = input({16, 8, 1, 1}), dw = input({16, 1, 3, 3});
  Tensor project = input({8, 16, 1, 1});
  Tensor six = Tensor::full({}, 6.0f, *device);
  auto model = [&](bool eager) {
    Tensor h = step(minimum(relu(conv2d(x, expand)), six), eager);
    Tensor d = step(minimum(relu(conv2d(h, dw, {1, 1}, {1, 1}, {1, 1}, 16)), six), eager);
    return conv2d(d, project) + x;
  };
  EXPECT_EQ(kernelsOf(model), 3u);
}

TEST_P(Fusion, ConcatFoldsIntoConvAndPool) {
  // The concat of channels is read by the convolution's gather and the
  // pool's sweep: one kernel each, never written.
  Tensor x = input({2, 8, 9, 20}), y = input({2, 5, 9, 20}), z = input({2, 3, 9, 20});
  Tensor w3 = input({16, 16, 3, 3}), w1 = input({24, 16, 1, 1}), bias = input({24, 1, 1});
  auto joined = [&](bool eager) { return step(concat({x, y, z}, 1), eager); };
  auto conv3 = [&](bool eager) { return conv2d(joined(eager), w3, {2, 1}, {1, 1}); };
  EXPECT_EQ(kernelsOf(conv3), 1u);
  auto conv1 = [&](bool eager) { return relu(conv2d(joined(eager), w1) + bias); };
  EXPECT_EQ(kernelsOf(conv1), 1u);
  auto pool = [&](bool eager) { return max_pool2d(joined(eager), {3, 3}, {2, 2}, {1, 1}); };
  EXPECT_EQ(kernelsOf(pool), 1u);
}

TEST_P(Fusion, FireModulesFoldTheirConcat) {
  // SqueezeNet: two fire modules and the pool between them. Each fire is
  // squeeze, expand 1x1, expand 3x3 (bias and ReLU in their epilogues); the
  // concat of the expands folds into the pool and into the classifier's
  // convolution: 3 + 1 + 3 + 1 kernels, not 3 + 1 + 1 + 3 + 1 + 1.
  struct Fire {
    Tensor ws, bs, we1, be1, we3, be3;
  };
  auto fire = [&](int64_t in, int64_t squeeze, int64_t expand) {
    return Fire{input({squeeze, in, 1, 1}),     input({squeeze, 1, 1}),
                input({expand, squeeze, 1, 1}), input({expand, 1, 1}),
                input({expand, squeeze, 3, 3}), input({expand, 1, 1})};
  };
  auto run = [](const Fire &f, const Tensor &v, bool eager) {
    Tensor s = step(relu(conv2d(v, f.ws) + f.bs), eager);
    Tensor e1 = step(relu(conv2d(s, f.we1) + f.be1), eager);
    Tensor e3 = step(relu(conv2d(s, f.we3, {1, 1}, {1, 1}) + f.be3), eager);
    return concat({e1, e3}, 1);
  };
  Tensor x = input({1, 16, 13, 13});
  Fire f1 = fire(16, 16, 16), f2 = fire(32, 16, 32);
  Tensor classifier = input({20, 64, 1, 1});
  auto model = [&](bool eager) {
    Tensor a = step(run(f1, x, eager), eager);
    Tensor p = step(max_pool2d(a, {3, 3}, {2, 2}, {0, 0}, true), eager);
    return relu(conv2d(step(run(f2, p, eager), eager), classifier));
  };
  EXPECT_EQ(kernelsOf(model), 8u);
}

KILN_ON_EVERY_DEVICE(Fusion);
} // namespace
