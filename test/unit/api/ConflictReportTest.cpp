// A device conflict is reported as the API call the
// user wrote, over its arguments as the user made them; a computed argument
// says where it was computed and from what; KILN_TRACE adds call stacks.

#include "TestUtil.h"

using namespace kiln;

namespace {
/// A Vulkan device to conflict with cpu:0.
std::optional<Device> gpuOrSkip() {
  std::vector<Device> all = kiln::test::availableDevices();
  if (all.size() < 2)
    return std::nullopt;
  return all[1];
}

#define KILN_NEED_GPU(gpu)                                                     \
  std::optional<Device> gpu = gpuOrSkip();                                     \
  if (!gpu)                                                                    \
    GTEST_SKIP() << "needs a Vulkan device next to cpu:0";

DeviceMismatchError mismatchOf(const Tensor &t) {
  try {
    (void)t.to_vector<float>();
  } catch (const DeviceMismatchError &error) {
    return error;
  }
  ADD_FAILURE() << "expected DeviceMismatchError";
  return DeviceMismatchError("", {});
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(ConflictReport, LinearIsReportedAsLinearWithEveryArgumentAsCreated) {
  KILN_NEED_GPU(gpu);
  unsigned xLine = __LINE__ + 1;
  Tensor x = Tensor::randn({4, 8}, Device::cpu());
  unsigned wLine = __LINE__ + 1;
  Tensor w = Tensor::randn({16, 8}, *gpu);
  unsigned bLine = __LINE__ + 1;
  Tensor b = Tensor::randn({16}, *gpu);
  unsigned useLine = __LINE__ + 1;
  Tensor y = linear(x, w, b);
  DeviceMismatchError error = mismatchOf(y);
  ASSERT_EQ(error.conflicts().size(), 1u) << error.what();
  const DeviceConflict &c = error.conflicts()[0];
  EXPECT_EQ(c.op, "linear");
  EXPECT_EQ(c.location.line, useLine);
  ASSERT_EQ(c.operands.size(), 3u);
  EXPECT_EQ(c.operands[0].name, "x");
  EXPECT_EQ(c.operands[1].name, "weight");
  EXPECT_EQ(c.operands[2].name, "bias");
  // As the user created it, not the transposed matmul operand.
  EXPECT_EQ(c.operands[1].type, "tensor<16x8xf32>");
  EXPECT_EQ(c.operands[0].device, "cpu:0");
  EXPECT_EQ(c.operands[1].device, gpu->name());
  EXPECT_EQ(c.operands[2].device, gpu->name());
  EXPECT_EQ(c.operands[0].committedAt.line, xLine);
  EXPECT_EQ(c.operands[1].committedAt.line, wLine);
  EXPECT_EQ(c.operands[2].committedAt.line, bLine);
  EXPECT_TRUE(c.operands[0].computedBy.empty());
  std::string text = error.what();
  EXPECT_TRUE(contains(text, "error: operands of 'linear' are on different devices: x is on "
                             "\"cpu:0\", weight is on \"" + gpu->name() + "\", bias is on \"" +
                             gpu->name() + "\"")) << text;
  EXPECT_TRUE(contains(text, "note: weight ([16, 8] f32) is committed to")) << text;
  EXPECT_TRUE(contains(text, "fix: move x to \"" + gpu->name() +
                             "\" with `.to(weight.device())`")) << text;
  EXPECT_FALSE(contains(text, "kiln.")) << "internal op names leak: " << text;
}

TEST(ConflictReport, CompoundCallsAreNamedAsWritten) {
  KILN_NEED_GPU(gpu);
  Tensor img = Tensor::randn({2, 3, 4, 4}, *gpu);
  Tensor mean = Tensor::zeros({3}, Device::cpu());
  Tensor var = Tensor::full({3}, 1.0f, Device::cpu());
  Tensor one = Tensor::full({3}, 1.0f, *gpu), zero = Tensor::zeros({3}, *gpu);
  // Two of batch_norm's ops conflict (x - mean, gamma * rsqrt(var)): one report.
  DeviceMismatchError bn = mismatchOf(batch_norm(img, mean, var, one, zero));
  ASSERT_EQ(bn.conflicts().size(), 1u) << bn.what();
  EXPECT_EQ(bn.conflicts()[0].op, "batch_norm");
  ASSERT_EQ(bn.conflicts()[0].operands.size(), 5u);
  EXPECT_EQ(bn.conflicts()[0].operands[1].name, "mean");
  EXPECT_EQ(bn.conflicts()[0].operands[1].type, "tensor<3xf32>") << "created [3]";
  EXPECT_EQ(bn.conflicts()[0].operands[2].device, "cpu:0");

  Tensor h = Tensor::randn({5, 3}, *gpu);
  DeviceMismatchError ln = mismatchOf(layer_norm(h, Tensor::full({3}, 1.0f, Device::cpu()),
                                                 Tensor::zeros({3}, *gpu)));
  ASSERT_EQ(ln.conflicts().size(), 1u) << ln.what();
  EXPECT_EQ(ln.conflicts()[0].op, "layer_norm");
  EXPECT_EQ(ln.conflicts()[0].operands[1].name, "gamma");

  Tensor rows = Tensor::from(std::vector<int32_t>{2, 0}, {2}, Device::cpu());
  DeviceMismatchError is = mismatchOf(index_select(h, 0, rows));
  ASSERT_EQ(is.conflicts().size(), 1u) << is.what();
  EXPECT_EQ(is.conflicts()[0].op, "index_select");
  EXPECT_EQ(is.conflicts()[0].operands[1].name, "indices");
  EXPECT_EQ(is.conflicts()[0].operands[1].type, "tensor<2xi32>");

  Tensor cond = gt(h, Tensor::scalar(0.0f));
  DeviceMismatchError wh = mismatchOf(where(cond, h, Tensor::zeros({5, 3}, Device::cpu())));
  ASSERT_EQ(wh.conflicts().size(), 1u) << wh.what();
  EXPECT_EQ(wh.conflicts()[0].op, "where");
  EXPECT_EQ(wh.conflicts()[0].operands[0].name, "cond");
  EXPECT_EQ(wh.conflicts()[0].operands[2].name, "b");
  EXPECT_EQ(wh.conflicts()[0].operands[2].device, "cpu:0");
}

TEST(ConflictReport, ComputedOperandSaysWhereAndFromWhat) {
  KILN_NEED_GPU(gpu);
  unsigned committedLine = __LINE__ + 1;
  Tensor y = Tensor::randn({4, 8}, Device::cpu());
  unsigned computedLine = __LINE__ + 1;
  Tensor x = kiln::exp(y);
  Tensor w = Tensor::randn({16, 8}, *gpu), b = Tensor::randn({16}, *gpu);
  DeviceMismatchError error = mismatchOf(linear(x, w, b));
  ASSERT_EQ(error.conflicts().size(), 1u) << error.what();
  const DeviceConflict::Operand &input = error.conflicts()[0].operands[0];
  EXPECT_EQ(input.name, "x");
  EXPECT_EQ(input.computedBy, "exp");
  EXPECT_EQ(input.createdAt.line, computedLine);
  EXPECT_EQ(input.committedAt.line, committedLine);
  EXPECT_EQ(input.device, "cpu:0");
  std::string text = error.what();
  std::string file = input.createdAt.file;
  EXPECT_TRUE(contains(text, file + ":" + std::to_string(computedLine) + ":")) << text;
  EXPECT_TRUE(contains(text, "note: x ([4, 8] f32) was computed here by 'exp' from a [4, 8] f32 "
                             "tensor committed to \"cpu:0\" (written \"cpu\") at " +
                             file + ":" + std::to_string(committedLine)))
      << text;
  EXPECT_TRUE(contains(text, "before 'linear' (128 bytes to transfer)")) << text;
}

/// A reusable layer: without a stack the report shows only this line.
unsigned layerLine = 0;
__attribute__((noinline)) Tensor denseLayer(const Tensor &x, const Tensor &w, const Tensor &b) {
  layerLine = __LINE__ + 1;
  return relu(linear(x, w, b));
}

__attribute__((noinline)) Tensor modelWithTwoLayers(const Tensor &x, const Tensor &w1,
                                                     const Tensor &w2, const Tensor &b) {
  return denseLayer(denseLayer(x, w1, b), w2, b);
}

TEST(ConflictReport, TraceNamesTheFramesOutsideKiln) {
  KILN_NEED_GPU(gpu);
  Tensor w1 = Tensor::randn({8, 8}, *gpu), b = Tensor::randn({8}, *gpu);
  Tensor w2 = Tensor::randn({8, 8}, Device::cpu()); // the second layer's weight
  Tensor x = Tensor::randn({2, 8}, *gpu);

  std::string plain = mismatchOf(modelWithTwoLayers(x, w1, w2, b)).what();
  EXPECT_TRUE(contains(plain, "KILN_TRACE=1")) << "the report offers the trace: " << plain;
  EXPECT_FALSE(contains(plain, "call stack of '")) << plain;

  set_trace(true);
  Tensor w2traced = Tensor::randn({8, 8}, Device::cpu());
  Tensor traced = modelWithTwoLayers(x, w1, w2traced, b);
  set_trace(false);
  std::string text = mismatchOf(traced).what();
  if (contains(text, "has no libbacktrace"))
    GTEST_SKIP() << "this build records no call stacks: " << text;
  EXPECT_TRUE(contains(text, "call stack of 'linear':")) << text;
  // The layer's line, then its caller, by name (the test is built with -g).
  std::string layerFrame = "ConflictReportTest.cpp:" + std::to_string(layerLine) + " in ";
  size_t layer = text.find(layerFrame);
  size_t model = text.find("in modelWithTwoLayers");
  ASSERT_NE(layer, std::string::npos) << text;
  ASSERT_NE(model, std::string::npos) << text;
  EXPECT_LT(layer, model) << "innermost frame first: " << text;
  EXPECT_TRUE(contains(text, "call stack creating weight:")) << text;
  EXPECT_FALSE(contains(text, "kiln::linear")) << "Kiln's own frames are left out: " << text;
}
} // namespace
