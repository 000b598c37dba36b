//===- StagingBuffer.cpp - Host-visible memory for transfers --------------===//
//
// See StagingBuffer.h. Coherent memory is required so that no explicit
// flush/invalidate is needed: queue submission makes host writes visible,
// and a transfer-to-host barrier plus the fence wait make device writes
// visible to the host.
//
//===----------------------------------------------------------------------===//

#include "StagingBuffer.h"

#include "VulkanUtil.h"

#include <algorithm>

namespace kiln::rt {

static constexpr VkDeviceSize kMinBytes = VkDeviceSize(1) << 20;
// Offsets handed out are aligned for fast memcpy; copies need no alignment.
static constexpr VkDeviceSize kAlignment = 64;

StagingBuffer::StagingBuffer(VkDevice device,
                             const VkPhysicalDeviceMemoryProperties &memory,
                             std::string label)
    : device_(device), memory_(memory), label_(std::move(label)) {}

StagingBuffer::~StagingBuffer() { release(); }

void StagingBuffer::release() {
  if (mapped_)
    vkUnmapMemory(device_, deviceMemory_);
  if (buffer_)
    vkDestroyBuffer(device_, buffer_, nullptr);
  if (deviceMemory_)
    vkFreeMemory(device_, deviceMemory_, nullptr);
  buffer_ = VK_NULL_HANDLE;
  deviceMemory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
  capacity_ = 0;
  offset_ = 0;
}

/// Host-visible and coherent; cached as well if possible (downloads read it).
static int pickStagingType(const VkPhysicalDeviceMemoryProperties &memory,
                           uint32_t allowed) {
  constexpr VkMemoryPropertyFlags required =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int fallback = -1;
  for (uint32_t i = 0; i < memory.memoryTypeCount; ++i) {
    VkMemoryPropertyFlags flags = memory.memoryTypes[i].propertyFlags;
    if (!(allowed & (1u << i)) || (flags & required) != required)
      continue;
    if (flags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
      return int(i);
    if (fallback < 0)
      fallback = int(i);
  }
  return fallback;
}

Status StagingBuffer::grow(VkDeviceSize bytes) {
  VkDeviceSize capacity =
      std::max({bytes, kMinBytes, std::min(capacity_ * 2, kMaxBytes)});
  release();

  auto failure = [&](VkResult result, const char *call) {
    Status status = vkFailure(
        result, std::string(call) + " for " + std::to_string(capacity) +
                    " bytes of staging memory on " + label_);
    release();
    return status;
  };
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = capacity;
  info.usage =
      VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (VkResult result = vkCreateBuffer(device_, &info, nullptr, &buffer_);
      result != VK_SUCCESS)
    return failure(result, "vkCreateBuffer");

  VkMemoryRequirements requirements{};
  vkGetBufferMemoryRequirements(device_, buffer_, &requirements);
  int type = pickStagingType(memory_, requirements.memoryTypeBits);
  if (type < 0) {
    release();
    return Status::unavailable(
        "no host-visible coherent memory for staging on " + label_);
  }
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = requirements.size;
  alloc.memoryTypeIndex = uint32_t(type);
  if (VkResult result =
          vkAllocateMemory(device_, &alloc, nullptr, &deviceMemory_);
      result != VK_SUCCESS)
    return failure(result, "vkAllocateMemory");
  if (VkResult result = vkBindBufferMemory(device_, buffer_, deviceMemory_, 0);
      result != VK_SUCCESS)
    return failure(result, "vkBindBufferMemory");
  void *mapped = nullptr;
  if (VkResult result =
          vkMapMemory(device_, deviceMemory_, 0, VK_WHOLE_SIZE, 0, &mapped);
      result != VK_SUCCESS)
    return failure(result, "vkMapMemory");
  mapped_ = static_cast<uint8_t *>(mapped);
  capacity_ = capacity;
  return Status::ok();
}

VkDeviceSize StagingBuffer::take(VkDeviceSize bytes) {
  VkDeviceSize offset = offset_;
  offset_ = std::min(capacity_, (offset_ + bytes + kAlignment - 1) /
                                    kAlignment * kAlignment);
  return offset;
}

} // namespace kiln::rt
