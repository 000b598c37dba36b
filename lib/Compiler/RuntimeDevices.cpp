//===- RuntimeDevices.cpp - placements as the runtime's devices -----------===//

#include "lib/Compiler/RuntimeDevices.h"

#include "kiln/Errors.h"
#include "kiln/runtime/Registry.h"

using namespace kiln;

void kiln::check(const rt::Status &status, const char *what) {
  if (!status.isOk())
    throw Error(std::string(what) + ": " + status.message());
}

DeviceAttr kiln::placementOf(mlir::Operation *op) {
  return mlir::cast<PlacedOpInterface>(op).getPlacement();
}

rt::Device &kiln::runtimeDeviceOf(DeviceAttr device) {
  rt::StatusOr<rt::Device *> found = rt::findDevice(device.getName());
  if (!found.isOk())
    throw DeviceError(found.status().message());
  return **found;
}

rt::VulkanDevice &kiln::vulkanDeviceOf(DeviceAttr device) {
  rt::Device &found = runtimeDeviceOf(device);
  rt::VulkanDevice *vulkan = found.replayDevice();
  if (device.kind() != TargetApi::vulkan || !vulkan)
    throw DeviceError("internal error: " + device.getName() + " is not a Vulkan device");
  return *vulkan;
}
