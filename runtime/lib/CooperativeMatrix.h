//===- CooperativeMatrix.h - VK_KHR_cooperative_matrix ----------*- C++ -*-===//
//
// Private to runtime/lib. Debian 12's Vulkan headers (1.3.239) predate
// VK_KHR_cooperative_matrix (1.3.255), so its structures are declared here
// from the registry, and its entry point is looked up at run time.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_COOPERATIVEMATRIX_H
#define KILN_RUNTIME_LIB_COOPERATIVEMATRIX_H

#include <vulkan/vulkan.h>

namespace kiln::rt {

inline constexpr const char *kCooperativeMatrixExtension = "VK_KHR_cooperative_matrix";

/// VkPhysicalDeviceCooperativeMatrixFeaturesKHR.
struct CooperativeMatrixFeatures {
  VkStructureType sType = VkStructureType(1000506000);
  void *pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};

/// Whether the device multiplies 16 x 16 x 16 f16 cooperative matrices
/// into f32 at subgroup scope (the one shape Kiln's coop_gemm form emits)
/// and has what those kernels need besides: the extension and its feature,
/// the Vulkan memory model, f16 arithmetic and 16-bit storage.
bool hasF16CooperativeMatrix(VkInstance instance, VkPhysicalDevice physical,
                             uint32_t apiVersion);

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_COOPERATIVEMATRIX_H
