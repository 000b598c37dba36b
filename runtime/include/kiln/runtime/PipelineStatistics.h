//===- PipelineStatistics.h - what the driver says of a pipeline -*- C++ -*-===//
//
// With KILN_PIPELINE_STATISTICS=1 in the environment when a Vulkan device is
// created, and a driver offering VK_KHR_pipeline_executable_properties, every
// pipeline is created capturing the driver's statistics of its code
// (registers per work item, shared memory, instruction counts: whatever the
// driver reports). They say why a kernel runs as it does, for instance how
// many workgroups fit a compute unit. Off by default: capturing may cost
// pipeline-creation time. KILN_PIPELINE_STATISTICS=internal also keeps the
// driver's internal representations (its compiled code, where the driver
// gives it as text): what a kernel became, instruction by instruction.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PIPELINESTATISTICS_H
#define KILN_RUNTIME_PIPELINESTATISTICS_H

#include <string>

namespace kiln::rt {

class Pipeline;

/// The environment variable that turns capturing on.
inline constexpr const char *kPipelineStatisticsEnv = "KILN_PIPELINE_STATISTICS";
/// Its value that captures internal representations too.
inline constexpr const char *kPipelineInternalsValue = "internal";

/// One line per driver executable: "NAME: statistic=value, ...". Empty when
/// statistics were not captured (not asked for, or the driver lacks them).
std::string pipelineStatistics(const Pipeline &pipeline);

/// Each executable's name on a line of its own, then each of its text
/// representations headed "== NAME ==". Empty when not captured or the
/// driver gives none.
std::string pipelineInternals(const Pipeline &pipeline);

} // namespace kiln::rt

#endif // KILN_RUNTIME_PIPELINESTATISTICS_H
