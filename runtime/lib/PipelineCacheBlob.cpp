//===- PipelineCacheBlob.cpp - Kiln's header around VkPipelineCache data --===//
//
// Fields are written and read byte by byte in little-endian order, so the
// layout does not depend on the host's struct padding or byte order.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/PipelineCacheBlob.h"

#include "kiln/runtime/Store.h"

#include <cstdio>
#include <cstring>

namespace kiln::rt {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'I', 'P', 'E'};
constexpr uint32_t kFormatVersion = 1;
/// sizeof(VkPipelineCacheHeaderVersionOne): four u32 and a 16-byte UUID.
constexpr size_t kVulkanHeaderBytes = 32;
constexpr uint32_t kVulkanHeaderVersionOne = 1;

void putU32(std::vector<uint8_t> &out, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out.push_back(uint8_t(value >> (8 * i)));
}

void putU64(std::vector<uint8_t> &out, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out.push_back(uint8_t(value >> (8 * i)));
}

uint32_t getU32(const uint8_t *bytes) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i)
    value |= uint32_t(bytes[i]) << (8 * i);
  return value;
}

uint64_t getU64(const uint8_t *bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i)
    value |= uint64_t(bytes[i]) << (8 * i);
  return value;
}

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%x", value);
  return text;
}

std::string uuidHex(const uint8_t *uuid) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    out += digits[uuid[i] >> 4];
    out += digits[uuid[i] & 15];
  }
  return out;
}

Status mismatch(const std::string &field, const std::string &found,
                const std::string &expected, const char *meaning) {
  return Status::invalidArgument("pipeline cache data: " + field + " " + found +
                                 ", expected " + expected + " (" + meaning +
                                 "; it is not used)");
}

} // namespace

std::vector<uint8_t> wrapPipelineCache(const PipelineCacheIdentity &device,
                                       const void *driverData, size_t size) {
  std::vector<uint8_t> out;
  out.reserve(kPipelineCacheHeaderBytes + size);
  out.insert(out.end(), kMagic, kMagic + sizeof(kMagic));
  putU32(out, kFormatVersion);
  putU32(out, device.vendorId);
  putU32(out, device.deviceId);
  putU32(out, device.driverVersion);
  out.insert(out.end(), device.uuid, device.uuid + 16);
  putU64(out, size);
  putU64(out, fnv1a64(driverData, size));
  const auto *bytes = static_cast<const uint8_t *>(driverData);
  if (size)
    out.insert(out.end(), bytes, bytes + size);
  return out;
}

StatusOr<std::vector<uint8_t>>
unwrapPipelineCache(const PipelineCacheIdentity &expected, const void *data,
                    size_t size) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  if (size < sizeof(kMagic) || std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0)
    return Status::invalidArgument(
        "pipeline cache data: no KILNPIPE magic (not written by kiln, or "
        "damaged; it is not used)");
  if (size < kPipelineCacheHeaderBytes)
    return Status::invalidArgument(
        "pipeline cache data: " + std::to_string(size) + " bytes, shorter than "
        "kiln's " + std::to_string(kPipelineCacheHeaderBytes) +
        "-byte header (truncated; it is not used)");
  if (uint32_t version = getU32(bytes + 8); version != kFormatVersion)
    return mismatch("format version", std::to_string(version),
                    std::to_string(kFormatVersion), "written by another kiln");
  if (uint32_t vendor = getU32(bytes + 12); vendor != expected.vendorId)
    return mismatch("vendor id", hex32(vendor), hex32(expected.vendorId),
                    "saved for another device");
  if (uint32_t deviceId = getU32(bytes + 16); deviceId != expected.deviceId)
    return mismatch("device id", hex32(deviceId), hex32(expected.deviceId),
                    "saved for another device");
  if (uint32_t driver = getU32(bytes + 20); driver != expected.driverVersion)
    return mismatch("driver version", hex32(driver),
                    hex32(expected.driverVersion),
                    "saved by another driver version");
  if (std::memcmp(bytes + 24, expected.uuid, 16) != 0)
    return mismatch("pipelineCacheUUID", uuidHex(bytes + 24),
                    uuidHex(expected.uuid), "saved by another driver build");
  uint64_t payloadSize = getU64(bytes + 40);
  if (payloadSize != size - kPipelineCacheHeaderBytes)
    return mismatch("payload size", std::to_string(payloadSize),
                    std::to_string(size - kPipelineCacheHeaderBytes) +
                        " (the bytes after the header)",
                    "truncated or damaged");
  const uint8_t *payload = bytes + kPipelineCacheHeaderBytes;
  if (getU64(bytes + 48) != fnv1a64(payload, payloadSize))
    return Status::invalidArgument(
        "pipeline cache data: the payload does not match its hash (damaged; "
        "it is not used)");

  // The driver's own header: kiln's header could be intact around data
  // that some other program produced.
  if (payloadSize < kVulkanHeaderBytes)
    return Status::invalidArgument(
        "pipeline cache data: the payload is " + std::to_string(payloadSize) +
        " bytes, shorter than the 32-byte vulkan header (it is not used)");
  uint32_t headerSize = getU32(payload);
  if (headerSize < kVulkanHeaderBytes || headerSize > payloadSize)
    return mismatch("vulkan header size", std::to_string(headerSize),
                    "32 to " + std::to_string(payloadSize), "damaged");
  if (uint32_t version = getU32(payload + 4); version != kVulkanHeaderVersionOne)
    return mismatch("vulkan header version", std::to_string(version), "1",
                    "an unknown layout");
  if (uint32_t vendor = getU32(payload + 8); vendor != expected.vendorId)
    return mismatch("vulkan header vendor id", hex32(vendor),
                    hex32(expected.vendorId), "the driver's data is for another device");
  if (uint32_t deviceId = getU32(payload + 12); deviceId != expected.deviceId)
    return mismatch("vulkan header device id", hex32(deviceId),
                    hex32(expected.deviceId), "the driver's data is for another device");
  if (std::memcmp(payload + 16, expected.uuid, 16) != 0)
    return mismatch("vulkan header pipelineCacheUUID", uuidHex(payload + 16),
                    uuidHex(expected.uuid), "the driver's data is from another build");
  return std::vector<uint8_t>(payload, payload + payloadSize);
}

std::string fingerprint(const PipelineCacheIdentity &device) {
  char ids[40];
  std::snprintf(ids, sizeof(ids), "%08x:%08x:%08x:", device.vendorId,
                device.deviceId, device.driverVersion);
  return ids + uuidHex(device.uuid);
}

} // namespace kiln::rt
