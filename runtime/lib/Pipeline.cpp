//===- Pipeline.cpp - A compute pipeline and its layouts ------------------===//
//
// See Pipeline.h. Creation checks the SPIR-V structurally first, so that a
// corrupt binary is an error status and never reaches a driver that might
// crash on it.
//
//===----------------------------------------------------------------------===//

#include "Pipeline.h"

#include "SpirvCheck.h"
#include "VulkanUtil.h"

#include <vector>

namespace kiln::rt {

StatusOr<std::unique_ptr<Pipeline>>
Pipeline::create(VkDevice device, const void *owner, const KernelBinary &kernel,
                 uint32_t maxBindings, const std::string &label,
                 VkPipelineCache cache, bool *driverCacheHit, PipelineCapture capture) {
  std::string what = "kernel " + formatHash(kernel.hash) + " on " + label;
  if (!kernel.spirv)
    return Status::invalidArgument("no SPIR-V for " + what);
  if (kernel.numBindings > maxBindings)
    return Status::invalidArgument(
        what + " uses " + std::to_string(kernel.numBindings) +
        " storage buffers; the device allows " + std::to_string(maxBindings) +
        " per shader stage");
  if (Status status = checkSpirv(*kernel.spirv, kernel.entryPoint);
      !status.isOk())
    return Status(status.code(), status.message() + " (" + what + ")");

  std::unique_ptr<Pipeline> pipeline(new Pipeline(device, owner, kernel));

  std::vector<VkDescriptorSetLayoutBinding> bindings(kernel.numBindings);
  for (uint32_t i = 0; i < kernel.numBindings; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo setInfo{};
  setInfo.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  setInfo.bindingCount = kernel.numBindings;
  setInfo.pBindings = bindings.data();
  if (VkResult result = vkCreateDescriptorSetLayout(device, &setInfo, nullptr,
                                                    &pipeline->setLayout_);
      result != VK_SUCCESS)
    return vkFailure(result, "vkCreateDescriptorSetLayout for " + what);

  VkPipelineLayoutCreateInfo layoutInfo{};
  layoutInfo.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layoutInfo.setLayoutCount = 1;
  layoutInfo.pSetLayouts = &pipeline->setLayout_;
  if (VkResult result = vkCreatePipelineLayout(device, &layoutInfo, nullptr,
                                               &pipeline->layout_);
      result != VK_SUCCESS)
    return vkFailure(result, "vkCreatePipelineLayout for " + what);

  VkShaderModuleCreateInfo moduleInfo{};
  moduleInfo.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  moduleInfo.codeSize = kernel.spirv->size() * sizeof(uint32_t);
  moduleInfo.pCode = kernel.spirv->data();
  VkShaderModule module = VK_NULL_HANDLE;
  if (VkResult result =
          vkCreateShaderModule(device, &moduleInfo, nullptr, &module);
      result != VK_SUCCESS)
    return vkFailure(result, "vkCreateShaderModule for " + what);

  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = pipeline->entryPoint_.c_str();
  info.layout = pipeline->layout_;
  // The subgroup size the kernel's shuffles assume (VulkanDevice::pipeline
  // asks only where the device can choose it).
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO;
  subgroup.requiredSubgroupSize = kernel.subgroupSize;
  if (kernel.subgroupSize)
    info.stage.pNext = &subgroup;
  // Vulkan 1.3 drivers say whether the pipeline came from the cache.
  VkPipelineCreationFeedback feedback{}, stageFeedback{};
  VkPipelineCreationFeedbackCreateInfo feedbackInfo{};
  feedbackInfo.sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO;
  feedbackInfo.pPipelineCreationFeedback = &feedback;
  feedbackInfo.pipelineStageCreationFeedbackCount = 1;
  feedbackInfo.pPipelineStageCreationFeedbacks = &stageFeedback;
  if (driverCacheHit)
    info.pNext = &feedbackInfo;
  if (capture != PipelineCapture::None)
    info.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  if (capture == PipelineCapture::StatisticsAndInternals)
    info.flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
  VkResult result = vkCreateComputePipelines(device, cache, 1, &info,
                                             nullptr, &pipeline->pipeline_);
  if (driverCacheHit)
    *driverCacheHit =
        (feedback.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
        (feedback.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT);
  vkDestroyShaderModule(device, module, nullptr);
  if (result != VK_SUCCESS)
    return vkFailure(result, "vkCreateComputePipelines for " + what);
  if (capture != PipelineCapture::None)
    pipeline->statistics_ = kiln::rt::captureStatistics(device, pipeline->pipeline_);
  if (capture == PipelineCapture::StatisticsAndInternals)
    pipeline->internals_ = kiln::rt::captureInternals(device, pipeline->pipeline_);
  return pipeline;
}

Pipeline::~Pipeline() {
  if (pipeline_)
    vkDestroyPipeline(device_, pipeline_, nullptr);
  if (layout_)
    vkDestroyPipelineLayout(device_, layout_, nullptr);
  if (setLayout_)
    vkDestroyDescriptorSetLayout(device_, setLayout_, nullptr);
}

} // namespace kiln::rt
