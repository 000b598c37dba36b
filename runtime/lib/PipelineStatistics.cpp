//===- PipelineStatistics.cpp - VK_KHR_pipeline_executable_properties -----===//

#include "kiln/runtime/PipelineStatistics.h"

#include "Pipeline.h"

#include <cstdio>
#include <vector>

namespace kiln::rt {

namespace {
/// The pipeline's executables (a compute pipeline: one), or none when the
/// driver does not say.
std::vector<VkPipelineExecutablePropertiesKHR> executablesOf(VkDevice device,
                                                             VkPipeline pipeline) {
  auto getExecutables = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutablePropertiesKHR"));
  if (!getExecutables)
    return {};
  VkPipelineInfoKHR info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR;
  info.pipeline = pipeline;
  uint32_t count = 0;
  if (getExecutables(device, &info, &count, nullptr) != VK_SUCCESS)
    return {};
  std::vector<VkPipelineExecutablePropertiesKHR> executables(count);
  for (auto &e : executables)
    e.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR;
  if (getExecutables(device, &info, &count, executables.data()) != VK_SUCCESS)
    return {};
  executables.resize(count);
  return executables;
}
} // namespace

std::string captureStatistics(VkDevice device, VkPipeline pipeline) {
  auto getStatistics = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutableStatisticsKHR"));
  if (!getStatistics)
    return "";
  std::vector<VkPipelineExecutablePropertiesKHR> executables = executablesOf(device, pipeline);
  std::string text;
  for (uint32_t i = 0; i < executables.size(); ++i) {
    VkPipelineExecutableInfoKHR which{};
    which.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR;
    which.pipeline = pipeline;
    which.executableIndex = i;
    uint32_t n = 0;
    if (getStatistics(device, &which, &n, nullptr) != VK_SUCCESS)
      continue;
    std::vector<VkPipelineExecutableStatisticKHR> statistics(n);
    for (auto &s : statistics)
      s.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    if (getStatistics(device, &which, &n, statistics.data()) != VK_SUCCESS)
      continue;
    text += std::string(executables[i].name) + ":";
    for (uint32_t s = 0; s < n; ++s) {
      char value[64];
      switch (statistics[s].format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        std::snprintf(value, sizeof value, "%s", statistics[s].value.b32 ? "true" : "false");
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        std::snprintf(value, sizeof value, "%lld", static_cast<long long>(statistics[s].value.i64));
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        std::snprintf(value, sizeof value, "%llu",
                      static_cast<unsigned long long>(statistics[s].value.u64));
        break;
      default:
        std::snprintf(value, sizeof value, "%g", statistics[s].value.f64);
        break;
      }
      text += std::string(s ? ", " : " ") + statistics[s].name + "=" + value;
    }
    text += "\n";
  }
  return text;
}

std::string captureInternals(VkDevice device, VkPipeline pipeline) {
  auto getInternals = reinterpret_cast<PFN_vkGetPipelineExecutableInternalRepresentationsKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutableInternalRepresentationsKHR"));
  if (!getInternals)
    return "";
  std::vector<VkPipelineExecutablePropertiesKHR> executables = executablesOf(device, pipeline);
  std::string text;
  for (uint32_t i = 0; i < executables.size(); ++i) {
    VkPipelineExecutableInfoKHR which{};
    which.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR;
    which.pipeline = pipeline;
    which.executableIndex = i;
    uint32_t n = 0;
    if (getInternals(device, &which, &n, nullptr) != VK_SUCCESS || n == 0)
      continue;
    // Two calls: the first gives each representation's size, the second
    // fills the buffers allocated for them.
    std::vector<VkPipelineExecutableInternalRepresentationKHR> reps(n);
    for (auto &r : reps)
      r.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
    if (getInternals(device, &which, &n, reps.data()) != VK_SUCCESS)
      continue;
    std::vector<std::vector<char>> data(n);
    for (uint32_t r = 0; r < n; ++r) {
      data[r].resize(reps[r].dataSize + 1, 0);
      reps[r].pData = data[r].data();
    }
    if (getInternals(device, &which, &n, reps.data()) != VK_SUCCESS)
      continue;
    text += std::string(executables[i].name) + "\n";
    for (uint32_t r = 0; r < n; ++r) {
      text += "== " + std::string(reps[r].name) + " ==\n";
      if (reps[r].isText)
        text += std::string(data[r].data());
      else
        text += "(" + std::to_string(reps[r].dataSize) + " bytes, not text)";
      text += "\n";
    }
  }
  return text;
}

std::string pipelineStatistics(const Pipeline &pipeline) { return pipeline.statistics(); }

std::string pipelineInternals(const Pipeline &pipeline) { return pipeline.internals(); }

} // namespace kiln::rt
