//===- VkResultName.cpp - Names of VkResult values ------------------------===//
//
// Numeric values rather than enumerators, so the table compiles against any
// Vulkan header version and names codes newer than the header too.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Vulkan.h"

#include <iterator>

namespace kiln::rt {

namespace {
struct ResultName {
  int value;
  const char *name;
};
} // namespace

static constexpr ResultName kResultNames[] = {
    {0, "VK_SUCCESS"},
    {1, "VK_NOT_READY"},
    {2, "VK_TIMEOUT"},
    {3, "VK_EVENT_SET"},
    {4, "VK_EVENT_RESET"},
    {5, "VK_INCOMPLETE"},
    {-1, "VK_ERROR_OUT_OF_HOST_MEMORY"},
    {-2, "VK_ERROR_OUT_OF_DEVICE_MEMORY"},
    {-3, "VK_ERROR_INITIALIZATION_FAILED"},
    {-4, "VK_ERROR_DEVICE_LOST"},
    {-5, "VK_ERROR_MEMORY_MAP_FAILED"},
    {-6, "VK_ERROR_LAYER_NOT_PRESENT"},
    {-7, "VK_ERROR_EXTENSION_NOT_PRESENT"},
    {-8, "VK_ERROR_FEATURE_NOT_PRESENT"},
    {-9, "VK_ERROR_INCOMPATIBLE_DRIVER"},
    {-10, "VK_ERROR_TOO_MANY_OBJECTS"},
    {-11, "VK_ERROR_FORMAT_NOT_SUPPORTED"},
    {-12, "VK_ERROR_FRAGMENTED_POOL"},
    {-13, "VK_ERROR_UNKNOWN"},
    {-1000069000, "VK_ERROR_OUT_OF_POOL_MEMORY"},
    {-1000072003, "VK_ERROR_INVALID_EXTERNAL_HANDLE"},
    {-1000161000, "VK_ERROR_FRAGMENTATION"},
    {-1000257000, "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS"},
    {1000297000, "VK_PIPELINE_COMPILE_REQUIRED"},
    {-1000000000, "VK_ERROR_SURFACE_LOST_KHR"},
    {-1000000001, "VK_ERROR_NATIVE_WINDOW_IN_USE_KHR"},
    {1000001003, "VK_SUBOPTIMAL_KHR"},
    {-1000001004, "VK_ERROR_OUT_OF_DATE_KHR"},
    {-1000003001, "VK_ERROR_INCOMPATIBLE_DISPLAY_KHR"},
    {-1000011001, "VK_ERROR_VALIDATION_FAILED_EXT"},
    {-1000012000, "VK_ERROR_INVALID_SHADER_NV"},
    {-1000158000, "VK_ERROR_INVALID_DRM_FORMAT_MODIFIER_PLANE_LAYOUT_EXT"},
    {-1000174001, "VK_ERROR_NOT_PERMITTED_KHR"},
    {-1000255000, "VK_ERROR_FULL_SCREEN_EXCLUSIVE_MODE_LOST_EXT"},
    {1000268000, "VK_THREAD_IDLE_KHR"},
    {1000268001, "VK_THREAD_DONE_KHR"},
    {1000268002, "VK_OPERATION_DEFERRED_KHR"},
    {1000268003, "VK_OPERATION_NOT_DEFERRED_KHR"},
    {-1000338000, "VK_ERROR_COMPRESSION_EXHAUSTED_EXT"},
};

std::string vkResultName(int result) {
  for (const ResultName &entry : kResultNames)
    if (entry.value == result)
      return entry.name;
  return "VkResult(" + std::to_string(result) + ")";
}

} // namespace kiln::rt
