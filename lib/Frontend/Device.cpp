//===- Device.cpp - resolving device names --------------------------------===//

#include "lib/Frontend/Devices.h"
#include "kiln/runtime/DeviceName.h"
#include "lib/Driver/Environment.h"

#include "kiln/Errors.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>

using namespace kiln;

namespace {
std::mutex defaultMutex;
std::optional<Device> programDefault;

} // namespace

namespace {
/// MemAvailable from /proc/meminfo, or 0.
uint64_t hostAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return 0;
}

std::string sizeText(uint64_t bytes) {
  char text[64];
  if (bytes >= (uint64_t(1) << 30))
    std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(uint64_t(1) << 30));
  else
    std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(1 << 20));
  return text;
}
} // namespace

OutOfMemoryError kiln::hostOutOfMemory(uint64_t bytes, const std::string &what) {
  uint64_t available = hostAvailableBytes();
  return OutOfMemoryError(what + ": out of host memory allocating " +
                              sizeText(bytes) + " (" + std::to_string(bytes) + " bytes); " +
                              (available ? sizeText(available) + " available" : "") +
                              ": free tensors you no longer need or work on smaller pieces",
                          bytes, "host", available);
}

std::shared_ptr<rt::Buffer> kiln::allocateOn(rt::Device &device, size_t bytes,
                                             const char *what) {
  rt::StatusOr<std::shared_ptr<rt::Buffer>> buffer = device.allocate(bytes);
  if (buffer.isOk())
    return *buffer;
  if (buffer.status().code() != rt::Status::Code::OutOfMemory)
    check(buffer.status(), what);
  std::string name = apiDevice(device).name();
  uint64_t available = apiDevice(device).kind() == DeviceKind::cpu ? hostAvailableBytes() : 0;
  throw OutOfMemoryError(std::string(what) + ": " + name + " cannot hold " + sizeText(bytes) +
                             " (" + std::to_string(bytes) + " bytes)" +
                             (available ? "; " + sizeText(available) + " available" : "") +
                             " (" + buffer.status().message() +
                             "): free tensors you no longer need, split the work, or use "
                             "another device",
                         bytes, name, available);
}

rt::VulkanContext &kiln::vulkanContext() {
  rt::StatusOr<rt::VulkanContext *> context = rt::VulkanContext::get();
  if (!context.isOk())
    throw DeviceError(context.status().message());
  return **context;
}

namespace {
/// The Vulkan context, or null when this machine has no Vulkan device (the
/// CPU device still exists then).
rt::VulkanContext *optionalVulkan() {
  rt::StatusOr<rt::VulkanContext *> context = rt::VulkanContext::get();
  return context.isOk() ? *context : nullptr;
}

size_t vulkanCount() {
  rt::VulkanContext *context = optionalVulkan();
  return context ? context->numDevices() : 0;
}
} // namespace

std::string kiln::listDevices() {
  std::string text = "cpu:0 (" + rt::CpuDevice::get().adapterName() + ")";
  if (rt::VulkanContext *context = optionalVulkan())
    for (size_t i = 0; i < context->numDevices(); ++i) {
      const rt::AdapterInfo &adapter = context->adapterOf(i);
      // The UUID tells two GPUs of one model apart (nvidia-smi -L prints
      // the same one); logical devices of one adapter share it.
      text += ", vulkan:" + std::to_string(i) + " (" + adapter.name + ", " +
              adapter.typeName() + ", uuid " + adapter.uuid +
              (adapter.pciAddress.empty() ? "" : ", pci " + adapter.pciAddress) + ")";
    }
  return text;
}

rt::Device &kiln::runtimeDevice(const Device &device) {
  if (device.kind() == DeviceKind::cpu)
    return rt::CpuDevice::get();
  rt::StatusOr<rt::VulkanDevice *> found =
      vulkanContext().device(static_cast<size_t>(device.index()));
  if (!found.isOk())
    throw DeviceError(found.status().message());
  return **found;
}

Device kiln::apiDevice(const rt::Device &device) { return Device::parse(device.name()); }

// DeviceKind is the runtime's DeviceApi, case for case.
static_assert(static_cast<int>(DeviceKind::metal) == static_cast<int>(rt::DeviceApi::metal) &&
              static_cast<int>(DeviceKind::vulkan) == static_cast<int>(rt::DeviceApi::vulkan));

Device::Device(DeviceKind kind, int index, std::string written)
    : kind_(kind), api_(rt::deviceApiName(static_cast<rt::DeviceApi>(kind))), index_(index),
      written_(std::move(written)) {}

Device Device::cpu() { return Device(DeviceKind::cpu, 0, "cpu"); }

Device Device::vulkan(int index) {
  std::string written = index < 0 ? "vulkan" : "vulkan:" + std::to_string(index);
  if (!optionalVulkan())
    throw DeviceError("device \"" + written + "\" does not exist: " +
                      rt::VulkanContext::get().status().message() +
                      "; the devices here are: " + listDevices());
  rt::VulkanContext &context = vulkanContext();
  if (index < 0)
    index = static_cast<int>(context.preferredOrdinal());
  if (static_cast<size_t>(index) >= context.numDevices())
    throw DeviceError("device \"" + written + "\" does not exist on this machine; "
                      "the devices here are: " + listDevices() +
                      " (KILN_VIRTUAL_DEVICES=N splits each adapter into N "
                      "logical devices)");
  return Device(DeviceKind::vulkan, index, written);
}

namespace {
/// Every spelling Device::parse and KILN_DEVICE accept, said one way.
const char *kValidNames =
    "\"default\", \"cpu\", \"cpu:0\", \"vulkan\" or \"vulkan:<index>\"";

/// Metal's absence, said one way wherever it is asked for.
DeviceError noMetal(const std::string &written) {
  return DeviceError("device \"" + written +
                     "\" does not exist: Metal runs on Apple platforms only, and this "
                     "build has no Metal runtime; the devices here are: " + listDevices());
}
} // namespace

Device Device::metal(int index) {
  throw noMetal(index < 0 ? "metal" : "metal:" + std::to_string(index));
}

Device Device::parse(std::string_view name) {
  if (name == "default") {
    Device device = default_device();
    device.written_ = "default";
    return device;
  }
  std::optional<rt::DeviceName> parsed = rt::parseDeviceName(name);
  if (!parsed && rt::parseDeviceApi(name.substr(0, name.find(':'))))
    throw DeviceError("malformed device name \"" + std::string(name) + "\": expected " +
                      kValidNames + "; the devices here are: " + listDevices());
  if (!parsed)
    throw DeviceError("unknown device \"" + std::string(name) + "\": expected " + kValidNames +
                      "; the devices here are: " + listDevices());
  std::optional<int> index = parsed->ordinal;
  switch (parsed->api) {
  case rt::DeviceApi::vulkan: {
    Device device = vulkan(index ? *index : -1);
    device.written_ = std::string(name);
    return device;
  }
  case rt::DeviceApi::cpu: {
    if (index && *index != 0)
      throw DeviceError("device \"" + std::string(name) +
                        "\" does not exist: there is one CPU device, \"cpu:0\"; the "
                        "devices here are: " + listDevices());
    Device device = cpu();
    device.written_ = std::string(name);
    return device;
  }
  case rt::DeviceApi::metal:
    break;
  }
  throw noMetal(std::string(name));
}

Device Device::default_device() {
  if (std::optional<std::string> env = environment::device()) {
    try {
      Device device = parse(*env);
      device.written_ = "KILN_DEVICE=" + *env;
      return device;
    } catch (const DeviceError &error) {
      throw DeviceError(std::string("KILN_DEVICE: ") + error.what());
    }
  }
  {
    std::lock_guard<std::mutex> lock(defaultMutex);
    if (programDefault)
      return *programDefault;
  }
  // A real GPU first; a Vulkan device that is itself a CPU (lavapipe) is
  // not preferred over the native CPU device, but stays available by name.
  if (rt::VulkanContext *context = optionalVulkan(); context && context->numDevices()) {
    size_t preferred = context->preferredOrdinal();
    rt::AdapterInfo::Type type = context->adapterOf(preferred).type;
    if (type == rt::AdapterInfo::Type::Discrete || type == rt::AdapterInfo::Type::Integrated) {
      Device device = vulkan(static_cast<int>(preferred));
      device.written_ = "default";
      return device;
    }
  }
  Device device = cpu();
  device.written_ = "default";
  return device;
}

void kiln::set_default_device(const Device &device) {
  std::lock_guard<std::mutex> lock(defaultMutex);
  programDefault = device;
}

std::string Device::name() const { return api_ + ":" + std::to_string(index_); }

std::string Device::adapter_name() const { return runtimeDevice(*this).adapterName(); }

std::string Device::adapter_uuid() const { return runtimeDevice(*this).adapterUuid(); }

std::string Device::adapter_pci() const {
  if (kind() != DeviceKind::vulkan)
    return "";
  return static_cast<rt::VulkanDevice &>(runtimeDevice(*this)).adapter().pciAddress;
}

std::vector<Device> kiln::devices() {
  std::vector<Device> all = {Device::cpu()};
  for (size_t i = 0; i < vulkanCount(); ++i)
    all.push_back(Device::vulkan(static_cast<int>(i)));
  return all;
}
