//===- RuntimeDevices.h - placements as the runtime's devices ---*- C++ -*-===//
//
// The compiler's view of where a kernel runs: the #kiln.device placement
// on its op, and the runtime device that names (the runtime's registry,
// rt::findDevice). Runtime statuses become kiln::Error here. No front-end
// types: the Tensor API's Device is lib/Frontend/Devices.h's.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_RUNTIMEDEVICES_H
#define KILN_LIB_COMPILER_RUNTIMEDEVICES_H

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/runtime/Device.h"
#include "kiln/runtime/Status.h"
#include "kiln/runtime/Vulkan.h"

namespace kiln {

/// Throws kiln::Error "<what>: <message>" for a failed status.
void check(const rt::Status &status, const char *what);

/// The placement of a placed op (after kiln-place-devices).
DeviceAttr placementOf(mlir::Operation *op);
/// The runtime device a placement names; throws DeviceError when this
/// machine has none such.
rt::Device &runtimeDeviceOf(DeviceAttr device);
/// The same for a Vulkan placement.
rt::VulkanDevice &vulkanDeviceOf(DeviceAttr device);

} // namespace kiln

#endif // KILN_LIB_COMPILER_RUNTIMEDEVICES_H
