//===- VulkanUtil.h - Small helpers shared by the Vulkan runtime -*- C++
//-*-===//
//
// Private to runtime/lib. Stateless helpers: VkResult to Status, UUID text.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_VULKANUTIL_H
#define KILN_RUNTIME_LIB_VULKANUTIL_H

#include "kiln/runtime/Status.h"
#include "kiln/runtime/Vulkan.h"

#include "VulkanApi.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::rt {

/// The Status code for a failed VkResult: out-of-memory results map to
/// OutOfMemory, a lost device or missing driver to Unavailable, the rest to
/// Internal.
Status::Code statusCodeOf(VkResult result);

/// "<what>: <VkResult name>" with the code from statusCodeOf.
Status vkFailure(VkResult result, std::string_view what);

/// 16 bytes as 8-4-4-4-12 lowercase hex.
std::string formatUuid(const uint8_t bytes[16]);

/// A kernel hash as 16 hex digits.
std::string formatHash(uint64_t hash);

/// "1.3.230".
std::string formatApiVersion(uint32_t version);

/// Whether `physical` offers the device extension `name`.
bool hasDeviceExtension(VkPhysicalDevice physical, const char *name);

/// Fills `chained` (one extension's features structure, sType set) for
/// `physical`.
template <class Features> void queryFeatures(VkPhysicalDevice physical, Features &chained) {
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &chained;
  vkGetPhysicalDeviceFeatures2(physical, &features);
}

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_VULKANUTIL_H
