// Device handles and the consistency check through the API. The test main
// sets KILN_VIRTUAL_DEVICES=2, so vulkan:0 and vulkan:1 are two logical
// devices of one adapter with separate memory.

#include "TestUtil.h"

#include <cstdlib>

using namespace kiln;

namespace {
TEST(Device, SpellingsResolveToOneIdentity) {
  KILN_REQUIRE_DEVICES(1u);
  Device d = Device::default_device();
  EXPECT_EQ(d, Device::parse("default"));
  EXPECT_EQ(d, Device::parse(d.name()));
  EXPECT_EQ(Device::parse("default").written(), "default");
  EXPECT_EQ(Device::cpu(), Device::parse("cpu"));
  EXPECT_EQ(Device::cpu(), Device::parse("cpu:0"));
  EXPECT_EQ(Device::cpu().adapter_uuid(), "host");
  EXPECT_THROW(Device::parse("cpu:1"), DeviceError);
  std::vector<Device> all = devices();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front(), Device::cpu());
  if (all.size() > 1) {
    EXPECT_EQ(Device::vulkan(0), Device::parse("vulkan:0"));
    EXPECT_EQ(Device::vulkan(0).adapter_uuid().size(), 36u);
    // A Vulkan device that is itself a CPU (lavapipe) is not preferred over
    // the native CPU device.
    if (Device::vulkan().adapter_name().find("llvmpipe") != std::string::npos)
      EXPECT_EQ(d, Device::cpu());
  }
}

TEST(Device, MissingDevicesAreErrorsNamingTheExistingOnes) {
  KILN_REQUIRE_DEVICES(2u);
  try {
    Device::parse("vulkan:7");
    FAIL();
  } catch (const DeviceError &error) {
    std::string text = error.what();
    EXPECT_NE(text.find("\"vulkan:7\" does not exist"), std::string::npos) << text;
    EXPECT_NE(text.find("vulkan:0 ("), std::string::npos) << text;
    // Each with its adapter's UUID, and its PCI address where the driver
    // gives one (NVIDIA's, as nvidia-smi prints it; not lavapipe).
    std::string uuid = "uuid " + Device::vulkan(0).adapter_uuid();
    EXPECT_NE(text.find(uuid), std::string::npos) << text;
    std::string pci = Device::vulkan(0).adapter_pci();
    if (!pci.empty()) {
      EXPECT_EQ(pci.size(), 12u) << pci; // 0000:06:00.0
      EXPECT_NE(text.find(uuid + ", pci " + pci), std::string::npos) << text;
    }
    if (devices().size() >= 3) {
      const char *perAdapter = std::getenv("KILN_VIRTUAL_DEVICES");
      if (!perAdapter || std::string(perAdapter) != "1") {
        // Two logical devices of one adapter (the tests' default) share it.
        EXPECT_EQ(Device::vulkan(1).adapter_uuid(), Device::vulkan(0).adapter_uuid());
        EXPECT_NE(text.find(uuid, text.find(uuid) + 1), std::string::npos) << text;
      } else {
        // One device per adapter on a machine of two GPUs: two UUIDs.
        EXPECT_NE(Device::vulkan(1).adapter_uuid(), Device::vulkan(0).adapter_uuid());
        EXPECT_NE(text.find("uuid " + Device::vulkan(1).adapter_uuid()), std::string::npos)
            << text;
      }
    }
  }
  EXPECT_EQ(Device::cpu().adapter_pci(), "");
  EXPECT_THROW(Device::parse("metal"), DeviceError);
  EXPECT_THROW(Device::parse("vulkan:x"), DeviceError);
  EXPECT_THROW(Device::parse("tpu"), DeviceError);
}

TEST(Device, KilnDeviceVariableIsResolvedAndChecked) {
  setenv("KILN_DEVICE", "cpu", 1);
  EXPECT_EQ(Device::default_device(), Device::cpu());
  EXPECT_EQ(Device::default_device().written(), "KILN_DEVICE=cpu");
  setenv("KILN_DEVICE", "vulkan:9", 1);
  try {
    Device::default_device();
    ADD_FAILURE() << "expected DeviceError";
  } catch (const DeviceError &error) {
    std::string text = error.what();
    EXPECT_NE(text.find("KILN_DEVICE"), std::string::npos) << text;
    EXPECT_NE(text.find("cpu:0 ("), std::string::npos) << text;
  }
  setenv("KILN_DEVICE", "gpu", 1);
  EXPECT_THROW(Device::default_device(), DeviceError);
  unsetenv("KILN_DEVICE");
  // A program-wide default, overridden by the environment.
  set_default_device(Device::cpu());
  EXPECT_EQ(Device::default_device(), Device::cpu());
}

TEST(Device, UncommittedValuesFollowCommittedOnes) {
  KILN_REQUIRE_DEVICES(3u);
  Device d1 = Device::vulkan(1);
  Tensor x = Tensor::randn({32}, d1);
  Tensor mask = Tensor::full({32}, 2.0f); // made inside a "layer", no device
  Tensor y = x * mask;
  EXPECT_FALSE(mask.is_committed());
  std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_FLOAT_EQ(ys[i], 2 * xs[i]);
  EXPECT_EQ(y.device(), d1);
}

TEST(Device, MismatchIsOneTypedErrorBeforeAnyKernel) {
  KILN_REQUIRE_DEVICES(3u);
  Tensor weights = Tensor::randn({8, 4}, Device::vulkan(0));
  unsigned inputLine = __LINE__ + 1;
  Tensor input = Tensor::randn({8, 4}, Device::vulkan(1));
  Tensor bias = Tensor::randn({4}, Device::vulkan(0));
  unsigned useLine = __LINE__ + 1;
  Tensor h = weights * input;                                  // conflict 1
  Tensor labels = Tensor::randn({8, 4}, Device::parse("vulkan:1"));
  Tensor loss = (h + bias) - kiln::exp(labels) * weights;     // conflict 2 (mul)
  reset_stats();
  try {
    (void)loss.to_vector<float>();
    FAIL() << "expected DeviceMismatchError";
  } catch (const DeviceMismatchError &error) {
    ASSERT_EQ(error.conflicts().size(), 2u) << error.what();
    const DeviceConflict &first = error.conflicts()[0];
    EXPECT_EQ(first.op, "mul");
    EXPECT_EQ(first.location.line, useLine);
    EXPECT_NE(first.location.file.find("DeviceTest.cpp"), std::string::npos);
    ASSERT_EQ(first.operands.size(), 2u);
    EXPECT_EQ(first.operands[0].device, "vulkan:0");
    EXPECT_EQ(first.operands[1].device, "vulkan:1");
    EXPECT_EQ(first.operands[1].committedAt.line, inputLine);
    EXPECT_EQ(first.operands[1].type, "tensor<8x4xf32>");
    EXPECT_EQ(first.operands[0].name, "a");
    EXPECT_EQ(first.operands[1].name, "b");
    EXPECT_NE(first.fix.find(".to("), std::string::npos);
    std::string text = error.what();
    EXPECT_NE(text.find("DeviceTest.cpp:" + std::to_string(useLine)), std::string::npos) << text;
    EXPECT_NE(text.find("error: operands of 'mul' are on different devices: a is on "
                        "\"vulkan:0\", b is on \"vulkan:1\""),
              std::string::npos) << text;
    EXPECT_NE(text.find("note: b ([8, 4] f32) is committed to \"vulkan:1\""),
              std::string::npos) << text;
  }
  Stats s = stats();
  EXPECT_EQ(s.kernels_compiled, 0u);
  EXPECT_EQ(s.kernel_cache_hits, 0u);
  EXPECT_EQ(s.kernels_dispatched, 0u);

  // The suggested fix: move the input and the labels, then it runs.
  Tensor fixed = (weights * input.to(weights.device()) + bias) -
                 kiln::exp(labels.to(weights.device())) * weights;
  std::vector<float> w = weights.to_vector<float>(), in = input.to_vector<float>(),
                     b = bias.to_vector<float>(), l = labels.to_vector<float>();
  std::vector<double> want;
  for (size_t i = 0; i < w.size(); ++i)
    want.push_back(double(w[i]) * in[i] + b[i % 4] - std::exp(double(l[i])) * w[i]);
  EXPECT_TRUE(kiln::test::allClose(fixed.to_vector<float>(), want));
}

TEST(Device, TransferPolicyAllowInsertsRealTransfers) {
  KILN_REQUIRE_DEVICES(3u);
  setenv("KILN_TRANSFER_POLICY", "allow", 1);
  Tensor a = Tensor::randn({100}, Device::vulkan(0));
  Tensor b = Tensor::randn({100}, Device::vulkan(1));
  reset_stats();
  std::vector<float> got = (a + b).to_vector<float>();
  unsetenv("KILN_TRANSFER_POLICY");
  EXPECT_EQ(stats().transfers, 1u);
  std::vector<float> as = a.to_vector<float>(), bs = b.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_FLOAT_EQ(got[i], as[i] + bs[i]);
}

TEST(Device, ExplicitTransferMovesData) {
  KILN_REQUIRE_DEVICES(3u);
  Tensor a = Tensor::randn({1000}, Device::vulkan(0));
  Tensor b = kiln::exp(a).to(Device::vulkan(1)) + 1.0f;
  reset_stats();
  std::vector<float> got = b.to_vector<float>();
  EXPECT_EQ(stats().transfers, 1u);
  EXPECT_EQ(stats().kernels_dispatched, 2u); // one kernel per device
  EXPECT_EQ(b.device(), Device::vulkan(1));
  std::vector<float> as = a.to_vector<float>();
  std::vector<double> want;
  for (float v : as)
    want.push_back(std::exp(double(v)) + 1);
  EXPECT_TRUE(kiln::test::allClose(got, want));
}
} // namespace

namespace {
// The PyTorch seed's own case: CPU tensors meeting GPU tensors.
TEST(Device, CpuAndVulkanFollowTheRules) {
  KILN_REQUIRE_DEVICES(2u);
  Tensor host = Tensor::randn({256}, Device::cpu());
  Tensor gpu = Tensor::randn({256}, Device::vulkan(0));
  Tensor mixed = host * gpu;
  try {
    (void)mixed.to_vector<float>();
    FAIL() << "expected DeviceMismatchError";
  } catch (const DeviceMismatchError &error) {
    ASSERT_EQ(error.conflicts().size(), 1u);
    EXPECT_EQ(error.conflicts()[0].operands[0].device, "cpu:0");
    EXPECT_EQ(error.conflicts()[0].operands[1].device, "vulkan:0");
  }
  // Explicit transfers both ways, through the runtime.
  Tensor there = (kiln::exp(host).to(Device::vulkan(0)) + gpu).to(Device::cpu()) * 2.0f;
  reset_stats();
  std::vector<float> got = there.to_vector<float>();
  EXPECT_EQ(stats().transfers, 2u);
  EXPECT_EQ(stats().kernels_dispatched, 3u);
  std::vector<float> h = host.to_vector<float>(), g = gpu.to_vector<float>();
  std::vector<double> want;
  for (size_t i = 0; i < h.size(); ++i)
    want.push_back(2 * (std::exp(double(h[i])) + g[i]));
  EXPECT_TRUE(kiln::test::allClose(got, want));
}
} // namespace
