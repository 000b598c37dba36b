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

#include "VulkanApi.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::rt {

/// Whether libcuda.so.1 loads (without starting the driver) and KILN_CUDA
/// is not 0: AdapterInfo::cudaCandidate.
bool cudaDriverLoadable();

class CudaInterop {
public:
  /// For the CUDA device with `vulkanUuid`, found on first use; `device`
  /// must have VK_KHR_external_memory_fd enabled.
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
  /// Frees `allocation`'s import (the pool, before freeing its memory).
  void release(const Allocation &allocation);

private:
  CudaInterop(std::string uuid, std::string label)
      : uuid_(std::move(uuid)), label_(std::move(label)) {}
  StatusOr<cuda::DevicePtr> map(VulkanBuffer &buffer);
  /// The context current on this thread, made (with the stream) on first use.
  Status makeCurrent();

  const cuda::Api *api_ = nullptr; // loaded on first use
  std::string uuid_;
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
