//===- KernelAssumptions.cpp - A kernel's assumptions against a GPU -------===//
//
// See Vulkan.h (checkAssumptions). A kernel compiled for one GPU and run
// on another must run as compiled or be refused before anything runs: a
// row kernel whose shuffles assume 32 lanes wrote NaN on an 8-lane device.
// Stateless; safe from any thread.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Program.h"
#include "kiln/runtime/SpirvInterface.h"
#include "kiln/runtime/Vulkan.h"

namespace kiln::rt {

bool pinsSubgroupSize(uint32_t subgroupSize, const AdapterInfo &adapter) {
  // A kernel compiled for the device's own size runs as is (a SPIR-V 1.3
  // module sees the reported size without asking); another is asked for.
  return subgroupSize && subgroupSize != adapter.subgroupSize && adapter.minSubgroupSize &&
         adapter.minSubgroupSize <= subgroupSize && subgroupSize <= adapter.maxSubgroupSize;
}

Status checkAssumptions(const SpirvCode &code, const AdapterInfo &adapter,
                        const std::string &kernelName) {
  auto refuse = [&](const std::string &assumption, const std::string &file,
                    const std::string &device, const std::string &fix) {
    return Status::unavailable(kernelName + " was compiled for " + assumption + " " + file +
                               "; " + adapter.name + " has " + device + ": " + fix);
  };
  const std::string recompile =
      "compile the model for this device (kiln-compile --target vulkan on it, or a profile "
      "that matches it), or run it on a device like the one it was compiled for";
  uint32_t subgroup = code.subgroupSize;
  if (subgroup && subgroup != adapter.subgroupSize && !pinsSubgroupSize(subgroup, adapter)) {
    std::string has = std::to_string(adapter.subgroupSize);
    if (adapter.minSubgroupSize && adapter.minSubgroupSize != adapter.maxSubgroupSize)
      has = std::to_string(adapter.minSubgroupSize) + " to " +
            std::to_string(adapter.maxSubgroupSize);
    return refuse("subgroup size", std::to_string(subgroup), "subgroup size " + has, recompile);
  }
  uint64_t invocations =
      uint64_t(code.workgroupSize[0]) * code.workgroupSize[1] * code.workgroupSize[2];
  if (adapter.maxWorkgroupInvocations && invocations > adapter.maxWorkgroupInvocations)
    return refuse("workgroups of", std::to_string(invocations) + " invocations",
                  "at most " + std::to_string(adapter.maxWorkgroupInvocations), recompile);
  for (int d = 0; d < 3; ++d)
    if (adapter.maxWorkgroupSize[d] && code.workgroupSize[d] > adapter.maxWorkgroupSize[d])
      return refuse("a workgroup size of", std::to_string(code.workgroupSize[d]) + " in dimension " +
                                                std::to_string(d),
                    "at most " + std::to_string(adapter.maxWorkgroupSize[d]), recompile);
  if (pinsSubgroupSize(subgroup, adapter) && adapter.maxComputeWorkgroupSubgroups &&
      invocations > uint64_t(adapter.maxComputeWorkgroupSubgroups) * subgroup)
    return refuse("workgroups of", std::to_string(invocations) + " invocations",
                  "at most " + std::to_string(adapter.maxComputeWorkgroupSubgroups) +
                      " subgroups of " + std::to_string(subgroup) + " per workgroup",
                  recompile);
  if (adapter.maxSharedMemoryBytes && code.sharedBytes > adapter.maxSharedMemoryBytes)
    return refuse("workgroup memory of", std::to_string(code.sharedBytes) + " bytes",
                  std::to_string(adapter.maxSharedMemoryBytes), recompile);
  StatusOr<SpirvInterface> interface = readSpirvInterface(code.words);
  if (!interface.isOk())
    return interface.status();
  const std::string f16 = "run the model on a device with f16, or compile it in f32";
  if (interface->usesFloat16 && !adapter.shaderFloat16)
    return refuse("16-bit float arithmetic", "(shaderFloat16)", "none", f16);
  if (interface->uses16BitStorage && !adapter.storageBuffer16BitAccess)
    return refuse("16-bit values in buffers", "(storageBuffer16BitAccess)", "none", f16);
  if (interface->usesCooperativeMatrix && !adapter.cooperativeMatrixF16)
    return refuse("cooperative matrices", "(VK_KHR_cooperative_matrix, 16x16x16 f16)", "none",
                  recompile);
  if (interface->usesInt64 && !adapter.shaderInt64)
    return refuse("64-bit integers", "(shaderInt64)", "none", recompile);
  return Status::ok();
}

} // namespace kiln::rt
