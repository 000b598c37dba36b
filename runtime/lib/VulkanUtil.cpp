//===- VulkanUtil.cpp - Small helpers shared by the Vulkan runtime --------===//
//
// Stateless; safe from any thread.
//
//===----------------------------------------------------------------------===//

#include "VulkanUtil.h"

#include "kiln/runtime/Vulkan.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace kiln::rt {

Status::Code statusCodeOf(VkResult result) {
  switch (result) {
  case VK_ERROR_OUT_OF_HOST_MEMORY:
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
  case VK_ERROR_OUT_OF_POOL_MEMORY:
  case VK_ERROR_FRAGMENTED_POOL:
  case VK_ERROR_FRAGMENTATION:
  case VK_ERROR_TOO_MANY_OBJECTS:
    return Status::Code::OutOfMemory;
  case VK_ERROR_DEVICE_LOST:
  case VK_ERROR_INCOMPATIBLE_DRIVER:
  case VK_ERROR_INITIALIZATION_FAILED:
  case VK_ERROR_LAYER_NOT_PRESENT:
  case VK_ERROR_EXTENSION_NOT_PRESENT:
  case VK_ERROR_FEATURE_NOT_PRESENT:
    return Status::Code::Unavailable;
  default:
    return Status::Code::Internal;
  }
}

Status vkFailure(VkResult result, std::string_view what) {
  return Status(statusCodeOf(result),
                std::string(what) + ": " + vkResultName(result));
}

std::string formatUuid(const uint8_t bytes[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      text += '-';
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 0xf];
  }
  return text;
}

std::string formatHash(uint64_t hash) {
  char text[24];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(hash));
  return text;
}

std::string formatApiVersion(uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
         std::to_string(VK_API_VERSION_MINOR(version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(version));
}

bool hasDeviceExtension(VkPhysicalDevice physical, const char *name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, extensions.data());
  for (const VkExtensionProperties &extension : extensions)
    if (std::strcmp(extension.extensionName, name) == 0)
      return true;
  return false;
}

} // namespace kiln::rt
