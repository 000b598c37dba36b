//===- ContextTest.cpp - Vulkan context, adapters and logical devices -----===//

#include "VulkanTestUtil.h"

#include "../ScopedEnv.h"

#include <volk.h> // Vulkan's functions as the runtime loaded them

#include <cctype>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>

namespace kiln::rt::test {
namespace {

using kiln::test::ScopedEnv;

bool isUuid(const std::string &text) {
  if (text.size() != 36)
    return false;
  for (size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    char c = text[i];
    if (dash ? c != '-' : !(std::isdigit(c) || (c >= 'a' && c <= 'f')))
      return false;
  }
  return true;
}

using ContextTest = VulkanTest;

TEST_F(ContextTest, EnumeratesAdaptersWithNamesUuidsAndLimits) {
  ASSERT_GE(context->adapters().size(), 1u);
  EXPECT_EQ(context->numDevices(), context->adapters().size());
  for (const AdapterInfo &adapter : context->adapters()) {
    EXPECT_FALSE(adapter.name.empty());
    EXPECT_TRUE(isUuid(adapter.uuid)) << adapter.uuid;
    EXPECT_FALSE(adapter.typeName().empty());
    EXPECT_GE(adapter.apiVersion, (1u << 22)) << "Vulkan 1.0 or newer";
    EXPECT_GE(adapter.maxWorkgroupSize[0], 64u);
    EXPECT_GE(adapter.maxWorkgroupInvocations, 64u);
    EXPECT_GE(adapter.maxWorkgroupCount[0], 65535u);
    EXPECT_GE(adapter.maxSharedMemoryBytes, 16384u);
    EXPECT_GE(adapter.subgroupSize, 1u);
    EXPECT_GE(adapter.maxStorageBufferRange, uint64_t(1) << 27);
    // Every adapter is in a device group, of itself at least (Vulkan 1.1
    // lists each); no group holds more adapters than there are.
    EXPECT_GE(adapter.deviceGroupSize, 1u);
    EXPECT_LE(adapter.deviceGroupSize, context->adapters().size());
    // Workgroup-scope matrices are reported only on top of subgroup ones,
    // with a shape the driver listed (the H200: 256 invocations, 32 x 32 x
    // 16); lavapipe has neither.
    if (adapter.workgroupMatrixInvocations) {
      EXPECT_TRUE(adapter.cooperativeMatrixF16);
      EXPECT_LE(adapter.workgroupMatrixInvocations, adapter.maxWorkgroupInvocations);
      for (uint32_t g : adapter.workgroupMatrixGranularity)
        EXPECT_GE(g, 1u);
      EXPECT_GE(adapter.workgroupMatrixMaxDimension, adapter.workgroupMatrixGranularity[0]);
    } else {
      EXPECT_FALSE(adapter.workgroupMatrixTensorAddressing);
      EXPECT_EQ(adapter.workgroupMatrixMaxDimension, 0u);
    }
  }
  // Numbered in adapterOrder's order: already sorted, it keeps its order.
  std::vector<size_t> order = adapterOrder(context->adapters());
  for (size_t i = 0; i < order.size(); ++i)
    EXPECT_EQ(order[i], i) << context->adapters()[i].name;
  EXPECT_EQ(device->name(), "vulkan:0");
  EXPECT_EQ(device->api(), "vulkan");
  EXPECT_EQ(device->adapterName(), context->adapterOf(0).name);
  EXPECT_EQ(device->adapterUuid(), context->adapterOf(0).uuid);
  EXPECT_EQ(device->ordinal(), 0u);
  EXPECT_NE(device->vkDevice(), nullptr);
}

/// Adapters are numbered discrete GPUs first, then by PCI address (as
/// nvidia-smi numbers them), whatever order the loader lists them in.
TEST(AdapterOrder, DiscreteFirstThenByPciAddressThenLoaderOrder) {
  auto adapter = [](std::string name, AdapterInfo::Type type, std::string pci) {
    AdapterInfo a;
    a.name = std::move(name);
    a.type = type;
    a.pciAddress = std::move(pci);
    return a;
  };
  using T = AdapterInfo::Type;
  // The loader put lavapipe and the second GPU first.
  std::vector<AdapterInfo> listed = {
      adapter("llvmpipe", T::Cpu, ""), adapter("H200 b", T::Discrete, "0000:41:00.0"),
      adapter("iGPU", T::Integrated, "0000:00:02.0"), adapter("H200 a", T::Discrete, "0000:06:00.0"),
      adapter("H200 c", T::Discrete, "0001:03:00.0")};
  std::vector<std::string> names;
  for (size_t i : adapterOrder(listed))
    names.push_back(listed[i].name);
  EXPECT_EQ(names, (std::vector<std::string>{"H200 a", "H200 b", "H200 c", "iGPU", "llvmpipe"}));
  // A kind where one adapter has no PCI address keeps the loader's order.
  listed[4].pciAddress.clear();
  names.clear();
  for (size_t i : adapterOrder(listed))
    names.push_back(listed[i].name);
  EXPECT_EQ(names, (std::vector<std::string>{"H200 b", "H200 a", "H200 c", "iGPU", "llvmpipe"}));
  EXPECT_TRUE(adapterOrder({}).empty());
}

TEST_F(ContextTest, DeviceIsCreatedOnceAndPreferredOrdinalExists) {
  KILN_ASSERT_OK_AND_ASSIGN(again, context->device(0));
  EXPECT_EQ(again, device);
  size_t preferred = context->preferredOrdinal();
  ASSERT_LT(preferred, context->numDevices());
  // A discrete GPU, when present, wins over anything else.
  for (const AdapterInfo &adapter : context->adapters())
    if (adapter.type == AdapterInfo::Type::Discrete)
      EXPECT_EQ(context->adapterOf(preferred).type,
                AdapterInfo::Type::Discrete);
}

TEST_F(ContextTest, OutOfRangeOrdinalIsNotFoundAndListsDevices) {
  StatusOr<VulkanDevice *> missing = context->device(context->numDevices());
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), Status::Code::NotFound);
  const std::string &message = missing.status().message();
  EXPECT_NE(message.find("vulkan:" + std::to_string(context->numDevices())),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("vulkan:0 (" + context->adapterOf(0).name + ")"),
            std::string::npos)
      << message;
}

TEST_F(ContextTest, ValidationMessagesAreCountedAndPrinted) {
  if (!context->validationEnabled())
    GTEST_SKIP() << "VK_LAYER_KHRONOS_validation is not installed";
  // A size-0 VkBuffer is invalid usage the layer always reports.
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = 0;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  auto vkDevice = static_cast<VkDevice>(device->vkDevice());
  VkBuffer buffer = VK_NULL_HANDLE;
  ::testing::internal::CaptureStderr();
  VkResult result = vkCreateBuffer(vkDevice, &info, nullptr, &buffer);
  std::string printed = ::testing::internal::GetCapturedStderr();
  if (result == VK_SUCCESS && buffer)
    vkDestroyBuffer(vkDevice, buffer, nullptr);
  EXPECT_GE(context->validationMessages(), 1u);
  EXPECT_GE(device->stats().validationMessages, 1u);
  EXPECT_NE(printed.find("kiln: vulkan validation: "), std::string::npos)
      << printed;
  device->resetStats();
  EXPECT_EQ(device->stats().validationMessages, 0u);
  // Those messages were the point of the test.
  messagesBefore = VulkanContext::validationMessagesInProcess();
}

TEST(ContextCreateTest, MissingValidationLayerWarnsAndContinues) {
  // The loader looks for explicit layers only here: no validation layer.
  ScopedEnv layerPath("VK_LAYER_PATH", "/nonexistent/kiln-no-layers");
  ContextOptions options;
  options.validation = true;
  ::testing::internal::CaptureStderr();
  StatusOr<std::unique_ptr<VulkanContext>> context =
      VulkanContext::create(options);
  std::string printed = ::testing::internal::GetCapturedStderr();
  if (!context.isOk() && context.status().code() == Status::Code::Unavailable)
    GTEST_SKIP() << "Vulkan is not available: " << context.status().message();
  ASSERT_TRUE(context.isOk()) << context.status().toString();
  EXPECT_FALSE((*context)->validationEnabled());
  EXPECT_NE(printed.find("VK_LAYER_KHRONOS_validation is not installed"),
            std::string::npos)
      << printed;
  KILN_ASSERT_OK_AND_ASSIGN(device, (*context)->device(0));
  KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(16));
}

class VirtualDevicesTest : public VulkanTest {
protected:
  ContextOptions options() const override {
    ContextOptions options = VulkanTest::options();
    options.virtualDevices = 3;
    return options;
  }
};

TEST_F(VirtualDevicesTest, EachLogicalDeviceHasItsOwnState) {
  size_t adapters = context->adapters().size();
  ASSERT_EQ(context->numDevices(), 3 * adapters);
  EXPECT_EQ(context->virtualDevicesPerAdapter(), 3u);
  KILN_ASSERT_OK_AND_ASSIGN(second, context->device(1));
  KILN_ASSERT_OK_AND_ASSIGN(third, context->device(2));
  EXPECT_EQ(second->name(), "vulkan:1");
  EXPECT_EQ(third->name(), "vulkan:2");
  // Same adapter, separate VkDevices.
  EXPECT_EQ(second->adapterUuid(), device->adapterUuid());
  EXPECT_EQ(&context->adapterOf(2), &context->adapters()[0]);
  std::set<void *> handles = {device->vkDevice(), second->vkDevice(),
                              third->vkDevice()};
  EXPECT_EQ(handles.size(), 3u);

  // A buffer freed on one device never serves another device's request.
  { KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(4096)); }
  KILN_ASSERT_OK_AND_ASSIGN(other, second->allocate(4096));
  EXPECT_EQ(second->stats().bufferPoolHits, 0u);
  EXPECT_EQ(second->stats().buffersAllocated, 1u);
  EXPECT_EQ(device->stats().buffersAllocated, 1u);
  KILN_ASSERT_OK_AND_ASSIGN(again, device->allocate(4096));
  EXPECT_EQ(device->stats().bufferPoolHits, 1u);
  EXPECT_EQ(third->stats().buffersAllocated, 0u);

  // Transfers count on their own device only.
  std::vector<float> data(1024, 1.5f);
  KILN_ASSERT_OK(second->upload(*other, data.data(), 4096));
  KILN_ASSERT_OK(second->flush());
  EXPECT_EQ(second->stats().bytesUploaded, 4096u);
  EXPECT_EQ(second->stats().submits, 1u);
  EXPECT_EQ(device->stats().bytesUploaded, 0u);
  EXPECT_EQ(device->stats().submits, 0u);

  // Buffers cannot cross devices implicitly.
  Status crossed = device->upload(*other, data.data(), 4096);
  EXPECT_EQ(crossed.code(), Status::Code::InvalidArgument);
  EXPECT_NE(crossed.message().find("vulkan:1"), std::string::npos)
      << crossed.message();
  EXPECT_EQ(device->copy(*other, *again, 16).code(),
            Status::Code::InvalidArgument);
}

TEST(ContextOptionsTest, ReadsVirtualDevicesAndValidation) {
  ScopedEnv devices("KILN_VIRTUAL_DEVICES", "3");
  ScopedEnv validation("KILN_VULKAN_VALIDATION", "1");
  KILN_ASSERT_OK_AND_ASSIGN(options, ContextOptions::fromEnvironment());
  EXPECT_EQ(options.virtualDevices, 3u);
  EXPECT_TRUE(options.validation);
}

TEST(ContextOptionsTest, DefaultsWhenUnset) {
  ScopedEnv devices("KILN_VIRTUAL_DEVICES", nullptr);
  ScopedEnv validation("KILN_VULKAN_VALIDATION", nullptr);
  KILN_ASSERT_OK_AND_ASSIGN(options, ContextOptions::fromEnvironment());
  EXPECT_EQ(options.virtualDevices, 1u);
  EXPECT_FALSE(options.validation);
}

TEST(ContextOptionsTest, RejectsMalformedVirtualDevices) {
  for (const char *bad :
       {"", "0", "-1", "+2", "3x", " 3", "2.0", "abc", "65", "99999999999"}) {
    ScopedEnv devices("KILN_VIRTUAL_DEVICES", bad);
    StatusOr<ContextOptions> options = ContextOptions::fromEnvironment();
    ASSERT_FALSE(options.isOk()) << "accepted '" << bad << "'";
    EXPECT_EQ(options.status().code(), Status::Code::InvalidArgument);
    EXPECT_NE(options.status().message().find("KILN_VIRTUAL_DEVICES"),
              std::string::npos)
        << options.status().message();
  }
}

TEST(ContextOptionsTest, RejectsMalformedValidationFlag) {
  ScopedEnv validation("KILN_VULKAN_VALIDATION", "yes");
  StatusOr<ContextOptions> options = ContextOptions::fromEnvironment();
  ASSERT_FALSE(options.isOk());
  EXPECT_NE(options.status().message().find("KILN_VULKAN_VALIDATION"),
            std::string::npos);
}

TEST(ContextCreateTest, RejectsZeroVirtualDevices) {
  ContextOptions options;
  options.virtualDevices = 0;
  StatusOr<std::unique_ptr<VulkanContext>> context =
      VulkanContext::create(options);
  ASSERT_FALSE(context.isOk());
  EXPECT_EQ(context.status().code(), Status::Code::InvalidArgument);
}

TEST(ContextCreateTest, MissingDriverIsUnavailableWithAdvice) {
  // The loader reads these on every instance creation: point it at no driver.
  ScopedEnv icd("VK_ICD_FILENAMES", "/nonexistent/kiln-no-driver.json");
  ScopedEnv driverFiles("VK_DRIVER_FILES", "/nonexistent/kiln-no-driver.json");
  StatusOr<std::unique_ptr<VulkanContext>> context =
      VulkanContext::create(ContextOptions{});
  ASSERT_FALSE(context.isOk());
  EXPECT_EQ(context.status().code(), Status::Code::Unavailable);
  EXPECT_NE(
      context.status().message().find("apt-get install mesa-vulkan-drivers"),
      std::string::npos)
      << context.status().message();
  EXPECT_NE(context.status().message().find("KILN_DEVICE"), std::string::npos);
}

TEST(GlobalContextTest, IsCreatedOnceForTheProcess) {
  StatusOr<VulkanContext *> first = VulkanContext::get();
  if (!first.isOk() && first.status().code() == Status::Code::Unavailable)
    GTEST_SKIP() << "Vulkan is not available: " << first.status().message();
  ASSERT_TRUE(first.isOk()) << first.status().toString();
  KILN_ASSERT_OK_AND_ASSIGN(second, VulkanContext::get());
  EXPECT_EQ(*first, second);
  EXPECT_EQ(second->virtualDevicesPerAdapter(), 1u);
  KILN_ASSERT_OK_AND_ASSIGN(device, second->device(second->preferredOrdinal()));
  KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(64));
  float value = 3.0f;
  KILN_ASSERT_OK(device->upload(*buffer, &value, sizeof(value)));
  float back = 0;
  KILN_ASSERT_OK(device->download(*buffer, &back, sizeof(back)));
  EXPECT_EQ(back, 3.0f);
}

TEST(ContextLifetimeTest, BufferOutlivingItsContextDoesNotCrash) {
  StatusOr<std::unique_ptr<VulkanContext>> created =
      VulkanContext::create(ContextOptions{});
  if (!created.isOk() && created.status().code() == Status::Code::Unavailable)
    GTEST_SKIP() << "Vulkan is not available: " << created.status().message();
  ASSERT_TRUE(created.isOk()) << created.status().toString();
  std::unique_ptr<VulkanContext> context = std::move(*created);
  KILN_ASSERT_OK_AND_ASSIGN(device, context->device(0));
  KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(1024));
  ::testing::internal::CaptureStderr();
  context.reset();
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("leaking"), std::string::npos) << warning;
  buffer.reset(); // returns to an orphaned pool: no Vulkan call, no crash
}

} // namespace
} // namespace kiln::rt::test
