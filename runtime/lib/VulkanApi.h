//===- VulkanApi.h - Vulkan's functions, loaded at run time -----*- C++ -*-===//
//
// Private to runtime/lib. Vulkan's entry points are volk's function
// pointers, filled when the first Vulkan context starts (volkInitialize
// opens libvulkan.so.1 with dlopen), so the runtime links no Vulkan
// library: a CPU-only user needs no Vulkan loader installed.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_VULKANAPI_H
#define KILN_RUNTIME_LIB_VULKANAPI_H

#include <volk.h>

#endif // KILN_RUNTIME_LIB_VULKANAPI_H
