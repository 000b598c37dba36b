//===- Registry.cpp - the devices of the process, by name -----------------===//

#include "kiln/runtime/Registry.h"

#include "kiln/runtime/Cpu.h"
#include "kiln/runtime/Vulkan.h"

using namespace kiln::rt;

std::vector<std::string> kiln::rt::deviceNames() {
  std::vector<std::string> names = {"cpu:0"};
  StatusOr<VulkanContext *> context = VulkanContext::get();
  if (context.isOk())
    for (size_t i = 0; i < (*context)->numDevices(); ++i)
      names.push_back("vulkan:" + std::to_string(i));
  return names;
}

StatusOr<Device *> kiln::rt::findDevice(const std::string &name) {
  if (name == "cpu" || name == "cpu:0")
    return static_cast<Device *>(&CpuDevice::get());
  size_t ordinal = 0;
  if (name == "vulkan") {
    ordinal = 0;
  } else if (name.rfind("vulkan:", 0) == 0 && name.size() > 7 && name.size() < 12 &&
             name.find_first_not_of("0123456789", 7) == std::string::npos) {
    ordinal = std::stoul(name.substr(7));
  } else {
    return Status::invalidArgument("unknown device '" + name + "': use cpu:0 or vulkan:N");
  }
  StatusOr<VulkanContext *> context = VulkanContext::get();
  if (!context.isOk())
    return Status::unavailable("no Vulkan here (" + context.status().message() +
                               "): use cpu:0");
  StatusOr<VulkanDevice *> device = (*context)->device(ordinal);
  if (!device.isOk())
    return device.status();
  return static_cast<Device *>(*device);
}

Device &kiln::rt::defaultDevice() {
  StatusOr<VulkanContext *> context = VulkanContext::get();
  if (context.isOk() && (*context)->numDevices() > 0) {
    StatusOr<VulkanDevice *> device = (*context)->device(0);
    if (device.isOk())
      return **device;
  }
  return CpuDevice::get();
}
