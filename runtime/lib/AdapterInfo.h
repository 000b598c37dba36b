//===- AdapterInfo.h - Describing a VkPhysicalDevice ------------*- C++ -*-===//
//
// Private to runtime/lib. Fills the public AdapterInfo from Vulkan queries.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_ADAPTERINFO_H
#define KILN_RUNTIME_LIB_ADAPTERINFO_H

#include "kiln/runtime/Vulkan.h"

#include "VulkanApi.h"

namespace kiln::rt {

/// `instanceApiVersion` is the version the instance was created with:
/// subgroup properties need Vulkan 1.1 on both instance and device.
AdapterInfo describeAdapter(VkPhysicalDevice physical,
                            uint32_t instanceApiVersion);

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_ADAPTERINFO_H
