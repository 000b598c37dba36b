//===- Pipeline.h - A compute pipeline and its layouts ----------*- C++ -*-===//
//
// Private to runtime/lib (the public header only declares the class). A
// Pipeline owns its VkPipeline, VkPipelineLayout and VkDescriptorSetLayout;
// the shader module is destroyed once the pipeline exists.
//
// Ownership: owned by the device's pipeline cache, destroyed with the
// device. Threading: immutable after creation.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_PIPELINE_H
#define KILN_RUNTIME_LIB_PIPELINE_H

#include "kiln/runtime/Vulkan.h"

#include "VulkanApi.h"

#include <memory>
#include <string>

namespace kiln::rt {

/// What the driver is asked to keep of each pipeline's code
/// (PipelineStatistics.h).
enum class PipelineCapture { None, Statistics, StatisticsAndInternals };

class Pipeline {
public:
  /// `owner` identifies the creating device (checked on dispatch);
  /// `maxBindings` is its maxPerStageDescriptorStorageBuffers.
  static StatusOr<std::unique_ptr<Pipeline>>
  create(VkDevice device, const void *owner, const KernelBinary &kernel,
         uint32_t maxBindings, const std::string &label,
         VkPipelineCache cache = VK_NULL_HANDLE, bool *driverCacheHit = nullptr,
         PipelineCapture capture = PipelineCapture::None);
  ~Pipeline();
  Pipeline(const Pipeline &) = delete;
  Pipeline &operator=(const Pipeline &) = delete;

  const void *owner() const { return owner_; }
  uint64_t hash() const { return hash_; }
  const std::string &entryPoint() const { return entryPoint_; }
  uint32_t numBindings() const { return numBindings_; }
  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout setLayout() const { return setLayout_; }
  /// The driver's statistics, when captured (PipelineStatistics.h).
  const std::string &statistics() const { return statistics_; }
  /// The driver's internal representations (its compiled code), when
  /// captured.
  const std::string &internals() const { return internals_; }

private:
  Pipeline(VkDevice device, const void *owner, const KernelBinary &kernel)
      : device_(device), owner_(owner), hash_(kernel.hash),
        entryPoint_(kernel.entryPoint), numBindings_(kernel.numBindings) {}

  VkDevice device_;
  const void *owner_;
  uint64_t hash_;
  std::string entryPoint_;
  uint32_t numBindings_;
  VkDescriptorSetLayout setLayout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  std::string statistics_;
  std::string internals_;
};

/// The statistics of every executable of `pipeline` (created with
/// VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR), as pipelineStatistics()
/// returns them.
std::string captureStatistics(VkDevice device, VkPipeline pipeline);
/// Likewise its internal representations (created with
/// VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR): each
/// executable's name, then every text representation the driver gives.
std::string captureInternals(VkDevice device, VkPipeline pipeline);

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_PIPELINE_H
