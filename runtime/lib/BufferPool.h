//===- BufferPool.h - Pooled device-local storage buffers -------*- C++ -*-===//
//
// Private to runtime/lib. One pool per logical device holds VkBuffers with
// their own VkDeviceMemory, in free lists keyed by power-of-two capacity.
//
// Ownership: the device and every live VulkanBuffer share the pool, so a
// buffer that outlives its device can still return (or leak) its memory
// without touching freed state. A buffer released while a recorded or
// submitted command may still use it waits in a deferred list until the
// device reports that command complete (retire()).
//
// Threading: all methods lock the pool's own mutex; buffers may be released
// from any thread. Lock order: device mutex, then pool mutex.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_BUFFERPOOL_H
#define KILN_RUNTIME_LIB_BUFFERPOOL_H

#include "kiln/runtime/Device.h"

#include "VulkanApi.h"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kiln::rt {

struct Allocation {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize capacity = 0;
  /// The memory's size (the buffer's requirement), for an exporter.
  VkDeviceSize memoryBytes = 0;
  /// Set once CUDA imported the memory (CudaInterop.h): the import and
  /// the buffer's address there.
  void *cudaMemory = nullptr;
  uint64_t cudaAddress = 0;
};

class BufferPool {
public:
  /// `label` names the device in error messages: "vulkan:0 (llvmpipe ...)".
  BufferPool(VkDevice device, const VkPhysicalDeviceMemoryProperties &memory,
             VkDeviceSize maxAllocationBytes, std::string label);
  BufferPool(const BufferPool &) = delete;
  /// From now on every buffer's memory is a dedicated allocation CUDA can
  /// import (VK_KHR_external_memory_fd's opaque fd); `release` undoes an
  /// import before the memory is freed. Called before the first acquire().
  void exportMemory(std::function<void(const Allocation &)> release);
  BufferPool &operator=(const BufferPool &) = delete;

  /// The pooled capacity for `bytes`: the next power of two, at least 256;
  /// 0 when that does not fit in 64 bits.
  static VkDeviceSize bucketSize(size_t bytes);

  /// From the free list, else a new allocation (after trimming the free
  /// lists once if the device is out of memory).
  StatusOr<Allocation> acquire(size_t bytes);
  /// `lastUseSerial` is the command serial that last used it (0: never).
  void release(const Allocation &allocation, uint64_t lastUseSerial);
  /// Commands up to `completedSerial` have finished: deferred buffers they
  /// used become reusable.
  void retire(uint64_t completedSerial);
  /// Destroys every pooled buffer, for device destruction. Returns false,
  /// and leaks from then on, if buffers are still alive: the VkDevice must
  /// then stay alive too.
  bool shutdown();

  void addStats(DeviceStats &stats) const;
  void resetStats();

private:
  Status create(VkDeviceSize capacity, size_t requested, Allocation &out);
  void destroy(const Allocation &allocation);
  void trimLocked();

  VkDevice device_;
  VkPhysicalDeviceMemoryProperties memory_;
  bool exportable_ = false;
  std::function<void(const Allocation &)> releaseExport_;
  VkDeviceSize maxAllocationBytes_;
  std::string label_;

  mutable std::mutex mutex_;
  std::map<VkDeviceSize, std::vector<Allocation>> free_;
  std::vector<std::pair<uint64_t, Allocation>> deferred_;
  uint64_t completedSerial_ = 0;
  size_t live_ = 0;
  bool orphaned_ = false;
  uint64_t allocated_ = 0;
  uint64_t hits_ = 0;
};

/// A Buffer backed by a pooled Allocation; returns it to the pool on death.
class VulkanBuffer final : public Buffer {
public:
  VulkanBuffer(Device &device, size_t size, Allocation allocation,
               std::shared_ptr<BufferPool> pool)
      : Buffer(device, size), allocation_(allocation), pool_(std::move(pool)) {}
  ~VulkanBuffer() override;

  VkBuffer handle() const { return allocation_.buffer; }
  VkDeviceSize capacity() const { return allocation_.capacity; }
  /// Its allocation (an importer records its import here, under the
  /// device mutex; it goes back to the pool with the buffer).
  Allocation &allocation() { return allocation_; }
  /// Called (under the device mutex) by every command recorded on it.
  void markUsed(uint64_t serial) { lastUseSerial_ = serial; }
  /// The serial of the last command recorded on it (under the device mutex).
  uint64_t lastUse() const { return lastUseSerial_; }

private:
  Allocation allocation_;
  std::shared_ptr<BufferPool> pool_;
  uint64_t lastUseSerial_ = 0;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_BUFFERPOOL_H
