//===- PipelineCacheBlob.h - Kiln's header around VkPipelineCache data -*- C++ -*-===//
//
// A driver trusts the VkPipelineCache data it is given: data saved by
// another driver version, another device or damaged on disk may crash it or
// be used as is. So the data is stored wrapped in a header of Kiln's own
// (magic, format version, the device's ids, driver version and
// pipelineCacheUUID, the payload's size and hash), and unwrapPipelineCache
// checks all of it, and the payload's own Vulkan header, before any driver
// sees the bytes.
//
// Layout, little-endian, 56 bytes then the payload:
//   0  "KILNPIPE"        8  u32 format version (1)
//   12 u32 vendorID      16 u32 deviceID        20 u32 driverVersion
//   24 u8 pipelineCacheUUID[16]
//   40 u64 payload size  48 u64 payload FNV-1a hash
//
// Plain integers rather than Vulkan types: this header does not include
// <vulkan/vulkan.h>. Threading: pure functions.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PIPELINECACHEBLOB_H
#define KILN_RUNTIME_PIPELINECACHEBLOB_H

#include "kiln/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

/// What VkPhysicalDeviceProperties says about the device whose pipeline
/// cache it is.
struct PipelineCacheIdentity {
  uint32_t vendorId = 0, deviceId = 0, driverVersion = 0;
  uint8_t uuid[16] = {}; ///< pipelineCacheUUID
};

/// The bytes of Kiln's header (see above).
constexpr size_t kPipelineCacheHeaderBytes = 56;

/// Kiln's header followed by `size` bytes of vkGetPipelineCacheData output.
std::vector<uint8_t> wrapPipelineCache(const PipelineCacheIdentity &device,
                                       const void *driverData, size_t size);

/// The driver's data if everything matches, else an error naming what did
/// not: the magic, the format version, vendor id, device id, driver
/// version, pipelineCacheUUID, payload size or payload hash of Kiln's
/// header, or the payload's own VkPipelineCacheHeaderVersionOne (header
/// size at least 32, header version 1, vendor id, device id, UUID).
StatusOr<std::vector<uint8_t>>
unwrapPipelineCache(const PipelineCacheIdentity &expected, const void *data,
                    size_t size);

/// "vendor:device:driver:uuid" in lower-case hex (vendor, device and driver
/// as 8 digits, the UUID as 32): the key for Store::*PipelineCache.
std::string fingerprint(const PipelineCacheIdentity &device);

} // namespace kiln::rt

#endif // KILN_RUNTIME_PIPELINECACHEBLOB_H
