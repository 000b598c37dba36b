//===- PeerTransfer.cpp - copies from one Vulkan device to another --------===//
//
// One VkDevice cannot read another's memory (device groups aside, which a
// driver offers for linked adapters only), so a copy between devices goes
// through host memory. Staged, it costs a download (the source's copy
// engine, then a host copy out of its staging memory) and an upload (a host
// copy into the target's staging memory, then its copy engine), one after
// the other. Here both devices import the same host allocation
// (VK_EXT_external_memory_host) as a buffer: the source's copy engine writes
// a chunk into it while the target's reads the chunk before, in a ring of
// slots, and the host copies nothing.
//
//===----------------------------------------------------------------------===//

#include "PeerTransfer.h"

#include "BufferPool.h"
#include "DeviceState.h"
#include "VulkanUtil.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::rt {
namespace {

/// Chunks of the ring, and how many: a chunk in flight on each side and
/// one being waited for, with one to spare.
constexpr VkDeviceSize kChunkBytes = VkDeviceSize(16) << 20;
constexpr uint32_t kSlots = 4;

VkDeviceSize roundUp(VkDeviceSize n, VkDeviceSize to) { return (n + to - 1) / to * to; }

} // namespace

PeerSide::~PeerSide() {
  // Nothing is released while the device may still use it.
  for (uint32_t i = 0; i < fences_.size(); ++i)
    if (pending_[i])
      vkWaitForFences(s_.device, 1, &fences_[i], VK_TRUE, UINT64_MAX);
  for (VkFence f : fences_)
    vkDestroyFence(s_.device, f, nullptr);
  if (pool_)
    vkDestroyCommandPool(s_.device, pool_, nullptr);
  if (buffer_)
    vkDestroyBuffer(s_.device, buffer_, nullptr);
  if (memory_)
    vkFreeMemory(s_.device, memory_, nullptr);
}

Status PeerSide::import(std::shared_ptr<HostRing> ring, uint32_t slots) {
  ring_ = std::move(ring);
  void *host = ring_->data;
  VkDeviceSize bytes = ring_->bytes;
  auto hostProperties = reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
      vkGetDeviceProcAddr(s_.device, "vkGetMemoryHostPointerPropertiesEXT"));
  if (!hostProperties)
    return Status::unavailable(s_.label + " lacks vkGetMemoryHostPointerPropertiesEXT");
  VkMemoryHostPointerPropertiesEXT pointer{};
  pointer.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT;
  if (VkResult r = hostProperties(s_.device, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
                                  host, &pointer);
      r != VK_SUCCESS)
    return vkFailure(r, "vkGetMemoryHostPointerPropertiesEXT on " + s_.label);

  VkExternalMemoryBufferCreateInfo external{};
  external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  external.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.pNext = &external;
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (VkResult r = vkCreateBuffer(s_.device, &info, nullptr, &buffer_); r != VK_SUCCESS) {
    buffer_ = VK_NULL_HANDLE;
    return vkFailure(r, "vkCreateBuffer (imported host memory) on " + s_.label);
  }
  VkMemoryRequirements requirements{};
  vkGetBufferMemoryRequirements(s_.device, buffer_, &requirements);
  uint32_t types = pointer.memoryTypeBits & requirements.memoryTypeBits;
  if (!types)
    return Status::unavailable(s_.label + " offers no memory type for imported host memory");
  VkImportMemoryHostPointerInfoEXT importInfo{};
  importInfo.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT;
  importInfo.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  importInfo.pHostPointer = host;
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.pNext = &importInfo;
  alloc.allocationSize = bytes;
  alloc.memoryTypeIndex = uint32_t(__builtin_ctz(types));
  if (VkResult r = vkAllocateMemory(s_.device, &alloc, nullptr, &memory_); r != VK_SUCCESS) {
    memory_ = VK_NULL_HANDLE;
    return vkFailure(r, "importing host memory on " + s_.label);
  }
  if (VkResult r = vkBindBufferMemory(s_.device, buffer_, memory_, 0); r != VK_SUCCESS)
    return vkFailure(r, "vkBindBufferMemory (imported host memory) on " + s_.label);

  VkCommandPoolCreateInfo poolInfo{};
  poolInfo.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  poolInfo.flags =
      VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT | VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  poolInfo.queueFamilyIndex = s_.queueFamily;
  if (VkResult r = vkCreateCommandPool(s_.device, &poolInfo, nullptr, &pool_); r != VK_SUCCESS) {
    pool_ = VK_NULL_HANDLE;
    return vkFailure(r, "vkCreateCommandPool on " + s_.label);
  }
  commands_.resize(slots);
  VkCommandBufferAllocateInfo cmdInfo{};
  cmdInfo.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cmdInfo.commandPool = pool_;
  cmdInfo.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cmdInfo.commandBufferCount = slots;
  if (VkResult r = vkAllocateCommandBuffers(s_.device, &cmdInfo, commands_.data()); r != VK_SUCCESS)
    return vkFailure(r, "vkAllocateCommandBuffers on " + s_.label);
  pending_.assign(slots, false);
  for (uint32_t i = 0; i < slots; ++i) {
    VkFenceCreateInfo fenceInfo{};
    fenceInfo.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    VkFence fence = VK_NULL_HANDLE;
    if (VkResult r = vkCreateFence(s_.device, &fenceInfo, nullptr, &fence); r != VK_SUCCESS)
      return vkFailure(r, "vkCreateFence on " + s_.label);
    fences_.push_back(fence);
  }
  return Status::ok();
}

Status PeerSide::submit(uint32_t slot, VkBuffer src, VkDeviceSize from, VkBuffer dst,
                        VkDeviceSize to, VkDeviceSize bytes, bool toHost) {
  VkCommandBuffer cmd = commands_[slot];
  if (VkResult r = vkResetCommandBuffer(cmd, 0); r != VK_SUCCESS)
    return vkFailure(r, "vkResetCommandBuffer on " + s_.label);
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (VkResult r = vkBeginCommandBuffer(cmd, &begin); r != VK_SUCCESS)
    return vkFailure(r, "vkBeginCommandBuffer on " + s_.label);
  VkBufferCopy region{from, to, bytes};
  vkCmdCopyBuffer(cmd, src, dst, 1, &region);
  if (toHost) {
    VkMemoryBarrier barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                         &barrier, 0, nullptr, 0, nullptr);
  }
  if (VkResult r = vkEndCommandBuffer(cmd); r != VK_SUCCESS)
    return vkFailure(r, "vkEndCommandBuffer on " + s_.label);
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  std::lock_guard<std::mutex> lock(s_.mutex); // the queue
  if (VkResult r = vkQueueSubmit(s_.queue, 1, &submit, fences_[slot]); r != VK_SUCCESS)
    return vkFailure(r, "vkQueueSubmit (copy between devices) on " + s_.label);
  pending_[slot] = true;
  ++s_.counters.submits;
  return Status::ok();
}

Status PeerSide::wait(uint32_t slot) {
  if (!pending_[slot])
    return Status::ok();
  if (VkResult r = vkWaitForFences(s_.device, 1, &fences_[slot], VK_TRUE, UINT64_MAX);
      r != VK_SUCCESS)
    return vkFailure(r, "waiting for a copy between devices on " + s_.label);
  pending_[slot] = false;
  if (VkResult r = vkResetFences(s_.device, 1, &fences_[slot]); r != VK_SUCCESS)
    return vkFailure(r, "vkResetFences on " + s_.label);
  return Status::ok();
}

bool VulkanDevice::importsHostMemory() const { return state_->importsHostMemory; }

Status VulkanDevice::copyToDevice(Buffer &src, VulkanDevice &target, Buffer &dst, size_t bytes) {
  if (&target == this)
    return copy(src, dst, bytes);
  if (&src.device() != this)
    return Status::invalidArgument("the source buffer belongs to " + src.device().name() +
                                   ", not " + name());
  if (&dst.device() != &target)
    return Status::invalidArgument("the destination buffer belongs to " + dst.device().name() +
                                   ", not " + target.name());
  if (bytes > src.size() || bytes > dst.size())
    return Status::invalidArgument(
        "a copy of " + std::to_string(bytes) + " bytes from " + name() + " to " + target.name() +
        " exceeds a " + std::to_string(std::min(src.size(), dst.size())) + "-byte buffer");
  if (bytes == 0)
    return Status::ok();
  if (!importsHostMemory() || !target.importsHostMemory()) {
    // Staged: both sides' staging memory and a host copy between them.
    std::vector<uint8_t> host(bytes);
    if (Status s = download(src, host.data(), bytes); !s.isOk())
      return s;
    return target.upload(dst, host.data(), bytes);
  }

  State &a = *state_, &b = *target.state_;
  std::shared_ptr<PeerSide> fromSide, toSide;
  {
    std::scoped_lock lock(a.mutex, b.mutex);
    // Work recorded on either buffer and not yet submitted (the source's
    // writes, a pending upload to the target) runs first; earlier submits
    // have completed (every submit is waited for).
    auto inOpenRecording = [](State &s, Buffer &buffer) {
      return s.stream->hasWork() &&
             static_cast<VulkanBuffer &>(buffer).lastUse() == s.stream->recordingSerial();
    };
    if (inOpenRecording(a, src))
      if (Status s = flushLocked(a); !s.isOk())
        return s;
    if (inOpenRecording(b, dst))
      if (Status s = flushLocked(b); !s.isOk())
        return s;
    VkDeviceSize align =
        std::max<VkDeviceSize>({a.hostPointerAlignment, b.hostPointerAlignment, VkDeviceSize(64)});
    VkDeviceSize chunk = roundUp(std::min<VkDeviceSize>(bytes, kChunkBytes), align);
    uint32_t chunks = uint32_t((bytes + chunk - 1) / chunk);
    // The ring of this pair, kept from an earlier copy where it is large
    // enough: importing host memory pins it, which costs milliseconds.
    std::shared_ptr<PeerSide> &cachedFrom = a.peerSources[&b];
    std::shared_ptr<PeerSide> &cachedTo = b.peerTargets[&a];
    if (!cachedFrom || !cachedTo || cachedFrom->ringData() != cachedTo->ringData() ||
        cachedFrom->chunk() < chunk || cachedFrom->slots() < std::min<uint32_t>(kSlots, chunks)) {
      uint32_t slots = std::min<uint32_t>(kSlots, chunks);
      auto ring = std::make_shared<HostRing>();
      ring->bytes = chunk * slots;
      ring->data = std::aligned_alloc(align, ring->bytes);
      if (!ring->data)
        return Status::outOfMemory("no " + std::to_string(ring->bytes) +
                                   " bytes of host memory for a copy from " + name() + " to " +
                                   target.name());
      auto made = std::make_shared<PeerSide>(a, chunk);
      if (Status s = made->import(ring, slots); !s.isOk())
        return s;
      auto other = std::make_shared<PeerSide>(b, chunk);
      if (Status s = other->import(ring, slots); !s.isOk())
        return s;
      cachedFrom = std::move(made);
      cachedTo = std::move(other);
    }
    fromSide = cachedFrom;
    toSide = cachedTo;
  }
  // The devices' mutexes are free again: each is taken for a submit alone.
  std::lock_guard<std::mutex> turn(fromSide->hostRing().busy);
  PeerSide &from = *fromSide, &to = *toSide;
  uint32_t slots = from.slots();
  VkDeviceSize chunk = from.chunk();
  uint32_t chunks = uint32_t((bytes + chunk - 1) / chunk);
  VkBuffer source = static_cast<VulkanBuffer &>(src).handle();
  VkBuffer destination = static_cast<VulkanBuffer &>(dst).handle();
  auto length = [&](uint32_t i) { return std::min<VkDeviceSize>(chunk, bytes - i * chunk); };
  // The target copies chunk i - 1 out of the ring while the source copies
  // chunk i in; a slot is written again once the target has read it.
  auto deliver = [&](uint32_t i) -> Status {
    uint32_t slot = i % slots;
    if (Status s = from.wait(slot); !s.isOk())
      return s;
    return to.submit(slot, to.ring(), slot * chunk, destination, i * chunk, length(i), false);
  };
  for (uint32_t i = 0; i < chunks; ++i) {
    uint32_t slot = i % slots;
    if (Status s = to.wait(slot); !s.isOk())
      return s;
    if (Status s = from.submit(slot, source, i * chunk, from.ring(), slot * chunk, length(i), true);
        !s.isOk())
      return s;
    if (i > 0)
      if (Status s = deliver(i - 1); !s.isOk())
        return s;
  }
  if (Status s = deliver(chunks - 1); !s.isOk())
    return s;
  for (uint32_t slot = 0; slot < slots; ++slot)
    if (Status s = to.wait(slot); !s.isOk())
      return s;
  std::lock_guard<std::mutex> lock(a.mutex);
  a.counters.bytesToPeers += bytes;
  return Status::ok();
}

} // namespace kiln::rt
