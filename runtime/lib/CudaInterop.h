//===- CudaInterop.h - PTX kernels on a Vulkan device's memory --*- C++ -*-===//
//
// Private to runtime/lib. On a GPU both Vulkan and CUDA's driver run, a
// kernel with PTX (Program.h, PtxCode) is launched through CUDA on the
// Vulkan device's own buffers: their memory is allocated exportable
// (VK_KHR_external_memory_fd) and imported into CUDA once, on first use.
// Work is ordered by the host: a launch waits for the Vulkan work recorded
// before it, and the next Vulkan submit waits for the launches before it
// (back-to-back launches stay queued on one CUDA stream).
//
// CUDA's context (which takes device memory of its own) is made when the
// first kernel is loaded, not with the device.
//
// Ownership: shared by the device state and its buffer pool (an imported
// allocation is released when the pool destroys it).
// Threading: launches and imports under the device mutex; release() from
// the pool, under its own mutex.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_CUDAINTEROP_H
#define KILN_RUNTIME_LIB_CUDAINTEROP_H

#include "BufferPool.h"
#include "CudaDriver.h"

#include "kiln/runtime/Program.h"

#include <vulkan/vulkan.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::rt {

/// What CUDA says of the GPU with a given Vulkan device UUID.
struct CudaProbe {
  uint32_t arch = 0;        ///< 10 * major + minor; 0 when CUDA does not run it
  uint32_t sharedBytes = 0; ///< dynamic shared memory a CTA may opt in to
};

/// KILN_CUDA=0 turns the probe off (every kernel then runs its SPIR-V).
CudaProbe probeCuda(const std::string &vulkanUuid);

class CudaInterop {
public:
  /// For the CUDA device with `vulkanUuid`; `device` must have
  /// VK_KHR_external_memory_fd enabled.
  static StatusOr<std::shared_ptr<CudaInterop>> create(const std::string &vulkanUuid,
                                                       VkDevice device, std::string label);
  ~CudaInterop();
  CudaInterop(const CudaInterop &) = delete;
  CudaInterop &operator=(const CudaInterop &) = delete;

  /// The loaded kernel of `code` (cached by its hash), its shared memory
  /// opted in.
  StatusOr<cuda::Function> function(const PtxCode &code);
  /// Launches `code` over `buffers` (its pointer parameters, in order) on
  /// the stream. Each buffer's memory is imported on first use.
  Status launch(const PtxCode &code, cuda::Function function,
                const std::vector<VulkanBuffer *> &buffers);
  /// Waits for the launches queued so far; nothing when none are.
  Status synchronize();
  bool pending() const { return pending_; }
  /// Frees `allocation`'s import (the pool, before freeing its memory).
  void release(Allocation &allocation);

private:
  CudaInterop(const cuda::Api &api, std::string label) : api_(api), label_(std::move(label)) {}
  StatusOr<cuda::DevicePtr> map(VulkanBuffer &buffer);
  /// The context current on this thread, made (with the stream) on first use.
  Status makeCurrent();

  const cuda::Api &api_;
  std::string label_;
  VkDevice device_ = VK_NULL_HANDLE;
  PFN_vkGetMemoryFdKHR getMemoryFd_ = nullptr;
  cuda::DeviceId cudaDevice_ = 0;
  cuda::Context context_ = nullptr;
  cuda::Stream stream_ = nullptr;
  std::mutex releaseMutex_; // the pool releases outside the device mutex
  std::unordered_map<uint64_t, std::pair<cuda::Module, cuda::Function>> functions_;
  bool pending_ = false;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_CUDAINTEROP_H
