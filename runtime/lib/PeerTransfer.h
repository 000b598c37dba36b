//===- PeerTransfer.h - one device's half of a copy between devices -*- C++ -*-===//
//
// Private to runtime/lib. A copy from device A to device B goes through a
// ring of host memory both import (PeerTransfer.cpp). Each device keeps its
// half of the ring of each pair it copied between (VulkanDevice::State's
// peerSources and peerTargets): the import, and a command buffer and fence
// per slot. Importing pins the memory, which costs milliseconds, so the
// halves outlive one copy; each is destroyed with its own device, and the
// host memory with the last half that imports it.
//
// Threading: used under the device mutex only.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_PEERTRANSFER_H
#define KILN_RUNTIME_LIB_PEERTRANSFER_H

#include "kiln/runtime/Vulkan.h"

#include "VulkanApi.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::rt {

/// Host memory aligned for import by both devices. `busy` is held for a
/// whole copy through it (two threads copying between one pair take turns);
/// it is taken before either device's mutex, never while holding one.
struct HostRing {
  ~HostRing() { std::free(data); }
  void *data = nullptr;
  VkDeviceSize bytes = 0;
  std::mutex busy;
};

class PeerSide {
public:
  PeerSide(VulkanDevice::State &s, VkDeviceSize chunk) : s_(s), chunk_(chunk) {}
  ~PeerSide();
  PeerSide(const PeerSide &) = delete;
  PeerSide &operator=(const PeerSide &) = delete;

  /// Imports `ring` (slots chunks) as a transfer buffer of this device.
  Status import(std::shared_ptr<HostRing> ring, uint32_t slots);
  /// Copies `bytes` from `src` at `from` to `dst` at `to` with the slot's
  /// command buffer. `toHost`: the copy writes the ring, which the host
  /// domain (and through it the other device) reads once the fence signals.
  /// Takes the device mutex for the queue submit alone, so the device's own
  /// work is recorded meanwhile (a pipelined run's next stage).
  Status submit(uint32_t slot, VkBuffer src, VkDeviceSize from, VkBuffer dst, VkDeviceSize to,
                VkDeviceSize bytes, bool toHost);
  /// Waits for the slot's last submit, if any.
  Status wait(uint32_t slot);

  VkBuffer ring() const { return buffer_; }
  const void *ringData() const { return ring_ ? ring_->data : nullptr; }
  HostRing &hostRing() const { return *ring_; }
  VkDeviceSize chunk() const { return chunk_; }
  uint32_t slots() const { return uint32_t(fences_.size()); }

private:
  VulkanDevice::State &s_;
  VkDeviceSize chunk_;
  std::shared_ptr<HostRing> ring_;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::vector<VkCommandBuffer> commands_;
  std::vector<VkFence> fences_;
  std::vector<bool> pending_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_PEERTRANSFER_H
