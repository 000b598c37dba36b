//===- CommandStream.cpp - The device's command buffer and fence ----------===//
//
// See CommandStream.h. Submits are synchronous (submit, then wait on the
// fence): simple, and what the runtime's callers need today.
//
//===----------------------------------------------------------------------===//

#include "CommandStream.h"

#include "VulkanUtil.h"

#include "kiln/runtime/Vulkan.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace kiln::rt {

FenceSpin CommandStream::defaultSpin(bool cpuAdapter) {
  // A CPU implementation (lavapipe) runs the work on the host's cores: a
  // polling thread would take one from it.
  if (const char *text = std::getenv("KILN_FENCE_SPIN_US"); text && *text)
    return {std::chrono::microseconds(std::clamp(std::strtol(text, nullptr, 10), 0L, 100000L)),
            false};
  if (cpuAdapter)
    return {};
  return {std::chrono::microseconds(200), true};
}

StatusOr<std::unique_ptr<CommandStream>>
CommandStream::create(VkDevice device, VkQueue queue, uint32_t queueFamily,
                      std::string label, FenceSpin spin) {
  std::unique_ptr<CommandStream> stream(
      new CommandStream(device, queue, std::move(label)));
  stream->spin_ = spin;

  VkCommandPoolCreateInfo poolInfo{};
  poolInfo.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  poolInfo.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  poolInfo.queueFamilyIndex = queueFamily;
  if (VkResult result =
          vkCreateCommandPool(device, &poolInfo, nullptr, &stream->pool_);
      result != VK_SUCCESS)
    return vkFailure(result, "vkCreateCommandPool on " + stream->label_);

  VkCommandBufferAllocateInfo allocInfo{};
  allocInfo.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocInfo.commandPool = stream->pool_;
  allocInfo.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocInfo.commandBufferCount = 1;
  if (VkResult result =
          vkAllocateCommandBuffers(device, &allocInfo, &stream->commandBuffer_);
      result != VK_SUCCESS)
    return vkFailure(result, "vkAllocateCommandBuffers on " + stream->label_);

  VkFenceCreateInfo fenceInfo{};
  fenceInfo.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  if (VkResult result =
          vkCreateFence(device, &fenceInfo, nullptr, &stream->fence_);
      result != VK_SUCCESS)
    return vkFailure(result, "vkCreateFence on " + stream->label_);
  return stream;
}

CommandStream::~CommandStream() {
  if (fence_)
    vkDestroyFence(device_, fence_, nullptr);
  // Destroying the pool frees its command buffer.
  if (pool_)
    vkDestroyCommandPool(device_, pool_, nullptr);
}

Status CommandStream::begin() {
  if (!broken_.isOk())
    return broken_;
  if (recording_)
    return Status::ok();
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (VkResult result = vkBeginCommandBuffer(commandBuffer_, &begin);
      result != VK_SUCCESS)
    return vkFailure(result, "vkBeginCommandBuffer on " + label_);
  recording_ = true;
  ++serial_;
  return Status::ok();
}

StatusOr<VkCommandBuffer> CommandStream::record(const CommandUse &use) {
  if (!broken_.isOk())
    return broken_;
  if (!recording_) {
    if (Status s = begin(); !s.isOk())
      return s;
  } else if (pendingStages_) {
    VkMemoryBarrier barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    barrier.srcAccessMask = pendingWrites_;
    barrier.dstAccessMask = use.access;
    vkCmdPipelineBarrier(commandBuffer_, pendingStages_, use.stage, 0, 1,
                         &barrier, 0, nullptr, 0, nullptr);
  }
  pendingStages_ = use.stage;
  pendingWrites_ = use.writes;
  return commandBuffer_;
}

void CommandStream::hostReadBarrier() {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(commandBuffer_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr,
                       0, nullptr);
}

Status CommandStream::execute(const std::vector<VkCommandBuffer> &more) {
  if (VkResult result = vkEndCommandBuffer(commandBuffer_);
      result != VK_SUCCESS)
    return vkFailure(result, "vkEndCommandBuffer on " + label_);
  std::vector<VkCommandBuffer> buffers = {commandBuffer_};
  buffers.insert(buffers.end(), more.begin(), more.end());
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = uint32_t(buffers.size());
  submit.pCommandBuffers = buffers.data();
  if (VkResult result = vkQueueSubmit(queue_, 1, &submit, fence_);
      result != VK_SUCCESS)
    return vkFailure(result, "vkQueueSubmit on " + label_);
  // Short work is waited for by polling the fence first; past that the
  // thread sleeps in the driver. Work that took long last time (the same
  // model replayed) is polled for a quarter longer than that.
  auto submitted = std::chrono::steady_clock::now();
  std::chrono::microseconds spin = spin_.floor;
  if (spin_.adaptive)
    spin = std::max(spin, std::min(kMaxAdaptiveSpin, lastWait_ + lastWait_ / 4));
  VkResult polled = VK_NOT_READY;
  auto spinUntil = submitted + spin;
  while ((polled = vkGetFenceStatus(device_, fence_)) == VK_NOT_READY &&
         std::chrono::steady_clock::now() < spinUntil) {
  }
  // A failed wait leaves the work possibly in flight: nothing it uses may be
  // reused, so the stream refuses all later work.
  if (VkResult result = polled == VK_SUCCESS
                            ? VK_SUCCESS
                            : vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
      result != VK_SUCCESS) {
    broken_ = Status::unavailable(
        label_ + " is unusable after " + vkResultName(result) +
        ": recreate the context to use the device again");
    return vkFailure(result, "waiting for " + label_);
  }
  lastWait_ = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - submitted);
  if (VkResult result = vkResetFences(device_, 1, &fence_);
      result != VK_SUCCESS) {
    broken_ = vkFailure(result, "vkResetFences on " + label_);
    return broken_;
  }
  return Status::ok();
}

Status CommandStream::submitAndWait(const std::vector<VkCommandBuffer> &more) {
  if (!recording_)
    return broken_;
  recording_ = false;
  pendingStages_ = 0;
  pendingWrites_ = 0;
  Status status = execute(more);
  if (broken_.isOk())
    vkResetCommandPool(device_, pool_, 0);
  return status;
}

} // namespace kiln::rt
