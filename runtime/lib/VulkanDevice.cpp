//===- VulkanDevice.cpp - Transfers and dispatches on one device ----------===//
//
// Every public method takes the device mutex for its whole duration, so a
// device is safe from any thread and calls on one device are serialized.
// Work is recorded into one command buffer and submitted by flush() or by a
// transfer that needs it (download, a full staging buffer); see
// CommandStream.h for the ordering between recorded commands.
//
//===----------------------------------------------------------------------===//

#include "DeviceState.h"

#include "VulkanUtil.h"

#include <algorithm>
#include <cstring>

namespace kiln::rt {

using Lock = std::lock_guard<std::mutex>;

VulkanDevice::VulkanDevice(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

// State's destructor drains and tears down the device.
VulkanDevice::~VulkanDevice() = default;

const std::string &VulkanDevice::name() const { return state_->name; }
const std::string &VulkanDevice::api() const { return state_->api; }
std::string VulkanDevice::adapterName() const { return state_->adapter.name; }
std::string VulkanDevice::adapterUuid() const { return state_->adapter.uuid; }
const AdapterInfo &VulkanDevice::adapter() const { return state_->adapter; }
size_t VulkanDevice::ordinal() const { return state_->ordinal; }
bool VulkanDevice::capturesPipelineStatistics() const { return state_->capture != PipelineCapture::None; }
void *VulkanDevice::vkDevice() const { return state_->device; }

/// `buffer` as this device's VulkanBuffer, or null if another device owns it
/// (only this device creates buffers whose device() is this device).
static VulkanBuffer *asOwnBuffer(VulkanDevice &device, Buffer &buffer) {
  if (&buffer.device() != &device)
    return nullptr;
  return static_cast<VulkanBuffer *>(&buffer);
}

static Status foreignBuffer(const VulkanDevice &device, const Buffer &buffer,
                            const char *role) {
  return Status::invalidArgument(
      std::string("the ") + role + " buffer belongs to " +
      buffer.device().name() + ", not " + device.name() + ": allocate it on " +
      device.name() + " or copy it there through the host");
}

static Status tooLarge(const char *what, size_t bytes, const Buffer &buffer) {
  return Status::invalidArgument(std::string(what) + " of " +
                                 std::to_string(bytes) + " bytes exceeds the " +
                                 std::to_string(buffer.size()) +
                                 "-byte buffer on " + buffer.device().name());
}

/// Submits and waits for the recorded work, then recycles what it used.
Status flushLocked(VulkanDevice::State &s) {
  if (!s.stream->hasWork()) {
    if (s.cuda)
      if (Status status = s.cuda->synchronize(); !status.isOk())
        return status;
    // Nothing recorded or in flight: what an upload took from staging
    // before failing to record is free again.
    s.staging->reset();
    return Status::ok();
  }
  return submitLocked(s);
}

Status submitLocked(VulkanDevice::State &s, const std::vector<VkCommandBuffer> &more) {
  // Vulkan work recorded after a CUDA launch reads what it wrote: the
  // launches finish first (CudaInterop.h).
  Status launched = s.cuda ? s.cuda->synchronize() : Status::ok();
  uint64_t serial = s.stream->recordingSerial();
  Status status = s.stream->submitAndWait(more);
  ++s.counters.submits;
  // After a failed submit the work is abandoned; recycle either way so
  // staging never fills with space nothing will release.
  s.descriptors->reset();
  s.staging->reset();
  if (!status.isOk())
    return status;
  s.pool->retire(serial);
  return launched;
}

StatusOr<std::shared_ptr<Buffer>> VulkanDevice::allocate(size_t bytes) {
  StatusOr<Allocation> allocation = state_->pool->acquire(bytes);
  if (!allocation.isOk())
    return allocation.status();
  return std::shared_ptr<Buffer>(
      std::make_shared<VulkanBuffer>(*this, bytes, *allocation, state_->pool));
}

Status VulkanDevice::upload(Buffer &dst, const void *src, size_t bytes) {
  State &s = *state_;
  Lock lock(s.mutex);
  VulkanBuffer *buffer = asOwnBuffer(*this, dst);
  if (!buffer)
    return foreignBuffer(*this, dst, "destination");
  if (bytes > dst.size())
    return tooLarge("upload", bytes, dst);
  if (bytes == 0)
    return Status::ok();
  if (!src)
    return Status::invalidArgument("upload of " + std::to_string(bytes) +
                                   " bytes from a null pointer to " + s.name);

  const auto *from = static_cast<const uint8_t *>(src);
  for (size_t done = 0; done < bytes;) {
    VkDeviceSize chunk =
        std::min<VkDeviceSize>(bytes - done, StagingBuffer::kMaxBytes);
    if (s.staging->available() < chunk) {
      // Earlier uploads in this command buffer still read the staging
      // memory: submit them, then make room (growing while below the cap).
      if (Status status = flushLocked(s); !status.isOk())
        return status;
      if (s.staging->capacity() < StagingBuffer::kMaxBytes)
        if (Status status = s.staging->grow(chunk); !status.isOk())
          return status;
      if (s.staging->available() < chunk)
        return Status::internal("no staging memory for a " + std::to_string(chunk) +
                                "-byte upload on " + s.name + " after a flush");
    }
    VkDeviceSize at = s.staging->take(chunk);
    std::memcpy(s.staging->data() + at, from + done, chunk);
    StatusOr<VkCommandBuffer> cmd = s.stream->record(CommandUse::transfer());
    if (!cmd.isOk())
      return cmd.status();
    VkBufferCopy region{at, done, chunk};
    vkCmdCopyBuffer(*cmd, s.staging->handle(), buffer->handle(), 1, &region);
    buffer->markUsed(s.stream->recordingSerial());
    done += chunk;
  }
  s.counters.bytesUploaded += bytes;
  return Status::ok();
}

Status VulkanDevice::download(Buffer &src, void *dst, size_t bytes) {
  State &s = *state_;
  Lock lock(s.mutex);
  VulkanBuffer *buffer = asOwnBuffer(*this, src);
  if (!buffer)
    return foreignBuffer(*this, src, "source");
  if (bytes > src.size())
    return tooLarge("download", bytes, src);
  if (bytes && !dst)
    return Status::invalidArgument("download of " + std::to_string(bytes) +
                                   " bytes from " + s.name +
                                   " to a null pointer");
  if (Status status = flushLocked(s); !status.isOk())
    return status;

  auto *to = static_cast<uint8_t *>(dst);
  for (size_t done = 0; done < bytes;) {
    VkDeviceSize chunk =
        std::min<VkDeviceSize>(bytes - done, StagingBuffer::kMaxBytes);
    if (s.staging->available() < chunk)
      if (Status status = s.staging->grow(chunk); !status.isOk())
        return status;
    VkDeviceSize at = s.staging->take(chunk);
    StatusOr<VkCommandBuffer> cmd = s.stream->record(CommandUse::transfer());
    if (!cmd.isOk())
      return cmd.status();
    VkBufferCopy region{done, at, chunk};
    vkCmdCopyBuffer(*cmd, buffer->handle(), s.staging->handle(), 1, &region);
    buffer->markUsed(s.stream->recordingSerial());
    s.stream->hostReadBarrier();
    if (Status status = flushLocked(s); !status.isOk())
      return status;
    // The staging memory stays untouched until the next command is recorded.
    std::memcpy(to + done, s.staging->data() + at, chunk);
    done += chunk;
  }
  s.counters.bytesDownloaded += bytes;
  return Status::ok();
}

Status VulkanDevice::flush() {
  Lock lock(state_->mutex);
  return flushLocked(*state_);
}

Status VulkanDevice::copy(Buffer &src, Buffer &dst, size_t bytes) {
  State &s = *state_;
  Lock lock(s.mutex);
  VulkanBuffer *from = asOwnBuffer(*this, src);
  if (!from)
    return foreignBuffer(*this, src, "source");
  VulkanBuffer *to = asOwnBuffer(*this, dst);
  if (!to)
    return foreignBuffer(*this, dst, "destination");
  if (bytes > src.size())
    return tooLarge("copy", bytes, src);
  if (bytes > dst.size())
    return tooLarge("copy", bytes, dst);
  // Copying a buffer onto itself changes nothing (and Vulkan forbids the
  // overlapping regions).
  if (bytes == 0 || from == to)
    return Status::ok();
  StatusOr<VkCommandBuffer> cmd = s.stream->record(CommandUse::transfer());
  if (!cmd.isOk())
    return cmd.status();
  VkBufferCopy region{0, 0, bytes};
  vkCmdCopyBuffer(*cmd, from->handle(), to->handle(), 1, &region);
  from->markUsed(s.stream->recordingSerial());
  to->markUsed(s.stream->recordingSerial());
  return Status::ok();
}

StatusOr<Pipeline *> VulkanDevice::pipeline(const KernelBinary &kernel) {
  State &s = *state_;
  Lock lock(s.mutex);
  if (auto it = s.pipelines.find(kernel.hash); it != s.pipelines.end()) {
    Pipeline *cached = it->second.get();
    // Same hash, different interface: a hashing bug upstream, reported
    // rather than running the wrong kernel.
    if (cached->entryPoint() != kernel.entryPoint ||
        cached->numBindings() != kernel.numBindings)
      return Status::invalidArgument(
          "kernel " + formatHash(kernel.hash) + " is cached on " + s.name +
          " with entry point '" + cached->entryPoint() + "' and " +
          std::to_string(cached->numBindings()) +
          " bindings, but was requested with '" + kernel.entryPoint + "' and " +
          std::to_string(kernel.numBindings));
    ++s.counters.pipelineCacheHits;
    return cached;
  }
  // A driver without cooperative matrices fails such a module with no
  // reason given (lavapipe: VK_ERROR_UNKNOWN): say which and what to do;
  // bf16 first (its modules declare the f16 ones' capability too).
  if (kernel.spirv && !s.adapter.cooperativeMatrixBF16 &&
      spirvUsesBF16CooperativeMatrix(*kernel.spirv))
    return Status::unavailable(
        "kernel " + formatHash(kernel.hash) +
        " multiplies bf16 on cooperative matrices (VK_KHR_shader_bfloat16), which " + s.label +
        " lacks: compile the model for this device (kiln-compile --target vulkan here, "
        "without KILN_GPU_LIMITS=...,coopbf16=1) or run it on a GPU that has them");
  if (kernel.spirv && !s.adapter.cooperativeMatrixF16 &&
      spirvUsesCooperativeMatrix(*kernel.spirv))
    return Status::unavailable(
        "kernel " + formatHash(kernel.hash) +
        " multiplies f16 on cooperative matrices (tensor cores, VK_KHR_cooperative_matrix), "
        "which " + s.label +
        " lacks: compile the model for this device (kiln-compile --target vulkan here, "
        "without KILN_GPU_LIMITS=...,coop=1) or run it on a GPU that has them");
  // A Program's kernel against the device once, when its pipeline is made
  // (a dispatch of a cached pipeline checks nothing again).
  if (kernel.code)
    if (Status st = checkAssumptions(*kernel.code, s.adapter, "kernel " + formatHash(kernel.hash));
        !st.isOk())
      return st;
  // Pinned where the device can be asked; else its own size must be it.
  KernelBinary binary = kernel;
  binary.subgroupSize =
      kernel.code ? pinnedSubgroupSize(*kernel.code, s.adapter)
                  : pinnedSubgroupSize(kernel.subgroupSize, 0, false, s.adapter);
  if (kernel.subgroupSize && !binary.subgroupSize &&
      kernel.subgroupSize != s.adapter.subgroupSize)
    return Status::unavailable("kernel " + formatHash(kernel.hash) +
                               " was compiled for subgroup size " +
                               std::to_string(kernel.subgroupSize) + "; " + s.label + " runs " +
                               std::to_string(s.adapter.subgroupSize) +
                               " and cannot be asked for another");
  bool driverHit = false;
  StatusOr<std::unique_ptr<Pipeline>> created = Pipeline::create(
      s.device, &s, binary, s.maxStorageBuffersPerStage, s.label,
      s.driverCache ? s.driverCache->handle() : VK_NULL_HANDLE,
      s.creationFeedback ? &driverHit : nullptr, s.capture);
  if (!created.isOk())
    return created.status();
  if (driverHit)
    ++s.counters.driverCacheHits;
  else if (s.driverCache)
    s.driverCache->noteCreated();
  Pipeline *result = created->get();
  s.pipelines.emplace(kernel.hash, std::move(*created));
  ++s.counters.pipelinesCreated;
  return result;
}

Status VulkanDevice::releasePipeline(uint64_t hash) {
  State &s = *state_;
  Lock lock(s.mutex);
  auto it = s.pipelines.find(hash);
  if (it == s.pipelines.end())
    return Status::ok();
  // Recorded dispatches may still use it: finish them first.
  if (Status status = flushLocked(s); !status.isOk())
    return status;
  s.pipelines.erase(it);
  return Status::ok();
}

void VulkanDevice::savePipelineCache() {
  State &s = *state_;
  Lock lock(s.mutex);
  if (s.driverCache)
    s.driverCache->save();
}

size_t VulkanDevice::pipelineCount() const {
  State &s = *state_;
  Lock lock(s.mutex);
  return s.pipelines.size();
}

Status VulkanDevice::dispatch(Pipeline *pipeline,
                              const std::vector<Buffer *> &bindings,
                              uint32_t groupsX, uint32_t groupsY,
                              uint32_t groupsZ) {
  State &s = *state_;
  Lock lock(s.mutex);
  if (!pipeline || pipeline->owner() != &s)
    return Status::invalidArgument("dispatch on " + s.name +
                                   " of a pipeline not created by this device");
  if (bindings.size() != pipeline->numBindings())
    return Status::invalidArgument(
        "dispatch on " + s.name + " with " + std::to_string(bindings.size()) +
        " buffers for a kernel with " +
        std::to_string(pipeline->numBindings()) + " bindings");
  const AdapterInfo &adapter = s.adapter;
  uint32_t groups[3] = {groupsX, groupsY, groupsZ};
  for (int i = 0; i < 3; ++i)
    if (groups[i] > adapter.maxWorkgroupCount[i])
      return Status::invalidArgument(
          "dispatch on " + s.name + " of " + std::to_string(groupsX) + "x" +
          std::to_string(groupsY) + "x" + std::to_string(groupsZ) +
          " workgroups exceeds the device limit of " +
          std::to_string(adapter.maxWorkgroupCount[0]) + "x" +
          std::to_string(adapter.maxWorkgroupCount[1]) + "x" +
          std::to_string(adapter.maxWorkgroupCount[2]));

  std::vector<VulkanBuffer *> buffers(bindings.size());
  std::vector<VkDescriptorBufferInfo> infos(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    std::string role = "binding " + std::to_string(i);
    if (!bindings[i])
      return Status::invalidArgument("dispatch on " + s.name + ": " + role +
                                     " is null");
    buffers[i] = asOwnBuffer(*this, *bindings[i]);
    if (!buffers[i])
      return foreignBuffer(*this, *bindings[i], role.c_str());
    size_t size = bindings[i]->size();
    if (size > adapter.maxStorageBufferRange)
      return Status::invalidArgument(
          "dispatch on " + s.name + ": " + role + " holds " +
          std::to_string(size) +
          " bytes, more than the device can bind (maxStorageBufferRange " +
          std::to_string(adapter.maxStorageBufferRange) + ")");
    // A descriptor range may not be empty: bind a size-0 buffer's pooled
    // bytes. Otherwise bind exactly size() so that OpArrayLength sees it.
    infos[i] = {buffers[i]->handle(), 0,
                size ? VkDeviceSize(size) : buffers[i]->capacity()};
  }

  VkDescriptorSet set = VK_NULL_HANDLE;
  if (!bindings.empty()) {
    StatusOr<VkDescriptorSet> allocated =
        s.descriptors->allocate(pipeline->setLayout(), pipeline->numBindings());
    if (!allocated.isOk())
      return allocated.status();
    set = *allocated;
    std::vector<VkWriteDescriptorSet> writes(bindings.size());
    for (size_t i = 0; i < bindings.size(); ++i) {
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = set;
      writes[i].dstBinding = uint32_t(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(s.device, uint32_t(writes.size()), writes.data(), 0,
                           nullptr);
  }
  StatusOr<VkCommandBuffer> cmd = s.stream->record(CommandUse::compute());
  if (!cmd.isOk())
    return cmd.status();
  vkCmdBindPipeline(*cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->handle());
  if (set)
    vkCmdBindDescriptorSets(*cmd, VK_PIPELINE_BIND_POINT_COMPUTE,
                            pipeline->layout(), 0, 1, &set, 0, nullptr);
  vkCmdDispatch(*cmd, groupsX, groupsY, groupsZ);
  for (VulkanBuffer *buffer : buffers)
    buffer->markUsed(s.stream->recordingSerial());
  ++s.counters.dispatches;
  return Status::ok();
}

DeviceStats VulkanDevice::stats() const {
  const State &s = *state_;
  Lock lock(s.mutex);
  DeviceStats stats = s.counters;
  s.pool->addStats(stats);
  stats.validationMessages =
      s.shared->validationMessages.load() - s.validationBaseline;
  return stats;
}

void VulkanDevice::resetStats() {
  State &s = *state_;
  Lock lock(s.mutex);
  s.counters = DeviceStats{};
  s.pool->resetStats();
  s.validationBaseline = s.shared->validationMessages.load();
}

} // namespace kiln::rt
