//===- Devices.h - from API handles to runtime devices ----------*- C++ -*-===//

#ifndef KILN_LIB_FRONTEND_DEVICES_H
#define KILN_LIB_FRONTEND_DEVICES_H

#include "lib/Compiler/RuntimeDevices.h"

#include "kiln/Device.h"
#include "kiln/Errors.h"
#include "kiln/runtime/Cpu.h"
#include "kiln/runtime/Vulkan.h"

namespace kiln {

/// The process's Vulkan context; throws DeviceError when Vulkan is missing.
rt::VulkanContext &vulkanContext();
/// The runtime device behind a handle; throws DeviceError.
rt::Device &runtimeDevice(const Device &device);
/// The API handle of a runtime device.
Device apiDevice(const rt::Device &device);
/// "vulkan:0 (llvmpipe ..., CPU), vulkan:1 (...)".
std::string listDevices();
/// A buffer of `bytes` on `device`; OutOfMemoryError naming the size, the
/// device and what it has left when there is no room.
std::shared_ptr<rt::Buffer> allocateOn(rt::Device &device, size_t bytes, const char *what);
/// The OutOfMemoryError for host memory (std::bad_alloc in the API).
OutOfMemoryError hostOutOfMemory(uint64_t bytes, const std::string &what);

} // namespace kiln

#endif // KILN_LIB_FRONTEND_DEVICES_H
