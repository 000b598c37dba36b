//===- StagingBuffer.h - Host-visible memory for transfers ------*- C++ -*-===//
//
// Private to runtime/lib. One growing, persistently mapped buffer per device
// carries uploads and downloads. Within one command buffer it is handed out
// linearly (take()); the device resets it after each submit completes, and
// grows it only when no recorded command refers to it.
//
// Ownership: owned by the device state. Threading: used under the device
// mutex only.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_STAGINGBUFFER_H
#define KILN_RUNTIME_LIB_STAGINGBUFFER_H

#include "kiln/runtime/Status.h"

#include "VulkanApi.h"

#include <cstdint>
#include <string>

namespace kiln::rt {

class StagingBuffer {
public:
  /// Transfers larger than this go through in several chunks.
  static constexpr VkDeviceSize kMaxBytes = VkDeviceSize(64) << 20;

  StagingBuffer(VkDevice device, const VkPhysicalDeviceMemoryProperties &memory,
                std::string label);
  ~StagingBuffer();
  StagingBuffer(const StagingBuffer &) = delete;
  StagingBuffer &operator=(const StagingBuffer &) = delete;

  VkDeviceSize capacity() const { return capacity_; }
  VkDeviceSize available() const { return capacity_ - offset_; }
  /// Replaces the buffer by one of at least `bytes` (doubling, up to
  /// kMaxBytes). Only when nothing recorded refers to the current one.
  Status grow(VkDeviceSize bytes);
  /// Reserves `bytes` <= available() and returns their offset.
  VkDeviceSize take(VkDeviceSize bytes);
  /// Everything taken is no longer in use.
  void reset() { offset_ = 0; }

  VkBuffer handle() const { return buffer_; }
  uint8_t *data() const { return mapped_; }

private:
  void release();

  VkDevice device_;
  VkPhysicalDeviceMemoryProperties memory_;
  std::string label_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory deviceMemory_ = VK_NULL_HANDLE;
  uint8_t *mapped_ = nullptr;
  VkDeviceSize capacity_ = 0;
  VkDeviceSize offset_ = 0;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_STAGINGBUFFER_H
