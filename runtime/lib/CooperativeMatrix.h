//===- CooperativeMatrix.h - VK_KHR_cooperative_matrix ----------*- C++ -*-===//
//
// Private to runtime/lib. Debian 12's Vulkan headers (1.3.239) predate
// VK_KHR_cooperative_matrix (1.3.255), so its structures are declared here
// from the registry, and its entry point is looked up at run time.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_COOPERATIVEMATRIX_H
#define KILN_RUNTIME_LIB_COOPERATIVEMATRIX_H

#include "VulkanApi.h"

namespace kiln::rt {

inline constexpr const char *kCooperativeMatrixExtension = "VK_KHR_cooperative_matrix";

/// VkPhysicalDeviceCooperativeMatrixFeaturesKHR.
struct CooperativeMatrixFeatures {
  VkStructureType sType = VkStructureType(1000506000);
  void *pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};

inline constexpr const char *kCooperativeMatrix2Extension = "VK_NV_cooperative_matrix2";

/// VkPhysicalDeviceCooperativeMatrix2FeaturesNV (Vulkan 1.4.303; NVIDIA's
/// workgroup-scope matrices, staged through shared memory by the driver).
struct CooperativeMatrix2Features {
  VkStructureType sType = VkStructureType(1000593000);
  void *pNext = nullptr;
  VkBool32 cooperativeMatrixWorkgroupScope = VK_FALSE;
  VkBool32 cooperativeMatrixFlexibleDimensions = VK_FALSE;
  VkBool32 cooperativeMatrixReductions = VK_FALSE;
  VkBool32 cooperativeMatrixConversions = VK_FALSE;
  VkBool32 cooperativeMatrixPerElementOperations = VK_FALSE;
  VkBool32 cooperativeMatrixTensorAddressing = VK_FALSE;
  VkBool32 cooperativeMatrixBlockLoads = VK_FALSE;
};

/// What VK_NV_cooperative_matrix2 offers for f16 x f16 -> f32 at workgroup
/// scope with flexible dimensions; all zero where it does not.
struct WorkgroupCooperativeMatrix {
  /// Invocations a workgroup using such matrices has (the driver lists the
  /// sizes it tuned; the largest is kept).
  uint32_t invocations = 0;
  /// Row, column and depth granularity of the matrices' dimensions.
  uint32_t granularity[3] = {0, 0, 0};
  /// Largest dimension, and shared memory the driver keeps for its staging.
  uint32_t maxDimension = 0;
  uint32_t reservedSharedBytes = 0;
  /// Loads through tensor layouts (SPV_NV_tensor_addressing) are offered.
  bool tensorAddressing = false;
};

/// Asked only where hasF16CooperativeMatrix holds.
WorkgroupCooperativeMatrix queryWorkgroupCooperativeMatrix(VkInstance instance,
                                                           VkPhysicalDevice physical);

inline constexpr const char *kShaderBFloat16Extension = "VK_KHR_shader_bfloat16";

/// VkPhysicalDeviceShaderBfloat16FeaturesKHR (Vulkan 1.4.311).
struct ShaderBFloat16Features {
  VkStructureType sType = VkStructureType(1000141000);
  void *pNext = nullptr;
  VkBool32 shaderBFloat16Type = VK_FALSE;
  VkBool32 shaderBFloat16DotProduct = VK_FALSE;
  VkBool32 shaderBFloat16CooperativeMatrix = VK_FALSE;
};

/// Whether the device also multiplies 16 x 16 x 16 bf16 cooperative
/// matrices into f32 at subgroup scope (VK_KHR_shader_bfloat16). Asked only
/// where hasF16CooperativeMatrix holds (the kernels need what it checks).
bool hasBF16CooperativeMatrix(VkInstance instance, VkPhysicalDevice physical);

/// Whether the device multiplies 16 x 16 x 16 f16 cooperative matrices
/// into f32 at subgroup scope (the one shape Kiln's coop_gemm form emits)
/// and has what those kernels need besides: the extension and its feature,
/// the Vulkan memory model, f16 arithmetic and 16-bit storage.
bool hasF16CooperativeMatrix(VkInstance instance, VkPhysicalDevice physical,
                             uint32_t apiVersion);

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_COOPERATIVEMATRIX_H
