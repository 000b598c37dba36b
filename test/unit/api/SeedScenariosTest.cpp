// The scenarios of the two seed documents (../shared/seeds), replayed in
// Kiln's API. Where Kiln's rules remove the bug, the program runs and is
// checked against float64; where the devices really differ, it fails before
// any kernel is compiled with the full diagnostic, then runs after the fix
// the diagnostic suggests. Two logical devices come from
// KILN_VIRTUAL_DEVICES=2 (set by the test main).

#include "TestUtil.h"

using namespace kiln;
using kiln::test::allClose;

namespace {
/// Runs `read`, expects a DeviceMismatchError before any compilation, and
/// returns it.
template <typename Read> DeviceMismatchError expectMismatch(Read read) {
  reset_stats();
  try {
    read();
  } catch (const DeviceMismatchError &error) {
    EXPECT_EQ(stats().kernels_compiled, 0u) << "a kernel was compiled before the check";
    EXPECT_EQ(stats().kernels_dispatched, 0u);
    return error;
  }
  ADD_FAILURE() << "expected a DeviceMismatchError";
  return DeviceMismatchError("", {});
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

std::vector<double> linearRef(const std::vector<float> &x, const std::vector<float> &w,
                              const std::vector<float> &b, int64_t n) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = std::max(0.0, double(x[i]) * w[i % n] + b[i % n]);
  return out;
}

// Burn: Device::default() ("backend: Auto") and Device::metal() were two
// handles for one GPU that compared unequal, so `a + b` panicked. In Kiln
// both spellings resolve to the same device first.
TEST(SeedBurn, DefaultAndExplicitlyNamedDeviceAreTheSameDevice) {
  KILN_REQUIRE_DEVICES(1u);
  Device byDefault = Device::default_device();
  Device byName = Device::parse(byDefault.name()); // "cpu:0" or "vulkan:N"
  ASSERT_EQ(byDefault, byName);
  EXPECT_NE(byDefault.written(), byName.written());
  Tensor a = Tensor::randn({5, 7}, byDefault);
  Tensor b = Tensor::randn({5, 7}, byName);
  std::vector<float> as = a.to_vector<float>(), bs = b.to_vector<float>();
  std::vector<double> want;
  for (size_t i = 0; i < as.size(); ++i)
    want.push_back(double(as[i]) + bs[i]);
  EXPECT_TRUE(allClose((a + b).to_vector<float>(), want));
}

// Burn: Tensor::from(...) silently used the default device next to a
// tensor on an explicit one. In Kiln it is uncommitted and follows.
TEST(SeedBurn, TensorFromWithoutDeviceFollowsTheExplicitOne) {
  KILN_REQUIRE_DEVICES(3u);
  Tensor weights = Tensor::randn({3, 4}, Device::vulkan(1));
  Tensor data = Tensor::from({1, 2, 3, 4}, {4});
  Tensor y = weights * data;
  std::vector<float> ws = weights.to_vector<float>();
  std::vector<double> want;
  for (size_t i = 0; i < ws.size(); ++i)
    want.push_back(double(ws[i]) * double(i % 4 + 1));
  EXPECT_TRUE(allClose(y.to_vector<float>(), want));
  EXPECT_EQ(y.device(), Device::vulkan(1));
}

// PyTorch cause 1: the model was moved to the GPU but the input was not.
TEST(SeedPyTorch, ModelOnOneDeviceInputOnAnother) {
  KILN_REQUIRE_DEVICES(3u);
  Device gpu = Device::vulkan(0);
  Tensor w = Tensor::randn({16}, gpu), b = Tensor::randn({16}, gpu);
  unsigned inputLine = __LINE__ + 1;
  Tensor input = Tensor::randn({8, 16}, Device::vulkan(1));
  unsigned useLine = __LINE__ + 1;
  Tensor out = relu(input * w + b);
  DeviceMismatchError error = expectMismatch([&] { (void)out.to_vector<float>(); });
  ASSERT_EQ(error.conflicts().size(), 1u) << error.what();
  const DeviceConflict &c = error.conflicts()[0];
  EXPECT_EQ(c.op, "mul");
  EXPECT_EQ(c.location.line, useLine);
  EXPECT_EQ(c.operands[0].device, "vulkan:1");
  EXPECT_EQ(c.operands[0].committedAt.line, inputLine);
  EXPECT_EQ(c.operands[1].device, "vulkan:0");
  EXPECT_TRUE(contains(error.what(), "SeedScenariosTest.cpp:" + std::to_string(useLine)))
      << error.what();
  // The model (two tensors) lives on vulkan:0: the fix moves the input.
  EXPECT_TRUE(contains(c.fix, "fix: move a to \"vulkan:0\" with `.to(b.device())`")) << c.fix;

  // The fix: move the input to the model's device.
  Tensor fixed = relu(input.to(w.device()) * w + b);
  EXPECT_TRUE(allClose(fixed.to_vector<float>(),
                       linearRef(input.to_vector<float>(), w.to_vector<float>(),
                                 b.to_vector<float>(), 16)));
}

// PyTorch cause 2: labels left on the host device in the training loop.
TEST(SeedPyTorch, LabelsLeftBehind) {
  KILN_REQUIRE_DEVICES(3u);
  Device gpu = Device::vulkan(1), host = Device::vulkan(0);
  Tensor prediction = sigmoid(Tensor::randn({32}, gpu));
  Tensor labels = Tensor::rand({32}, host);
  Tensor diff = prediction - labels;
  Tensor loss = diff * diff;
  DeviceMismatchError error = expectMismatch([&] { (void)loss.to_vector<float>(); });
  // One conflict (the subtraction), not a cascade through the square.
  ASSERT_EQ(error.conflicts().size(), 1u) << error.what();
  EXPECT_EQ(error.conflicts()[0].op, "sub");
  EXPECT_TRUE(contains(error.what(), "(128 bytes to transfer)")) << error.what();

  Tensor fixedDiff = prediction - labels.to(gpu);
  Tensor fixed = fixedDiff * fixedDiff;
  std::vector<float> p = prediction.to_vector<float>(), l = labels.to_vector<float>();
  std::vector<double> want;
  for (size_t i = 0; i < p.size(); ++i)
    want.push_back((double(p[i]) - l[i]) * (double(p[i]) - l[i]));
  EXPECT_TRUE(allClose(fixed.to_vector<float>(), want));
}

// PyTorch cause 3: a tensor made inside a custom layer without a device
// (torch.ones(n) lands on the CPU). In Kiln it follows the layer's input.
TEST(SeedPyTorch, MaskMadeInsideALayerFollowsItsInput) {
  KILN_REQUIRE_DEVICES(3u);
  auto layer = [](const Tensor &x) {
    Tensor mask = Tensor::full({x.shape().back()}, 1.0f); // no device
    Tensor keep = gt(x, Tensor::scalar(0.0f));
    return where(keep, x * mask, Tensor::zeros_like(x));
  };
  Tensor x = Tensor::randn({6, 10}, Device::vulkan(1));
  Tensor y = layer(x);
  std::vector<float> xs = x.to_vector<float>();
  std::vector<double> want;
  for (float v : xs)
    want.push_back(v > 0 ? v : 0.0);
  EXPECT_TRUE(allClose(y.to_vector<float>(), want));
  EXPECT_EQ(y.device(), Device::vulkan(1));
}

// PyTorch cause 4: numpy arrays converted to tensors land on the CPU. In
// Kiln host data is uncommitted and follows.
TEST(SeedPyTorch, HostArraysFollowTheDeviceTheyMeet) {
  KILN_REQUIRE_DEVICES(3u);
  std::vector<float> fromNumpy = {0.5f, -1.0f, 2.0f};
  Tensor scale = Tensor::from(fromNumpy, {3});
  Tensor x = Tensor::randn({4, 3}, Device::vulkan(1));
  std::vector<float> got = (x * scale).to_vector<float>(), xs = x.to_vector<float>();
  std::vector<double> want;
  for (size_t i = 0; i < xs.size(); ++i)
    want.push_back(double(xs[i]) * fromNumpy[i % 3]);
  EXPECT_TRUE(allClose(got, want));
}

// PyTorch, several GPUs: a hard-coded "cuda:1" next to tensors on "cuda:0".
TEST(SeedPyTorch, TwoLogicalGpus) {
  KILN_REQUIRE_DEVICES(3u);
  Tensor a = Tensor::randn({128}, Device::parse("vulkan:0"));
  Tensor b = Tensor::randn({128}, Device::parse("vulkan:1")); // hard-coded
  Tensor c = exp(a) + b;
  Tensor d = a * b;
  DeviceMismatchError error = expectMismatch([&] { realize({c, d}); });
  ASSERT_EQ(error.conflicts().size(), 2u) << error.what();
  EXPECT_EQ(error.conflicts()[0].op, "add");
  EXPECT_EQ(error.conflicts()[1].op, "mul");
  EXPECT_EQ(error.conflicts()[0].operands[1].written, "vulkan:1");
  Tensor b0 = b.to(a.device());
  std::vector<float> as = a.to_vector<float>(), bs = b.to_vector<float>();
  std::vector<double> want;
  for (size_t i = 0; i < as.size(); ++i)
    want.push_back(std::exp(double(as[i])) + bs[i] + double(as[i]) * bs[i]);
  EXPECT_TRUE(allClose((exp(a) + b0 + a * b0).to_vector<float>(), want));
}

// Transfers are a policy decision, per realize or process-wide.
TEST(SeedPyTorch, TransferPolicyPerRealize) {
  KILN_REQUIRE_DEVICES(3u);
  Tensor a = Tensor::randn({64}, Device::vulkan(0));
  Tensor b = Tensor::randn({64}, Device::vulkan(1));
  Tensor c = a + b;
  expectMismatch([&] { realize({c}); });
  reset_stats();
  realize({c}, RealizeOptions{TransferPolicy::allow});
  EXPECT_EQ(stats().transfers, 1u);
  std::vector<float> as = a.to_vector<float>(), bs = b.to_vector<float>();
  std::vector<double> want;
  for (size_t i = 0; i < as.size(); ++i)
    want.push_back(double(as[i]) + bs[i]);
  EXPECT_TRUE(allClose(c.to_vector<float>(), want));
  EXPECT_THROW(Device::metal(), DeviceError);
}

TEST(SeedPyTorch, LikeCreatesOnThePlacementOfItsModel) {
  KILN_REQUIRE_DEVICES(3u);
  Tensor x = Tensor::randn({4}, Device::vulkan(1));
  EXPECT_TRUE(Tensor::full_like(x, 1.0f).is_committed());
  EXPECT_EQ(Tensor::full_like(x, 1.0f).device(), Device::vulkan(1));
  EXPECT_FALSE(Tensor::zeros_like(Tensor::from({1, 2}, {2})).is_committed());
  std::vector<float> got = (x + Tensor::like(x, {1, 2, 3, 4}, {4})).to_vector<float>();
  std::vector<float> xs = x.to_vector<float>();
  for (size_t i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(got[i], xs[i] + float(i + 1));
}
} // namespace
