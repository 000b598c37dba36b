//===- Device.cpp - resolving device names --------------------------------===//

#include "Devices.h"

#include "kiln/Errors.h"

#include <cstdlib>
#include <mutex>
#include <optional>

using namespace kiln;

namespace {
std::mutex defaultMutex;
std::optional<Device> programDefault;

std::optional<int> parseIndex(std::string_view text) {
  if (text.empty() || text.size() > 6)
    return std::nullopt;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}
} // namespace

void kiln::check(const rt::Status &status, const char *what) {
  if (!status.isOk())
    throw Error(std::string(what) + ": " + status.message());
}

rt::VulkanContext &kiln::vulkanContext() {
  rt::StatusOr<rt::VulkanContext *> context = rt::VulkanContext::get();
  if (!context.isOk())
    throw DeviceError(context.status().message());
  return **context;
}

std::string kiln::listDevices() {
  rt::VulkanContext &context = vulkanContext();
  std::string text;
  for (size_t i = 0; i < context.numDevices(); ++i) {
    const rt::AdapterInfo &adapter = context.adapterOf(i);
    text += (i ? ", " : "") + std::string("vulkan:") + std::to_string(i) + " (" +
            adapter.name + ", " + adapter.typeName() + ")";
  }
  return text.empty() ? "none" : text;
}

rt::VulkanDevice &kiln::runtimeDevice(const Device &device) {
  rt::StatusOr<rt::VulkanDevice *> found =
      vulkanContext().device(static_cast<size_t>(device.index()));
  if (!found.isOk())
    throw DeviceError(found.status().message());
  return **found;
}

Device Device::vulkan(int index) {
  rt::VulkanContext &context = vulkanContext();
  std::string written = index < 0 ? "vulkan" : "vulkan:" + std::to_string(index);
  if (index < 0)
    index = static_cast<int>(context.preferredOrdinal());
  if (static_cast<size_t>(index) >= context.numDevices())
    throw DeviceError("device \"" + written + "\" does not exist on this machine; "
                      "the devices here are: " + listDevices() +
                      " (KILN_VIRTUAL_DEVICES=N splits each adapter into N "
                      "logical devices)");
  return Device("vulkan", index, written);
}

Device Device::metal(int index) {
  throw DeviceError("device \"metal:" + std::to_string(index) +
                    "\" does not exist: Metal is available on Apple platforms only; "
                    "the devices here are: " + listDevices());
}

Device Device::parse(std::string_view name) {
  if (name == "default") {
    Device device = default_device();
    device.written_ = "default";
    return device;
  }
  std::string_view api = name.substr(0, name.find(':'));
  std::optional<int> index;
  if (api.size() < name.size()) {
    index = parseIndex(name.substr(api.size() + 1));
    if (!index)
      throw DeviceError("malformed device name \"" + std::string(name) +
                        "\": expected \"vulkan\" or \"vulkan:<index>\"; the "
                        "devices here are: " + listDevices());
  }
  if (api == "vulkan") {
    Device device = vulkan(index ? *index : -1);
    device.written_ = std::string(name);
    return device;
  }
  if (api == "metal" || api == "cpu")
    throw DeviceError("device \"" + std::string(name) +
                      "\" is not available in this build on this machine; the "
                      "devices here are: " + listDevices());
  throw DeviceError("unknown device \"" + std::string(name) +
                    "\": expected \"default\", \"vulkan\" or \"vulkan:<index>\"; "
                    "the devices here are: " + listDevices());
}

Device Device::default_device() {
  if (const char *env = std::getenv("KILN_DEVICE"); env && *env) {
    try {
      Device device = parse(env);
      device.written_ = "KILN_DEVICE=" + std::string(env);
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
  Device device = vulkan(-1);
  device.written_ = "default";
  return device;
}

void kiln::set_default_device(const Device &device) {
  std::lock_guard<std::mutex> lock(defaultMutex);
  programDefault = device;
}

std::string Device::name() const { return api_ + ":" + std::to_string(index_); }

std::string Device::adapter_name() const {
  return vulkanContext().adapterOf(static_cast<size_t>(index_)).name;
}

std::string Device::adapter_uuid() const {
  return vulkanContext().adapterOf(static_cast<size_t>(index_)).uuid;
}

std::vector<Device> kiln::devices() {
  std::vector<Device> all;
  for (size_t i = 0; i < vulkanContext().numDevices(); ++i)
    all.push_back(Device::vulkan(static_cast<int>(i)));
  return all;
}
