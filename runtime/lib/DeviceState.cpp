//===- DeviceState.cpp - Creating and destroying a logical device ---------===//
//
// Each logical device gets its own VkDevice and queue, even when several
// share one adapter (KILN_VIRTUAL_DEVICES): nothing but the physical adapter
// is shared, so they behave like separate devices. Teardown waits for the
// device, destroys its objects, and leaks the VkDevice only if buffers are
// still alive (destroying it would invalidate their memory under them).
//
//===----------------------------------------------------------------------===//

#include "CooperativeMatrix.h"
#include "DeviceState.h"

#include "VulkanUtil.h"
#include "kiln/runtime/PipelineStatistics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kiln::rt {

/// A compute-only family if there is one (it may run beside graphics work),
/// else the first family with compute; -1 if none.
static int pickQueueFamily(VkPhysicalDevice physical) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, families.data());
  int fallback = -1;
  for (uint32_t i = 0; i < count; ++i) {
    VkQueueFlags flags = families[i].queueFlags;
    if (!(flags & VK_QUEUE_COMPUTE_BIT) || families[i].queueCount == 0)
      continue;
    if (!(flags & VK_QUEUE_GRAPHICS_BIT))
      return int(i);
    if (fallback < 0)
      fallback = int(i);
  }
  return fallback;
}


/// Features kernels may use (64/16/8-bit types, 16/8-bit storage, the
/// Vulkan memory model), enabled where the device supports them.
struct EnabledFeatures {
  VkPhysicalDeviceFeatures2 core{};
  VkPhysicalDeviceVulkan11Features v11{};
  VkPhysicalDeviceVulkan12Features v12{};
  bool chained = false;

  EnabledFeatures(VkPhysicalDevice physical, uint32_t apiVersion) {
    core.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceFeatures2 supported{};
    supported.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    VkPhysicalDeviceVulkan11Features s11 = v11;
    VkPhysicalDeviceVulkan12Features s12 = v12;
    if (apiVersion >= VK_API_VERSION_1_2) {
      supported.pNext = &s11;
      s11.pNext = &s12;
      vkGetPhysicalDeviceFeatures2(physical, &supported);
      chained = true;
    } else {
      vkGetPhysicalDeviceFeatures(physical, &supported.features);
    }
    core.features.shaderInt64 = supported.features.shaderInt64;
    core.features.shaderFloat64 = supported.features.shaderFloat64;
    core.features.shaderInt16 = supported.features.shaderInt16;
    if (!chained)
      return;
    core.pNext = &v11;
    v11.pNext = &v12;
    v11.storageBuffer16BitAccess = s11.storageBuffer16BitAccess;
    v12.shaderFloat16 = s12.shaderFloat16;
    v12.shaderInt8 = s12.shaderInt8;
    v12.storageBuffer8BitAccess = s12.storageBuffer8BitAccess;
    v12.vulkanMemoryModel = s12.vulkanMemoryModel;
    v12.vulkanMemoryModelDeviceScope = s12.vulkanMemoryModelDeviceScope;
  }
};

/// The largest single allocation: maxMemoryAllocationSize where Vulkan 1.1
/// reports it, else the largest heap.
static VkDeviceSize
maxAllocationBytes(VkPhysicalDevice physical, uint32_t apiVersion,
                   const VkPhysicalDeviceMemoryProperties &memory) {
  VkDeviceSize largestHeap = 0;
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i)
    largestHeap = std::max(largestHeap, memory.memoryHeaps[i].size);
  if (apiVersion < VK_API_VERSION_1_1)
    return largestHeap;
  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType =
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &maintenance3;
  vkGetPhysicalDeviceProperties2(physical, &props);
  return maintenance3.maxMemoryAllocationSize
             ? maintenance3.maxMemoryAllocationSize
             : largestHeap;
}

StatusOr<std::unique_ptr<VulkanDevice::State>>
createDeviceState(const DeviceSetup &setup) {
  auto state = std::make_unique<VulkanDevice::State>();
  state->ordinal = setup.ordinal;
  state->name = "vulkan:" + std::to_string(setup.ordinal);
  state->adapter = *setup.adapter;
  state->label = state->name + " (" + setup.adapter->name + ")";
  state->shared = setup.shared;
  state->physical = setup.physical;
  state->validationBaseline = setup.shared->validationMessages.load();
  // Feature queries through *2 entry points need 1.1+ on both sides.
  uint32_t apiVersion =
      std::min(setup.instanceApiVersion, setup.adapter->apiVersion);

  int family = pickQueueFamily(setup.physical);
  if (family < 0)
    return Status::unavailable(state->label + " has no compute queue");

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queueInfo{};
  queueInfo.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queueInfo.queueFamilyIndex = uint32_t(family);
  queueInfo.queueCount = 1;
  queueInfo.pQueuePriorities = &priority;

  // The spec requires enabling VK_KHR_portability_subset where it is
  // offered (MoltenVK).
  std::vector<const char *> extensions;
  if (hasDeviceExtension(setup.physical, "VK_KHR_portability_subset"))
    extensions.push_back("VK_KHR_portability_subset");

  EnabledFeatures features(setup.physical, apiVersion);
  // Cooperative matrices, where the adapter has the shape Kiln emits (the
  // Vulkan memory model they need is among the features above).
  CooperativeMatrixFeatures coop;
  if (setup.adapter->cooperativeMatrixF16 && features.chained) {
    extensions.push_back(kCooperativeMatrixExtension);
    coop.cooperativeMatrix = VK_TRUE;
    features.v12.pNext = &coop;
  }
  // bf16 cooperative matrices, where offered.
  ShaderBFloat16Features bf16;
  if (setup.adapter->cooperativeMatrixBF16 && coop.cooperativeMatrix) {
    extensions.push_back(kShaderBFloat16Extension);
    bf16.shaderBFloat16Type = VK_TRUE;
    bf16.shaderBFloat16CooperativeMatrix = VK_TRUE;
    bf16.pNext = coop.pNext;
    coop.pNext = &bf16;
  }
  // NVIDIA's workgroup-scope matrices, where offered (CooperativeMatrix.h).
  CooperativeMatrix2Features coop2;
  if (setup.adapter->workgroupMatrixInvocations && coop.cooperativeMatrix) {
    extensions.push_back(kCooperativeMatrix2Extension);
    coop2.cooperativeMatrixWorkgroupScope = VK_TRUE;
    coop2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
    coop2.cooperativeMatrixTensorAddressing = setup.adapter->workgroupMatrixTensorAddressing;
    coop2.pNext = coop.pNext;
    coop.pNext = &coop2;
  }
  // Subgroup size control, where offered: kernels that depend on their
  // subgroup size are created with it (KernelAssumptions.cpp).
  VkPhysicalDeviceSubgroupSizeControlFeatures sizeControl{};
  sizeControl.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  if (setup.adapter->minSubgroupSize && features.chained) {
    if (apiVersion < VK_API_VERSION_1_3)
      extensions.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    sizeControl.subgroupSizeControl = VK_TRUE;
    sizeControl.pNext = features.v12.pNext;
    features.v12.pNext = &sizeControl;
  }
  // Host memory both sides of a copy between devices import
  // (PeerTransfer.cpp): a Vulkan 1.1 query for its alignment.
  if (apiVersion >= VK_API_VERSION_1_1 &&
      hasDeviceExtension(setup.physical, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME)) {
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{};
    host.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
    VkPhysicalDeviceProperties2 props2{};
    props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    props2.pNext = &host;
    vkGetPhysicalDeviceProperties2(setup.physical, &props2);
    if (host.minImportedHostPointerAlignment) {
      extensions.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
      state->importsHostMemory = true;
      state->hostPointerAlignment = host.minImportedHostPointerAlignment;
    }
  }
  // Memory CUDA imports, where CUDA may run this GPU (CudaInterop.h).
  bool cudaInterop = setup.adapter->cudaCandidate;
  if (cudaInterop)
    extensions.push_back(VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
  // The driver's statistics of each pipeline, where asked for
  // (PipelineStatistics.h).
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executables{};
  executables.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  auto offersStatistics = [&] {
    if (!hasDeviceExtension(setup.physical, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME))
      return false;
    // The extension listed is not enough: its feature must be reported too.
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR supported{};
    supported.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
    queryFeatures(setup.physical, supported);
    return supported.pipelineExecutableInfo == VK_TRUE;
  };
  const char *want = std::getenv(kPipelineStatisticsEnv);
  bool internals = want && std::string(want) == kPipelineInternalsValue;
  if (want && (std::string(want) == "1" || internals) && features.chained && offersStatistics()) {
    extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    executables.pipelineExecutableInfo = VK_TRUE;
    executables.pNext = features.v12.pNext;
    features.v12.pNext = &executables;
    state->capture =
        internals ? PipelineCapture::StatisticsAndInternals : PipelineCapture::Statistics;
  }
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queueInfo;
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  if (features.chained)
    info.pNext = &features.core;
  else
    info.pEnabledFeatures = &features.core.features;
  if (VkResult result =
          vkCreateDevice(setup.physical, &info, nullptr, &state->device);
      result != VK_SUCCESS) {
    state->device = VK_NULL_HANDLE;
    return vkFailure(result, "vkCreateDevice for " + state->label);
  }
  vkGetDeviceQueue(state->device, uint32_t(family), 0, &state->queue);
  state->queueFamily = uint32_t(family);

  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(setup.physical, &props);
  state->maxStorageBuffersPerStage =
      props.limits.maxPerStageDescriptorStorageBuffers;
  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(setup.physical, &memory);

  state->pool = std::make_shared<BufferPool>(
      state->device, memory,
      maxAllocationBytes(setup.physical, apiVersion, memory), state->label);
  if (cudaInterop) {
    StatusOr<std::shared_ptr<CudaInterop>> interop =
        CudaInterop::create(setup.adapter->uuid, state->device, state->label);
    if (interop.isOk()) {
      state->cuda = *interop;
      state->pool->exportMemory(
          [cuda = *interop](const Allocation &allocation) { cuda->release(allocation); });
    } else {
      // Its kernels' SPIR-V runs instead: slower, still right.
      std::fprintf(stderr, "kiln: warning: %s runs no PTX kernels through CUDA: %s\n",
                   state->label.c_str(), interop.status().message().c_str());
      state->adapter.cudaCandidate = false;
    }
  }
  StatusOr<std::unique_ptr<CommandStream>> stream = CommandStream::create(
      state->device, state->queue, uint32_t(family), state->label,
      CommandStream::defaultSpin(setup.adapter->type == AdapterInfo::Type::Cpu));
  if (!stream.isOk())
    return stream.status();
  state->stream = std::move(*stream);
  state->descriptors =
      std::make_unique<DescriptorAllocator>(state->device, state->label);
  state->staging =
      std::make_unique<StagingBuffer>(state->device, memory, state->label);
  state->driverCache = DriverPipelineCache::create(state->device, state->adapter, state->label);
  state->creationFeedback = apiVersion >= VK_API_VERSION_1_3;
  return state;
}

VulkanDevice::State::~State() {
  if (!device)
    return;
  if (stream && stream->hasWork())
    (void)stream->submitAndWait();
  vkDeviceWaitIdle(device);
  if (cuda)
    (void)cuda->synchronize();
  peerSources.clear();
  peerTargets.clear();
  pipelines.clear();
  driverCache.reset(); // saves what this process added
  descriptors.reset();
  staging.reset();
  stream.reset();
  if (!pool || pool->shutdown()) {
    vkDestroyDevice(device, nullptr);
    return;
  }
  std::fprintf(
      stderr,
      "kiln: warning: %s destroyed while some of its buffers were alive; "
      "leaking its memory (release buffers before their device's context)\n",
      label.c_str());
  shared->deviceLeaked = true;
}

} // namespace kiln::rt
