//===- DescriptorAllocator.cpp - Per-submit descriptor sets ---------------===//
//
// See DescriptorAllocator.h.
//
//===----------------------------------------------------------------------===//

#include "DescriptorAllocator.h"

#include "VulkanUtil.h"

#include <algorithm>

namespace kiln::rt {

static constexpr uint32_t kSetsPerPool = 256;
static constexpr uint32_t kDescriptorsPerPool = kSetsPerPool * 8;

DescriptorAllocator::~DescriptorAllocator() {
  for (VkDescriptorPool pool : pools_)
    vkDestroyDescriptorPool(device_, pool, nullptr);
}

Status DescriptorAllocator::addPool(uint32_t minDescriptors) {
  VkDescriptorPoolSize size{};
  size.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  size.descriptorCount = std::max(kDescriptorsPerPool, minDescriptors);
  VkDescriptorPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  info.maxSets = kSetsPerPool;
  info.poolSizeCount = 1;
  info.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  if (VkResult result = vkCreateDescriptorPool(device_, &info, nullptr, &pool);
      result != VK_SUCCESS)
    return vkFailure(result, "vkCreateDescriptorPool on " + label_);
  pools_.push_back(pool);
  return Status::ok();
}

StatusOr<VkDescriptorSet>
DescriptorAllocator::allocate(VkDescriptorSetLayout layout,
                              uint32_t numBindings) {
  VkDescriptorSetAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  info.descriptorSetCount = 1;
  info.pSetLayouts = &layout;
  // Try the current pool, then later ones; a fresh pool is sized to fit, so
  // running out in one is a real failure.
  while (true) {
    bool fresh = current_ == pools_.size();
    if (fresh)
      if (Status status = addPool(numBindings); !status.isOk())
        return status;
    info.descriptorPool = pools_[current_];
    VkDescriptorSet set = VK_NULL_HANDLE;
    VkResult result = vkAllocateDescriptorSets(device_, &info, &set);
    if (result == VK_SUCCESS)
      return set;
    bool exhausted = result == VK_ERROR_OUT_OF_POOL_MEMORY ||
                     result == VK_ERROR_FRAGMENTED_POOL;
    if (!exhausted || fresh)
      return vkFailure(result, "vkAllocateDescriptorSets on " + label_);
    ++current_;
  }
}

void DescriptorAllocator::reset() {
  for (VkDescriptorPool pool : pools_)
    vkResetDescriptorPool(device_, pool, 0);
  current_ = 0;
}

} // namespace kiln::rt
