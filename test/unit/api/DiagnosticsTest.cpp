// Diagnostics: answers and messages in the user's terms.

#include "TestUtil.h"

#include <cstdlib>

using namespace kiln;

namespace {
std::string deviceErrorOf(const std::function<void()> &f) {
  return kiln::test::messageOf<DeviceError>(f);
}

TEST(Diagnostics, UnreadValueReportsTheDevicePlacementChooses) {
  std::vector<Device> all = kiln::test::availableDevices();
  if (all.size() < 2)
    GTEST_SKIP() << "needs a Vulkan device next to cpu:0 (found " << all.size() << ")";
  Device gpu = all[1];
  set_default_device(Device::cpu());
  Tensor a = Tensor::rand({4});                // uncommitted
  Tensor b = Tensor::rand({4}, gpu);           // committed
  Tensor sum = a + b;
  EXPECT_EQ(sum.device(), gpu) << "the sum can only run where b lives";
  EXPECT_EQ((kiln::exp(sum) * 2.0f).device(), gpu);
  EXPECT_EQ((a * 2.0f).device(), Device::cpu()) << "nothing committed: the default device";
  // The answer is the realization's.
  sum.to_vector<float>();
  EXPECT_EQ(sum.device(), gpu);
  // A conflict is the error reading it would give.
  Tensor c = Tensor::rand({4}, Device::cpu());
  EXPECT_THROW((b + c).device(), DeviceMismatchError);
}

TEST(Diagnostics, DeviceNamesAreListedAndMetalIsExplainedOneWay) {
  std::string metal = deviceErrorOf([] { Device::metal(); });
  std::string parsed = deviceErrorOf([] { Device::parse("metal"); });
  std::string indexed = deviceErrorOf([] { Device::parse("metal:0"); });
  EXPECT_NE(metal.find("Metal runs on Apple platforms only"), std::string::npos) << metal;
  auto reason = [](const std::string &text) { return text.substr(text.find("does not exist")); };
  EXPECT_EQ(reason(metal), reason(parsed));
  EXPECT_EQ(reason(metal), reason(indexed));
  EXPECT_NE(parsed.find("device \"metal\" does not exist"), std::string::npos) << parsed;
  for (const char *bad : {"tpu", "vulkan:x"}) {
    std::string text = deviceErrorOf([&] { Device::parse(bad); });
    EXPECT_NE(text.find("\"default\", \"cpu\", \"cpu:0\", \"vulkan\" or \"vulkan:<index>\""),
              std::string::npos)
        << text;
  }
  setenv("KILN_DEVICE", "gpu", 1);
  std::string env = deviceErrorOf([] { Device::default_device(); });
  unsetenv("KILN_DEVICE");
  EXPECT_NE(env.find("KILN_DEVICE: unknown device \"gpu\": expected \"default\", \"cpu\""),
            std::string::npos)
      << env;
}
} // namespace
