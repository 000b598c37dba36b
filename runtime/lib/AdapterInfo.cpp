//===- AdapterInfo.cpp - Describing a VkPhysicalDevice --------------------===//
//
// Queries only; no Vulkan object is created. Safe from any thread.
//
//===----------------------------------------------------------------------===//

#include "AdapterInfo.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "VulkanUtil.h"

#include <algorithm>

namespace kiln::rt {

std::string AdapterInfo::typeName() const {
  switch (type) {
  case Type::Discrete:
    return "discrete GPU";
  case Type::Integrated:
    return "integrated GPU";
  case Type::Virtual:
    return "virtual GPU";
  case Type::Cpu:
    return "CPU";
  case Type::Other:
    return "other";
  }
  return "other";
}

static AdapterInfo::Type adapterType(VkPhysicalDeviceType type) {
  switch (type) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    return AdapterInfo::Type::Discrete;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    return AdapterInfo::Type::Integrated;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
    return AdapterInfo::Type::Virtual;
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    return AdapterInfo::Type::Cpu;
  default:
    return AdapterInfo::Type::Other;
  }
}

/// Subgroup size control and the shader features kernels declare.
static void describeShaderFeatures(VkPhysicalDevice physical, uint32_t apiVersion,
                                   AdapterInfo &info) {
  VkPhysicalDeviceSubgroupSizeControlFeatures control{};
  control.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  VkPhysicalDeviceVulkan11Features v11{};
  v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  VkPhysicalDeviceVulkan12Features v12{};
  v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  bool chained = apiVersion >= VK_API_VERSION_1_2;
  bool canControl =
      apiVersion >= VK_API_VERSION_1_3 ||
      hasDeviceExtension(physical, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  if (chained) {
    features.pNext = &v11;
    v11.pNext = &v12;
    v12.pNext = canControl ? &control : nullptr;
  } else if (canControl) {
    features.pNext = &control;
  }
  vkGetPhysicalDeviceFeatures2(physical, &features);
  info.shaderInt64 = features.features.shaderInt64;
  info.shaderInt16 = features.features.shaderInt16;
  info.shaderFloat16 = chained && v12.shaderFloat16;
  info.shaderInt8 = chained && v12.shaderInt8;
  info.storageBuffer8BitAccess = chained && v12.storageBuffer8BitAccess;
  info.storageBuffer16BitAccess = chained && v11.storageBuffer16BitAccess;
  // Enabled only where the device's features chain (DeviceState.cpp).
  if (!chained || !canControl || !control.subgroupSizeControl)
    return;
  VkPhysicalDeviceSubgroupSizeControlProperties sizes{};
  sizes.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &sizes;
  vkGetPhysicalDeviceProperties2(physical, &props);
  if (!(sizes.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT))
    return;
  info.minSubgroupSize = sizes.minSubgroupSize;
  info.maxSubgroupSize = sizes.maxSubgroupSize;
  info.maxComputeWorkgroupSubgroups = sizes.maxComputeWorkgroupSubgroups;
}

AdapterInfo describeAdapter(VkPhysicalDevice physical,
                            uint32_t instanceApiVersion) {
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical, &props);

  AdapterInfo info;
  info.name = props.deviceName;
  info.vendorId = props.vendorID;
  info.deviceId = props.deviceID;
  info.driverVersion = props.driverVersion;
  std::memcpy(info.pipelineCacheUUID, props.pipelineCacheUUID, sizeof(info.pipelineCacheUUID));
  info.apiVersion = props.apiVersion;
  info.type = adapterType(props.deviceType);
  const VkPhysicalDeviceLimits &limits = props.limits;
  for (int i = 0; i < 3; ++i) {
    info.maxWorkgroupCount[i] = limits.maxComputeWorkGroupCount[i];
    info.maxWorkgroupSize[i] = limits.maxComputeWorkGroupSize[i];
  }
  info.maxWorkgroupInvocations = limits.maxComputeWorkGroupInvocations;
  info.maxSharedMemoryBytes = limits.maxComputeSharedMemorySize;
  info.maxStorageBufferRange = limits.maxStorageBufferRange;
  info.timestampPeriod = limits.timestampComputeAndGraphics ? limits.timestampPeriod : 0.0f;
  info.maxStorageBuffersPerStage = std::min(limits.maxPerStageDescriptorStorageBuffers,
                                            limits.maxDescriptorSetStorageBuffers);

  // deviceUUID and the subgroup size are Vulkan 1.1 queries; a 1.0 device
  // reports a zero UUID and a subgroup of one lane (always correct to assume).
  uint8_t uuid[VK_UUID_SIZE] = {};
  info.subgroupSize = 1;
  if (instanceApiVersion >= VK_API_VERSION_1_1 &&
      props.apiVersion >= VK_API_VERSION_1_1) {
    VkPhysicalDeviceSubgroupProperties subgroup{};
    subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    VkPhysicalDeviceDriverProperties driver{};
    driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    bool hasDriver = props.apiVersion >= VK_API_VERSION_1_2;
    subgroup.pNext = hasDriver ? &driver : nullptr;
    // Compute units, where an extension reports them (NVIDIA's SMs, AMD's
    // compute units): kernels are sized to give each several workgroups.
    uint32_t count = 0;
    vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
    std::vector<VkExtensionProperties> extensions(count);
    vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, extensions.data());
    auto has = [&](const char *name) {
      for (const VkExtensionProperties &e : extensions)
        if (std::strcmp(e.extensionName, name) == 0)
          return true;
      return false;
    };
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sms{};
    sms.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV;
    VkPhysicalDeviceShaderCorePropertiesAMD cores{};
    cores.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD;
    void *chain = &subgroup;
    if (has(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
      sms.pNext = chain;
      chain = &sms;
    }
    if (has(VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) {
      cores.pNext = chain;
      chain = &cores;
    }
    VkPhysicalDevicePCIBusInfoPropertiesEXT pci{};
    pci.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
    bool hasPci = has(VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
    if (hasPci) {
      pci.pNext = chain;
      chain = &pci;
    }
    VkPhysicalDeviceIDProperties ids{};
    ids.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
    ids.pNext = chain;
    VkPhysicalDeviceProperties2 props2{};
    props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    props2.pNext = &ids;
    vkGetPhysicalDeviceProperties2(physical, &props2);
    for (uint32_t i = 0; i < VK_UUID_SIZE; ++i)
      uuid[i] = ids.deviceUUID[i];
    if (subgroup.subgroupSize != 0)
      info.subgroupSize = subgroup.subgroupSize;
    describeShaderFeatures(physical, std::min(instanceApiVersion, props.apiVersion), info);
    if (hasPci) {
      char address[32];
      std::snprintf(address, sizeof address, "%04x:%02x:%02x.%x", pci.pciDomain, pci.pciBus,
                    pci.pciDevice, pci.pciFunction);
      info.pciAddress = address;
    }
    info.computeUnits = sms.shaderSMCount ? sms.shaderSMCount
                                          : cores.shaderEngineCount * cores.shaderArraysPerEngineCount *
                                                cores.computeUnitsPerShaderArray;
    // llvmpipe ends every loop of a shader invocation once 65535 iterations
    // have run in all (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS), without a word;
    // no Vulkan limit reports it.
    if (hasDriver && driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE)
      info.maxLoopIterations = 65535;
  }
  info.uuid = formatUuid(uuid);
  return info;
}

std::vector<size_t> adapterOrder(const std::vector<AdapterInfo> &adapters) {
  auto rank = [](AdapterInfo::Type type) {
    switch (type) {
    case AdapterInfo::Type::Discrete:
      return 0;
    case AdapterInfo::Type::Integrated:
      return 1;
    case AdapterInfo::Type::Virtual:
      return 2;
    case AdapterInfo::Type::Other:
      return 3;
    case AdapterInfo::Type::Cpu:
      return 4;
    }
    return 3;
  };
  // PCI addresses order a kind only where all of its adapters have one: a
  // kind half with and half without would have no sensible order.
  bool pciOrders[5] = {true, true, true, true, true};
  for (const AdapterInfo &a : adapters)
    if (a.pciAddress.empty())
      pciOrders[rank(a.type)] = false;
  std::vector<size_t> order(adapters.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  // Fixed-width hex ("%04x:%02x:%02x.%x"): string order is address order.
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const AdapterInfo &a = adapters[x], &b = adapters[y];
    if (rank(a.type) != rank(b.type))
      return rank(a.type) < rank(b.type);
    return pciOrders[rank(a.type)] && a.pciAddress < b.pciAddress;
  });
  return order;
}

} // namespace kiln::rt
