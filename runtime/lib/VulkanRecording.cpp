//===- VulkanRecording.cpp - record dispatches once, replay per run -------===//
//
// A Recording owns a command pool with two command buffers: the dispatches,
// recorded once (not one-time-submit, so it can be submitted again after
// each wait), and an epilogue of copies out, re-recorded per replay when
// there are any. Its descriptor sets come from a pool of its own and are
// written once, before recording: updating a set bound in a recorded
// command buffer would invalidate it. Barriers are global memory barriers,
// as in CommandStream: the first orders the dispatches after the uploads
// submitted with them; the last makes their writes visible to whatever the
// device or host does next.
//
//===----------------------------------------------------------------------===//

#include "DeviceState.h"

#include "VulkanUtil.h"

#include <algorithm>

namespace kiln::rt {

class Recording {
public:
  Recording(VkDevice device, const void *owner) : device_(device), owner_(owner) {}
  ~Recording() {
    if (descriptorPool_)
      vkDestroyDescriptorPool(device_, descriptorPool_, nullptr);
    if (queries_)
      vkDestroyQueryPool(device_, queries_, nullptr);
    if (commandPool_)
      vkDestroyCommandPool(device_, commandPool_, nullptr);
  }
  Recording(const Recording &) = delete;
  Recording &operator=(const Recording &) = delete;

  VkDevice device_;
  const void *owner_;
  VkCommandPool commandPool_ = VK_NULL_HANDLE;
  VkCommandBuffer dispatches_ = VK_NULL_HANDLE;
  VkCommandBuffer epilogue_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptorPool_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE; // two timestamps per dispatch, when timed
  std::vector<std::shared_ptr<Pipeline>> pipelines_;
  std::vector<VulkanBuffer *> buffers_; // every buffer bound, for the pool's serials
};

namespace {
void globalBarrier(VkCommandBuffer cmd, VkPipelineStageFlags srcStage, VkAccessFlags src,
                   VkPipelineStageFlags dstStage, VkAccessFlags dst) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = src;
  barrier.dstAccessMask = dst;
  vkCmdPipelineBarrier(cmd, srcStage, dstStage, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

constexpr VkPipelineStageFlags kComputeOrTransfer =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
constexpr VkAccessFlags kAnyAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
} // namespace

StatusOr<std::shared_ptr<Recording>>
VulkanDevice::record(const std::vector<RecordedDispatch> &dispatches, bool timed) {
  State &s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  auto recording = std::make_shared<Recording>(s.device, &s);
  uint32_t descriptors = 0;
  for (size_t d = 0; d < dispatches.size(); ++d) {
    const RecordedDispatch &dispatch = dispatches[d];
    std::string at = "recording dispatch " + std::to_string(d) + " on " + s.name;
    if (!dispatch.pipeline || dispatch.pipeline->owner() != &s)
      return Status::invalidArgument(at + ": a pipeline not created by this device");
    auto held = s.pipelines.find(dispatch.pipeline->hash());
    if (held == s.pipelines.end() || held->second.get() != dispatch.pipeline)
      return Status::invalidArgument(at + ": its pipeline was released");
    recording->pipelines_.push_back(held->second);
    if (dispatch.bindings.size() != dispatch.pipeline->numBindings())
      return Status::invalidArgument(at + ": " + std::to_string(dispatch.bindings.size()) +
                                     " buffers for a kernel with " +
                                     std::to_string(dispatch.pipeline->numBindings()) +
                                     " bindings");
    for (int i = 0; i < 3; ++i)
      if (dispatch.groups[i] == 0 || dispatch.groups[i] > s.adapter.maxWorkgroupCount[i])
        return Status::invalidArgument(at + ": workgroup count " +
                                       std::to_string(dispatch.groups[i]) +
                                       " out of the device's range");
    for (Buffer *buffer : dispatch.bindings) {
      if (!buffer || &buffer->device() != this)
        return Status::invalidArgument(at + ": a binding that is not a buffer of " + s.name);
      if (buffer->size() > s.adapter.maxStorageBufferRange)
        return Status::invalidArgument(at + ": a binding larger than maxStorageBufferRange");
      recording->buffers_.push_back(static_cast<VulkanBuffer *>(buffer));
    }
    descriptors += uint32_t(dispatch.bindings.size());
  }

  VkCommandPoolCreateInfo poolInfo{};
  poolInfo.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  poolInfo.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  poolInfo.queueFamilyIndex = s.queueFamily;
  if (VkResult r = vkCreateCommandPool(s.device, &poolInfo, nullptr, &recording->commandPool_);
      r != VK_SUCCESS)
    return vkFailure(r, "vkCreateCommandPool for a recording on " + s.label);
  VkCommandBuffer buffers[2];
  VkCommandBufferAllocateInfo allocInfo{};
  allocInfo.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  allocInfo.commandPool = recording->commandPool_;
  allocInfo.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocInfo.commandBufferCount = 2;
  if (VkResult r = vkAllocateCommandBuffers(s.device, &allocInfo, buffers); r != VK_SUCCESS)
    return vkFailure(r, "vkAllocateCommandBuffers for a recording on " + s.label);
  recording->dispatches_ = buffers[0];
  recording->epilogue_ = buffers[1];

  std::vector<VkDescriptorSet> sets(dispatches.size(), VK_NULL_HANDLE);
  if (descriptors > 0) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
    VkDescriptorPoolCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    info.maxSets = uint32_t(dispatches.size());
    info.poolSizeCount = 1;
    info.pPoolSizes = &size;
    if (VkResult r = vkCreateDescriptorPool(s.device, &info, nullptr, &recording->descriptorPool_);
        r != VK_SUCCESS)
      return vkFailure(r, "vkCreateDescriptorPool for a recording on " + s.label);
    for (size_t d = 0; d < dispatches.size(); ++d) {
      const RecordedDispatch &dispatch = dispatches[d];
      if (dispatch.bindings.empty())
        continue;
      VkDescriptorSetLayout layout = dispatch.pipeline->setLayout();
      VkDescriptorSetAllocateInfo alloc{};
      alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
      alloc.descriptorPool = recording->descriptorPool_;
      alloc.descriptorSetCount = 1;
      alloc.pSetLayouts = &layout;
      if (VkResult r = vkAllocateDescriptorSets(s.device, &alloc, &sets[d]); r != VK_SUCCESS)
        return vkFailure(r, "vkAllocateDescriptorSets for a recording on " + s.label);
      std::vector<VkDescriptorBufferInfo> infos(dispatch.bindings.size());
      std::vector<VkWriteDescriptorSet> writes(dispatch.bindings.size());
      for (size_t i = 0; i < dispatch.bindings.size(); ++i) {
        auto *buffer = static_cast<VulkanBuffer *>(dispatch.bindings[i]);
        size_t bytes = buffer->size();
        infos[i] = {buffer->handle(), 0, bytes ? VkDeviceSize(bytes) : buffer->capacity()};
        writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        writes[i].dstSet = sets[d];
        writes[i].dstBinding = uint32_t(i);
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
      }
      vkUpdateDescriptorSets(s.device, uint32_t(writes.size()), writes.data(), 0, nullptr);
    }
  }

  if (timed) {
    if (s.adapter.timestampPeriod <= 0)
      return Status::unavailable(s.name + " cannot time compute work (no timestamps)");
    VkQueryPoolCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = uint32_t(2 * std::max<size_t>(1, dispatches.size()));
    if (VkResult r = vkCreateQueryPool(s.device, &info, nullptr, &recording->queries_);
        r != VK_SUCCESS)
      return vkFailure(r, "vkCreateQueryPool for a recording on " + s.label);
  }
  VkCommandBuffer cmd = recording->dispatches_;
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  if (VkResult r = vkBeginCommandBuffer(cmd, &begin); r != VK_SUCCESS)
    return vkFailure(r, "vkBeginCommandBuffer for a recording on " + s.label);
  globalBarrier(cmd, kComputeOrTransfer, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  if (recording->queries_)
    vkCmdResetQueryPool(cmd, recording->queries_, 0, uint32_t(2 * dispatches.size()));
  for (size_t d = 0; d < dispatches.size(); ++d) {
    const RecordedDispatch &dispatch = dispatches[d];
    if (d > 0)
      globalBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dispatch.pipeline->handle());
    if (sets[d])
      vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dispatch.pipeline->layout(),
                              0, 1, &sets[d], 0, nullptr);
    if (recording->queries_)
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, recording->queries_,
                          uint32_t(2 * d));
    vkCmdDispatch(cmd, dispatch.groups[0], dispatch.groups[1], dispatch.groups[2]);
    if (recording->queries_)
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, recording->queries_,
                          uint32_t(2 * d + 1));
  }
  globalBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                kComputeOrTransfer | VK_PIPELINE_STAGE_HOST_BIT,
                kAnyAccess | VK_ACCESS_HOST_READ_BIT);
  if (VkResult r = vkEndCommandBuffer(cmd); r != VK_SUCCESS)
    return vkFailure(r, "vkEndCommandBuffer for a recording on " + s.label);
  return recording;
}

Status VulkanDevice::replay(Recording &recording, const std::vector<BufferCopy> &after,
                            std::vector<double> *nanoseconds) {
  State &s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (recording.owner_ != &s)
    return Status::invalidArgument("replay on " + s.name + " of a recording made on another "
                                   "device");
  for (const BufferCopy &copy : after)
    if (!copy.src || !copy.dst || &copy.src->device() != this || &copy.dst->device() != this ||
        copy.bytes > copy.src->size() || copy.bytes > copy.dst->size())
      return Status::invalidArgument("replay on " + s.name +
                                     ": a copy out of range or between other devices");
  std::vector<VkCommandBuffer> submit = {recording.dispatches_};
  if (!after.empty()) {
    VkCommandBuffer cmd = recording.epilogue_;
    VkCommandBufferBeginInfo begin{};
    begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if (VkResult r = vkBeginCommandBuffer(cmd, &begin); r != VK_SUCCESS)
      return vkFailure(r, "vkBeginCommandBuffer for a replay on " + s.label);
    for (const BufferCopy &copy : after) {
      if (copy.bytes == 0)
        continue;
      VkBufferCopy region{0, 0, copy.bytes};
      vkCmdCopyBuffer(cmd, static_cast<VulkanBuffer *>(copy.src)->handle(),
                      static_cast<VulkanBuffer *>(copy.dst)->handle(), 1, &region);
    }
    globalBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                  kComputeOrTransfer | VK_PIPELINE_STAGE_HOST_BIT,
                  kAnyAccess | VK_ACCESS_HOST_READ_BIT);
    if (VkResult r = vkEndCommandBuffer(cmd); r != VK_SUCCESS)
      return vkFailure(r, "vkEndCommandBuffer for a replay on " + s.label);
    submit.push_back(cmd);
  }
  // The work recorded before (uploads into the recording's inputs) goes in
  // the same submit, first.
  if (Status status = s.stream->begin(); !status.isOk())
    return status;
  uint64_t serial = s.stream->recordingSerial();
  for (VulkanBuffer *buffer : recording.buffers_)
    buffer->markUsed(serial);
  for (const BufferCopy &copy : after) {
    static_cast<VulkanBuffer *>(copy.src)->markUsed(serial);
    static_cast<VulkanBuffer *>(copy.dst)->markUsed(serial);
  }
  if (Status status = submitLocked(s, submit); !status.isOk())
    return status;
  s.counters.dispatches += recording.pipelines_.size();
  if (nanoseconds) {
    nanoseconds->clear();
    size_t n = recording.pipelines_.size();
    if (recording.queries_ && n > 0) {
      std::vector<uint64_t> ticks(2 * n);
      if (VkResult r = vkGetQueryPoolResults(s.device, recording.queries_, 0, uint32_t(2 * n),
                                             ticks.size() * 8, ticks.data(), 8,
                                             VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
          r != VK_SUCCESS)
        return vkFailure(r, "vkGetQueryPoolResults on " + s.label);
      for (size_t d = 0; d < n; ++d)
        nanoseconds->push_back(double(ticks[2 * d + 1] - ticks[2 * d]) *
                               s.adapter.timestampPeriod);
    }
  }
  if (!after.empty())
    vkResetCommandBuffer(recording.epilogue_, 0);
  return Status::ok();
}

} // namespace kiln::rt
