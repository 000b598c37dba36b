//===- BufferPool.cpp - Pooled device-local storage buffers ---------------===//
//
// See BufferPool.h for ownership and threading. Each pooled buffer has its
// own VkDeviceMemory: simple, and the pool keeps the allocation count low.
//
//===----------------------------------------------------------------------===//

#include "BufferPool.h"

#include "VulkanUtil.h"

#include <bit>
#include <cstdio>
#include <limits>

namespace kiln::rt {

static constexpr VkDeviceSize kMinBucket = 256;
static constexpr VkBufferUsageFlags kUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
    VK_BUFFER_USAGE_TRANSFER_DST_BIT;

BufferPool::BufferPool(VkDevice device,
                       const VkPhysicalDeviceMemoryProperties &memory,
                       VkDeviceSize maxAllocationBytes, std::string label)
    : device_(device), memory_(memory), maxAllocationBytes_(maxAllocationBytes),
      label_(std::move(label)) {}

void BufferPool::exportMemory(std::function<void(const Allocation &)> release) {
  std::lock_guard<std::mutex> lock(mutex_);
  exportable_ = true;
  releaseExport_ = std::move(release);
}

VkDeviceSize BufferPool::bucketSize(size_t bytes) {
  if (bytes <= kMinBucket)
    return kMinBucket;
  if (bytes > (std::numeric_limits<VkDeviceSize>::max() >> 1) + 1)
    return 0;
  return std::bit_ceil(VkDeviceSize(bytes));
}

/// Prefer device-local memory; any allowed type works on unified-memory
/// devices that expose no device-local type for storage buffers.
static int pickMemoryType(const VkPhysicalDeviceMemoryProperties &memory,
                          uint32_t allowed) {
  int fallback = -1;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    if (!(allowed & (1u << i)))
      continue;
    if (memory.memoryTypes[i].propertyFlags &
        VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
      return int(i);
    if (fallback < 0)
      fallback = int(i);
  }
  return fallback;
}

Status BufferPool::create(VkDeviceSize capacity, size_t requested,
                          Allocation &out) {
  auto failure = [&](std::string why) {
    return Status::outOfMemory("cannot allocate " + std::to_string(requested) +
                               " bytes on " + label_ + ": " + why);
  };
  if (capacity == 0 || capacity > maxAllocationBytes_)
    return failure(
        "the pooled size exceeds the device's largest allocation of " +
        std::to_string(maxAllocationBytes_) + " bytes");

  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = capacity;
  info.usage = kUsage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkExternalMemoryBufferCreateInfo external{};
  external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  external.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  if (exportable_)
    info.pNext = &external;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (VkResult result = vkCreateBuffer(device_, &info, nullptr, &buffer);
      result != VK_SUCCESS)
    return failure("vkCreateBuffer: " + vkResultName(result));

  VkMemoryRequirements requirements{};
  vkGetBufferMemoryRequirements(device_, buffer, &requirements);
  int type = pickMemoryType(memory_, requirements.memoryTypeBits);
  if (type < 0) {
    vkDestroyBuffer(device_, buffer, nullptr);
    return Status::internal("no memory type for storage buffers on " + label_);
  }
  VkDeviceSize heapBytes =
      memory_.memoryHeaps[memory_.memoryTypes[type].heapIndex].size;
  if (requirements.size > heapBytes) {
    vkDestroyBuffer(device_, buffer, nullptr);
    return failure("larger than its memory heap of " +
                   std::to_string(heapBytes) + " bytes");
  }

  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = requirements.size;
  alloc.memoryTypeIndex = uint32_t(type);
  // Exported memory is dedicated to its buffer, as CUDA imports it whole.
  VkMemoryDedicatedAllocateInfo dedicated{};
  dedicated.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO;
  dedicated.buffer = buffer;
  VkExportMemoryAllocateInfo exported{};
  exported.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO;
  exported.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  exported.pNext = &dedicated;
  if (exportable_)
    alloc.pNext = &exported;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  if (VkResult result = vkAllocateMemory(device_, &alloc, nullptr, &memory);
      result != VK_SUCCESS) {
    vkDestroyBuffer(device_, buffer, nullptr);
    return failure("vkAllocateMemory: " + vkResultName(result));
  }
  if (VkResult result = vkBindBufferMemory(device_, buffer, memory, 0);
      result != VK_SUCCESS) {
    vkFreeMemory(device_, memory, nullptr);
    vkDestroyBuffer(device_, buffer, nullptr);
    return vkFailure(result, "vkBindBufferMemory on " + label_);
  }
  out = Allocation{buffer, memory, capacity, requirements.size};
  return Status::ok();
}

void BufferPool::destroy(const Allocation &allocation) {
  if (allocation.cudaMemory && releaseExport_)
    releaseExport_(allocation);
  vkDestroyBuffer(device_, allocation.buffer, nullptr);
  vkFreeMemory(device_, allocation.memory, nullptr);
}

void BufferPool::trimLocked() {
  for (auto &[capacity, list] : free_)
    for (const Allocation &allocation : list)
      destroy(allocation);
  free_.clear();
}

StatusOr<Allocation> BufferPool::acquire(size_t bytes) {
  VkDeviceSize capacity = bucketSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = free_.find(capacity);
      it != free_.end() && !it->second.empty()) {
    Allocation allocation = it->second.back();
    it->second.pop_back();
    ++hits_;
    ++live_;
    return allocation;
  }
  Allocation allocation;
  Status status = create(capacity, bytes, allocation);
  if (status.code() == Status::Code::OutOfMemory && !free_.empty()) {
    // Memory parked in other buckets may be what the device lacks.
    trimLocked();
    status = create(capacity, bytes, allocation);
  }
  if (!status.isOk())
    return status;
  ++allocated_;
  ++live_;
  return allocation;
}

void BufferPool::release(const Allocation &allocation, uint64_t lastUseSerial) {
  std::lock_guard<std::mutex> lock(mutex_);
  --live_;
  // An orphaned pool's device is gone (or about to be): never touch it.
  if (orphaned_)
    return;
  if (lastUseSerial > completedSerial_) {
    deferred_.emplace_back(lastUseSerial, allocation);
    return;
  }
  free_[allocation.capacity].push_back(allocation);
}

void BufferPool::retire(uint64_t completedSerial) {
  std::lock_guard<std::mutex> lock(mutex_);
  completedSerial_ = completedSerial;
  std::erase_if(deferred_, [&](const std::pair<uint64_t, Allocation> &entry) {
    if (entry.first > completedSerial)
      return false;
    free_[entry.second.capacity].push_back(entry.second);
    return true;
  });
}

bool BufferPool::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  trimLocked();
  for (const auto &entry : deferred_)
    destroy(entry.second);
  deferred_.clear();
  if (live_ == 0)
    return true;
  orphaned_ = true;
  return false;
}

void BufferPool::addStats(DeviceStats &stats) const {
  std::lock_guard<std::mutex> lock(mutex_);
  stats.buffersAllocated += allocated_;
  stats.bufferPoolHits += hits_;
}

void BufferPool::resetStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  allocated_ = 0;
  hits_ = 0;
}

VulkanBuffer::~VulkanBuffer() { pool_->release(allocation_, lastUseSerial_); }

} // namespace kiln::rt
