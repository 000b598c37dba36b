//===- CooperativeMatrix.cpp - VK_KHR_cooperative_matrix queries -----------===//

#include "CooperativeMatrix.h"

#include "VulkanUtil.h"

#include <cstring>
#include <vector>

namespace kiln::rt {
namespace {
/// VkCooperativeMatrixPropertiesKHR.
struct CooperativeMatrixProperties {
  VkStructureType sType = VkStructureType(1000506001);
  void *pNext = nullptr;
  uint32_t MSize = 0, NSize = 0, KSize = 0;
  uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0; // VkComponentTypeKHR
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0; // VkScopeKHR
};
constexpr uint32_t kFloat16 = 0, kFloat32 = 1, kBFloat16 = 1000141000; // VkComponentTypeKHR
constexpr uint32_t kWorkgroupScope = 2, kSubgroupScope = 3; // VkScopeKHR
/// VkCooperativeMatrixFlexibleDimensionsPropertiesNV.
struct FlexibleDimensionsProperties {
  VkStructureType sType = VkStructureType(1000593001);
  void *pNext = nullptr;
  uint32_t MGranularity = 0, NGranularity = 0, KGranularity = 0;
  uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0;
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0;
  uint32_t workgroupInvocations = 0;
};
/// VkPhysicalDeviceCooperativeMatrix2PropertiesNV.
struct CooperativeMatrix2Properties {
  VkStructureType sType = VkStructureType(1000593002);
  void *pNext = nullptr;
  uint32_t workgroupScopeMaxWorkgroupSize = 0;
  uint32_t flexibleDimensionsMaxDimension = 0;
  uint32_t workgroupScopeReservedSharedMemory = 0;
};
} // namespace

/// What the instance-level entry point `name` (count, then fill) lists for
/// `physical`; empty where it is missing or fails.
template <class Properties>
static std::vector<Properties> listed(VkInstance instance, VkPhysicalDevice physical,
                                      const char *name) {
  using Get = VkResult(VKAPI_PTR *)(VkPhysicalDevice, uint32_t *, Properties *);
  auto get = reinterpret_cast<Get>(vkGetInstanceProcAddr(instance, name));
  uint32_t count = 0;
  if (!get || get(physical, &count, nullptr) != VK_SUCCESS)
    return {};
  std::vector<Properties> all(count);
  if (get(physical, &count, all.data()) != VK_SUCCESS)
    return {};
  all.resize(count);
  return all;
}

/// Whether the driver lists 16 x 16 x 16 subgroup matrices of `operand`
/// multiplied into f32.
static bool listsShape(VkInstance instance, VkPhysicalDevice physical, uint32_t operand) {
  for (const CooperativeMatrixProperties &p : listed<CooperativeMatrixProperties>(
           instance, physical, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"))
    if (p.MSize == 16 && p.NSize == 16 && p.KSize == 16 && p.AType == operand &&
        p.BType == operand && p.CType == kFloat32 && p.ResultType == kFloat32 &&
        p.scope == kSubgroupScope && !p.saturatingAccumulation)
      return true;
  return false;
}

bool hasF16CooperativeMatrix(VkInstance instance, VkPhysicalDevice physical,
                             uint32_t apiVersion) {
  if (apiVersion < VK_API_VERSION_1_2 || !instance)
    return false;
  if (!hasDeviceExtension(physical, kCooperativeMatrixExtension))
    return false;
  CooperativeMatrixFeatures coop;
  VkPhysicalDeviceVulkan12Features v12{};
  v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  v12.pNext = &coop;
  VkPhysicalDeviceVulkan11Features v11{};
  v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  v11.pNext = &v12;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &v11;
  vkGetPhysicalDeviceFeatures2(physical, &features);
  if (!coop.cooperativeMatrix || !v12.vulkanMemoryModel || !v12.shaderFloat16 ||
      !v11.storageBuffer16BitAccess)
    return false;
  return listsShape(instance, physical, kFloat16);
}

bool hasBF16CooperativeMatrix(VkInstance instance, VkPhysicalDevice physical) {
  if (!hasDeviceExtension(physical, kShaderBFloat16Extension))
    return false;
  ShaderBFloat16Features bf16;
  queryFeatures(physical, bf16);
  return bf16.shaderBFloat16Type && bf16.shaderBFloat16CooperativeMatrix &&
         listsShape(instance, physical, kBFloat16);
}

WorkgroupCooperativeMatrix queryWorkgroupCooperativeMatrix(VkInstance instance,
                                                           VkPhysicalDevice physical) {
  WorkgroupCooperativeMatrix none;
  if (!hasDeviceExtension(physical, kCooperativeMatrix2Extension))
    return none;
  CooperativeMatrix2Features coop2;
  queryFeatures(physical, coop2);
  if (!coop2.cooperativeMatrixWorkgroupScope || !coop2.cooperativeMatrixFlexibleDimensions)
    return none;
  CooperativeMatrix2Properties limits;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &limits;
  vkGetPhysicalDeviceProperties2(physical, &props);
  WorkgroupCooperativeMatrix best;
  for (const FlexibleDimensionsProperties &p : listed<FlexibleDimensionsProperties>(
           instance, physical, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV")) {
    if (p.AType != kFloat16 || p.BType != kFloat16 || p.CType != kFloat32 ||
        p.ResultType != kFloat32 || p.scope != kWorkgroupScope || p.saturatingAccumulation ||
        p.workgroupInvocations > limits.workgroupScopeMaxWorkgroupSize ||
        p.workgroupInvocations <= best.invocations)
      continue;
    best.invocations = p.workgroupInvocations;
    best.granularity[0] = p.MGranularity;
    best.granularity[1] = p.NGranularity;
    best.granularity[2] = p.KGranularity;
  }
  if (best.invocations) {
    best.maxDimension = limits.flexibleDimensionsMaxDimension;
    best.reservedSharedBytes = limits.workgroupScopeReservedSharedMemory;
    best.tensorAddressing = coop2.cooperativeMatrixTensorAddressing;
  }
  return best;
}

} // namespace kiln::rt
