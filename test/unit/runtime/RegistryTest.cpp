// Devices by name (Registry.h) and the two-step kernel interface of every
// backend: prepare() refuses a kernel without code for the device, and an
// executable runs only on the device that prepared it.

#include "kiln/runtime/Cpu.h"
#include "kiln/runtime/DeviceName.h"
#include "kiln/runtime/Program.h"
#include "kiln/runtime/Registry.h"
#include "kiln/runtime/Vulkan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

namespace kiln::rt::test {
namespace {

/// The one grammar of device names: an API and an optional ordinal of up
/// to six digits, nothing else; what exists is the caller's to say.
TEST(DeviceNames, OneGrammar) {
  struct Case {
    const char *text;
    std::optional<DeviceApi> api;
    std::optional<int> ordinal;
  };
  for (const Case &c : std::vector<Case>{{"cpu", DeviceApi::cpu, std::nullopt},
                                         {"cpu:0", DeviceApi::cpu, 0},
                                         {"vulkan", DeviceApi::vulkan, std::nullopt},
                                         {"vulkan:12", DeviceApi::vulkan, 12},
                                         {"metal:0", DeviceApi::metal, 0},
                                         {"vulkan:123456", DeviceApi::vulkan, 123456},
                                         {"vulkan:1234567", std::nullopt, std::nullopt},
                                         {"vulkan:", std::nullopt, std::nullopt},
                                         {"vulkan:-1", std::nullopt, std::nullopt},
                                         {"vulkan:1x", std::nullopt, std::nullopt},
                                         {"Vulkan", std::nullopt, std::nullopt},
                                         {"cuda:0", std::nullopt, std::nullopt},
                                         {"", std::nullopt, std::nullopt}}) {
    std::optional<DeviceName> name = parseDeviceName(c.text);
    ASSERT_EQ(name.has_value(), c.api.has_value()) << c.text;
    if (!name)
      continue;
    EXPECT_EQ(name->api, *c.api) << c.text;
    EXPECT_EQ(name->ordinal, c.ordinal) << c.text;
  }
  EXPECT_EQ(parseDeviceName("vulkan")->str(), "vulkan:0");
  EXPECT_EQ(parseDeviceName("metal:3")->str(), "metal:3");
  // The registry reads names with it: what it cannot run is an error.
  EXPECT_FALSE(findDevice("metal:0").isOk());
  EXPECT_FALSE(findDevice("cpu:1").isOk());
  EXPECT_FALSE(findDevice("vulkan:1x").isOk());
}

TEST(Registry, NamesDevices) {
  StatusOr<Device *> cpu = findDevice("cpu:0");
  ASSERT_TRUE(cpu.isOk());
  EXPECT_EQ(*cpu, &CpuDevice::get());
  EXPECT_EQ(*findDevice("cpu"), &CpuDevice::get());
  std::vector<std::string> names = deviceNames();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "cpu:0");
  for (const std::string &name : names) {
    StatusOr<Device *> device = findDevice(name);
    ASSERT_TRUE(device.isOk()) << name << ": " << device.status().toString();
    EXPECT_EQ((*device)->name(), name);
  }
  StatusOr<Device *> unknown = findDevice("gpu:0");
  ASSERT_FALSE(unknown.isOk());
  EXPECT_EQ(unknown.status().message(), "unknown device 'gpu:0': use cpu:0 or vulkan:N");
  EXPECT_FALSE(findDevice("vulkan:99999999999").isOk());
  StatusOr<Device *> missing = findDevice("vulkan:" + std::to_string(names.size() + 5));
  EXPECT_FALSE(missing.isOk());
  EXPECT_EQ(defaultDevice().name(), names.size() > 1 ? "vulkan:0" : "cpu:0");
}

/// A CPU kernel that writes 2 * x into y over [begin, end).
void twice(void **args) {
  auto *x = static_cast<float *>(*static_cast<void **>(args[0]));
  auto *y = static_cast<float *>(*static_cast<void **>(args[1]));
  int64_t begin = *static_cast<int64_t *>(args[2]), end = *static_cast<int64_t *>(args[3]);
  for (int64_t i = begin; i < end; ++i)
    y[i] = 2 * x[i];
}

TEST(Executables, RunOnlyWhereTheyHaveCode) {
  ProgramKernel kernel;
  kernel.name = "kernel 0 (cpu:0)";
  kernel.elements = 1000;
  auto code = std::make_shared<CpuCode>();
  code->fn = twice;
  code->outerIterations = 1000;
  kernel.cpu = code;
  CpuDevice &cpu = CpuDevice::get();
  StatusOr<std::shared_ptr<Executable>> exe = cpu.prepare(kernel);
  ASSERT_TRUE(exe.isOk()) << exe.status().toString();
  std::shared_ptr<Buffer> x = *cpu.allocate(4000), y = *cpu.allocate(4000);
  std::vector<float> in(1000);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(i);
  ASSERT_TRUE(cpu.upload(*x, in.data(), 4000).isOk());
  ASSERT_TRUE(cpu.dispatch(**exe, {x.get(), y.get()}).isOk());
  std::vector<float> out(1000);
  ASSERT_TRUE(cpu.download(*y, out.data(), 4000).isOk());
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(out[i], 2.0f * float(i)) << i;

  StatusOr<VulkanContext *> context = VulkanContext::get();
  if (!context.isOk() || (*context)->numDevices() == 0)
    GTEST_SKIP() << "the Vulkan half needs a Vulkan device";
  VulkanDevice &gpu = **(*context)->device(0);
  StatusOr<std::shared_ptr<Executable>> none = gpu.prepare(kernel);
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().message(), "kernel 0 (cpu:0) has no code for vulkan:0 (vulkan)");
  rt::Status foreign = gpu.dispatch(**exe, {});
  ASSERT_FALSE(foreign.isOk());
  EXPECT_NE(foreign.message().find("prepared for another device"), std::string::npos);
  ProgramKernel spirvOnly;
  spirvOnly.name = "kernel 1 (vulkan:0)";
  spirvOnly.spirv = std::make_shared<SpirvCode>();
  EXPECT_EQ(cpu.prepare(spirvOnly).status().message(),
            "kernel 1 (vulkan:0) has no code for cpu:0 (cpu)");
  EXPECT_FALSE(gpu.prepare(spirvOnly).isOk()); // empty SPIR-V is an error, not a crash
}

} // namespace
} // namespace kiln::rt::test
