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
constexpr uint32_t kFloat16 = 0, kFloat32 = 1; // VkComponentTypeKHR
constexpr uint32_t kSubgroupScope = 3;         // VkScopeKHR
using GetProperties = VkResult(VKAPI_PTR *)(VkPhysicalDevice, uint32_t *,
                                            CooperativeMatrixProperties *);
} // namespace

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
  auto get = reinterpret_cast<GetProperties>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  uint32_t count = 0;
  if (!get || get(physical, &count, nullptr) != VK_SUCCESS)
    return false;
  std::vector<CooperativeMatrixProperties> shapes(count);
  if (get(physical, &count, shapes.data()) != VK_SUCCESS)
    return false;
  for (const CooperativeMatrixProperties &p : shapes)
    if (p.MSize == 16 && p.NSize == 16 && p.KSize == 16 && p.AType == kFloat16 &&
        p.BType == kFloat16 && p.CType == kFloat32 && p.ResultType == kFloat32 &&
        p.scope == kSubgroupScope && !p.saturatingAccumulation)
      return true;
  return false;
}

} // namespace kiln::rt
