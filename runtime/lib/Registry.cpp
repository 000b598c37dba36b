//===- Registry.cpp - the devices of the process, by name -----------------===//

#include "kiln/runtime/Registry.h"
#include "kiln/runtime/DeviceName.h"

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
  std::optional<DeviceName> parsed = parseDeviceName(name);
  if (!parsed || parsed->api == DeviceApi::metal ||
      (parsed->api == DeviceApi::cpu && parsed->ordinal.value_or(0) != 0))
    return Status::invalidArgument("unknown device '" + name + "': use cpu:0 or vulkan:N");
  if (parsed->api == DeviceApi::cpu)
    return static_cast<Device *>(&CpuDevice::get());
  size_t ordinal = static_cast<size_t>(parsed->ordinal.value_or(0));
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
