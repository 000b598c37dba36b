//===- Registry.h - the devices of the process, by name ---------*- C++ -*-===//
//
// The one place that maps device names to runtime devices: "cpu:0" (also
// "cpu") and "vulkan:N" (also "vulkan", the first). Tools and the Tensor
// API look devices up here instead of comparing API strings.
//
// Threading: any thread. Devices are created on first use and live until
// the process ends (their backends own them).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_REGISTRY_H
#define KILN_RUNTIME_REGISTRY_H

#include "kiln/runtime/Device.h"
#include "kiln/runtime/Status.h"

#include <string>
#include <vector>

namespace kiln::rt {

/// The device `name` names. An unknown name is InvalidArgument listing the
/// forms; a device that does not exist here is NotFound or Unavailable,
/// listing the devices that do.
StatusOr<Device *> findDevice(const std::string &name);

/// Every device here, in order: "cpu:0", then each Vulkan device.
std::vector<std::string> deviceNames();

/// The default device: the first Vulkan device, else the CPU.
Device &defaultDevice();

} // namespace kiln::rt

#endif // KILN_RUNTIME_REGISTRY_H
