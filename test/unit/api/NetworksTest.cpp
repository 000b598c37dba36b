//===- NetworksTest.cpp - whole networks against float64 ------------------===//
//
// ResNet-18, MobileNetV2, SqueezeNet 1.1 and a transformer encoder layer,
// each written once
// (examples/networks/Networks.h) and run on every device, reduced in width
// so the float64 reference (the same definitions over ReferenceOps.h) takes
// a moment. Each is compared with the reference and takes the number of
// kernels the fusion rules promise, counted below.
// bench/compare_networks.py runs the full-size networks against PyTorch.

#include "ReferenceOps.h"
#include "TestUtil.h"

#include "../../../examples/networks/KilnOps.h"

using namespace kiln;
using namespace kiln::networks;
using kiln::test::allClose;

namespace {
class Networks : public kiln::test::OnEveryDevice {
protected:
  void SetUp() override {
    OnEveryDevice::SetUp();
    if (!device)
      return;
    manual_seed(17);
    weights = std::make_shared<RandomWeights>(*device);
    ops.weight = [w = weights](const std::string &n, const Shape &s) { return (*w)(n, s); };
    ref.weight = ops.weight;
  }
  Tensor input(Shape shape) {
    Tensor t = Tensor::randn(shape);
    return Tensor::from(t.to_vector(), shape, *device);
  }
  /// Realizes `y`, checks it against `want` and returns its kernel count.
  size_t check(const Tensor &y, const kiln::test::Ref &want, double tolerance) {
    reset_stats();
    realize({y});
    size_t kernels = stats().kernels_dispatched;
    EXPECT_EQ(y.shape(), want.shape());
    EXPECT_TRUE(allClose(y.to_vector<float>(), want.v, tolerance, tolerance));
    return kernels;
  }
  std::shared_ptr<RandomWeights> weights;
  KilnOps ops;
  kiln::test::RefOps ref;
};

TEST_P(Networks, ResNet18) {
  ResNetConfig c{8, 10};
  Tensor x = input({2, 3, 32, 32});
  // 20 convolutions (bias, batch norm, ReLU and the residual add in their
  // epilogues), the max pooling, the global average and the classifier.
  EXPECT_EQ(check(resnet18(ops, x, c), resnet18(ref, kiln::test::refOf(x), c), 1e-4), 23u);
}

TEST_P(Networks, MobileNetV2) {
  MobileNetConfig c{0.25, 10};
  Tensor x = input({1, 3, 32, 32});
  // 52 convolutions (batch norm, ReLU6 and the residual add in their
  // epilogues), the global average and the classifier.
  EXPECT_EQ(check(mobilenet_v2(ops, x, c), mobilenet_v2(ref, kiln::test::refOf(x), c), 1e-4),
            54u);
}

TEST_P(Networks, SqueezeNet11) {
  Tensor x = input({1, 3, 64, 64});
  // The stem and 24 fire convolutions (bias and ReLU in their epilogues;
  // each fire's concat folds into the pool or convolution that reads it),
  // three ceil-mode pools, the classifier's convolution, its bias, ReLU and
  // global average as one reduction, and the flatten of that [1, 1000, 1,
  // 1] result, an output, as a copy of its own. (With 10 classes, under
  // the 16 filters a concat folds into, the last concat stays a kernel of
  // its own, with the expands' epilogues: 32 kernels.)
  EXPECT_EQ(
      check(squeezenet1_1(ops, x, 1000), squeezenet1_1(ref, kiln::test::refOf(x), 1000), 1e-4),
      31u);
}

TEST_P(Networks, TransformerEncoderLayer) {
  EncoderConfig c{64, 4, 128};
  Tensor x = input({2, 10, 64});
  // The QKV projection, attention, the output projection with the
  // residual, layer norm, two feed-forward linears and layer norm:
  // attention is one kernel on the CPU, three (scores, softmax, product)
  // elsewhere.
  const bool cpu = device->name().rfind("cpu", 0) == 0;
  EXPECT_EQ(check(encoder_layer(ops, x, c), encoder_layer(ref, kiln::test::refOf(x), c), 1e-4),
            cpu ? 7u : 9u);
}
} // namespace

KILN_ON_EVERY_DEVICE(Networks);
