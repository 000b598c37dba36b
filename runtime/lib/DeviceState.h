//===- DeviceState.h - Private state of a VulkanDevice ----------*- C++ -*-===//
//
// Private to runtime/lib. VulkanDevice::State holds every Vulkan object of
// one logical device; ContextShared is what devices share with their context.
//
// Ownership: the context owns its devices, a device its State; the State's
// destructor tears the device down (see VulkanDevice.cpp).
// Threading: `mutex` guards everything in State except `pool`, which locks
// itself, and the immutable fields set at creation.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_DEVICESTATE_H
#define KILN_RUNTIME_LIB_DEVICESTATE_H

#include "BufferPool.h"
#include "CommandStream.h"
#include "CudaInterop.h"
#include "DescriptorAllocator.h"
#include "Pipeline.h"
#include "PeerTransfer.h"
#include "PipelineCache.h"
#include "StagingBuffer.h"

#include "kiln/runtime/Vulkan.h"

#include "VulkanApi.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace kiln::rt {

/// Validation messages of every context ever created in the process.
extern std::atomic<uint64_t> processValidationMessages;

/// Owned by the context; outlives its devices (and is leaked with them).
struct ContextShared {
  std::atomic<uint64_t> validationMessages{0};
  /// Set by a device destroyed while its buffers were alive: its VkDevice
  /// was leaked, so the instance must be leaked too.
  std::atomic<bool> deviceLeaked{false};
};

/// What a context passes to create one logical device.
struct DeviceSetup {
  VkInstance instance;
  uint32_t instanceApiVersion;
  VkPhysicalDevice physical;
  const AdapterInfo *adapter;
  size_t ordinal;
  ContextShared *shared;
};

struct VulkanDevice::State {
  ~State();

  // Immutable after creation.
  std::string name;
  std::string api = "vulkan";
  std::string label; // "vulkan:0 (llvmpipe ...)", for messages
  AdapterInfo adapter;
  size_t ordinal = 0;
  ContextShared *shared = nullptr;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queueFamily = 0;
  uint32_t maxStorageBuffersPerStage = 0;

  std::shared_ptr<BufferPool> pool;

  mutable std::mutex mutex;
  std::unique_ptr<CommandStream> stream;
  std::unique_ptr<DescriptorAllocator> descriptors;
  std::unique_ptr<StagingBuffer> staging;
  // Shared: a Recording keeps the pipelines it replays alive.
  std::unordered_map<uint64_t, std::shared_ptr<Pipeline>> pipelines;
  // The driver's pipeline cache, kept in the store across processes.
  std::unique_ptr<DriverPipelineCache> driverCache;
  bool creationFeedback = false; // Vulkan 1.3: cache hits are reported
  // KILN_PIPELINE_STATISTICS=1 (or =internal) and the driver has them.
  PipelineCapture capture = PipelineCapture::None;
  // VK_EXT_external_memory_host enabled: copies between this device and
  // another go through host memory both import (PeerTransfer.cpp); host
  // pointers imported must be aligned to this.
  bool importsHostMemory = false;
  VkDeviceSize hostPointerAlignment = 0;
  // This device's halves of the rings of the pairs it copied between, by
  // the other device (PeerTransfer.h); destroyed before the VkDevice.
  // Shared: a copy in flight keeps its halves while another replaces them.
  std::unordered_map<const State *, std::shared_ptr<PeerSide>> peerSources, peerTargets;
  // Where CUDA may run this GPU (AdapterInfo::cudaCandidate): PTX kernels launch
  // through it on this device's buffers (CudaInterop.h); null else.
  std::shared_ptr<CudaInterop> cuda;
  DeviceStats counters; // all but the pool's and validation counters
  uint64_t validationBaseline = 0;
};

/// Submits the open command stream (begun), followed by `more`, waits, and
/// recycles what the work used (descriptors, staging, pooled buffers).
/// Under the device mutex.
Status submitLocked(VulkanDevice::State &s, const std::vector<VkCommandBuffer> &more = {});

/// Submits and waits for the recorded work, if any. Under the device mutex.
Status flushLocked(VulkanDevice::State &s);

/// A kernel the device launches as PTX (VulkanDevice::launchesPtx) made
/// runnable: its module loaded by CUDA (VulkanPtx.cpp).
StatusOr<std::shared_ptr<Executable>> preparePtx(VulkanDevice &device, VulkanDevice::State &s,
                                                 const ProgramKernel &kernel);
/// Launches `executable` when preparePtx() made it (after the work
/// recorded before it); nullopt for any other executable.
std::optional<Status> dispatchPtx(VulkanDevice &device, VulkanDevice::State &s,
                                  Executable &executable, const std::vector<Buffer *> &arguments);

/// Creates the VkDevice and everything a VulkanDevice needs.
StatusOr<std::unique_ptr<VulkanDevice::State>>
createDeviceState(const DeviceSetup &setup);

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_DEVICESTATE_H
