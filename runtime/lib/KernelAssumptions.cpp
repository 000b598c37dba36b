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

uint32_t pinnedSubgroupSize(uint32_t subgroupSize, uint64_t invocations, bool mayVary,
                            const AdapterInfo &adapter) {
  bool askable = subgroupSize && adapter.minSubgroupSize &&
                 adapter.minSubgroupSize <= subgroupSize &&
                 subgroupSize <= adapter.maxSubgroupSize &&
                 (!adapter.maxComputeWorkgroupSubgroups ||
                  invocations <= uint64_t(adapter.maxComputeWorkgroupSubgroups) * subgroupSize);
  if (!askable)
    return 0;
  // A SPIR-V 1.3 module sees the reported size without asking; a 1.6 one
  // (cooperative matrices) may get any, so it asks for its own too.
  return subgroupSize != adapter.subgroupSize || mayVary ? subgroupSize : 0;
}

/// Whether a module's SPIR-V version lets the driver vary its subgroup
/// size (1.6 and later).
static bool subgroupSizeMayVary(const std::vector<uint32_t> &words) {
  return words.size() > 1 && ((words[1] >> 16) & 0xff) == 1 && ((words[1] >> 8) & 0xff) >= 6;
}

uint32_t pinnedSubgroupSize(const SpirvCode &code, const AdapterInfo &adapter) {
  uint64_t invocations =
      uint64_t(code.workgroupSize[0]) * code.workgroupSize[1] * code.workgroupSize[2];
  return pinnedSubgroupSize(code.subgroupSize, invocations, subgroupSizeMayVary(code.words),
                            adapter);
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
  uint32_t pinned = pinnedSubgroupSize(code, adapter);
  if (subgroup && subgroup != adapter.subgroupSize && !pinned) {
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
  if (adapter.maxStorageBuffersPerStage &&
      code.bindingOrder.size() > adapter.maxStorageBuffersPerStage)
    return refuse("", std::to_string(code.bindingOrder.size()) + " storage buffers",
                  "at most " + std::to_string(adapter.maxStorageBuffersPerStage) + " per kernel",
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
  if (interface->usesInt16 && !adapter.shaderInt16)
    return refuse("16-bit integers", "(shaderInt16)", "none", recompile);
  if (interface->usesInt8 && !adapter.shaderInt8)
    return refuse("8-bit integers", "(shaderInt8)", "none", recompile);
  if (interface->uses8BitStorage && !adapter.storageBuffer8BitAccess)
    return refuse("8-bit values in buffers", "(storageBuffer8BitAccess)", "none", recompile);
  return Status::ok();
}

} // namespace kiln::rt
