//===- VulkanPtx.cpp - a Vulkan device's PTX kernels, through CUDA --------===//
//
// prepare() and dispatch() for kernels a Vulkan device launches through
// CUDA (CudaInterop.h): the Executable holds the loaded function; a
// dispatch first finishes the Vulkan work recorded before it.
//
//===----------------------------------------------------------------------===//

#include "DeviceState.h"

#include "kiln/runtime/Program.h"

using namespace kiln::rt;

namespace {
class PtxExecutable final : public Executable {
public:
  PtxExecutable(Device &device, cuda::Function function, std::shared_ptr<const PtxCode> code)
      : Executable(device), function(function), code(std::move(code)) {}
  cuda::Function function;
  std::shared_ptr<const PtxCode> code;
};
} // namespace

bool VulkanDevice::launchesPtx(const ProgramKernel &kernel) const {
  const State &s = *state_;
  if (!kernel.ptx || !s.cuda)
    return false;
  // sm_90a code runs on compute capability 9.0 exactly.
  CudaCapability capability = cudaCapability(s.adapter);
  return kernel.ptx->arch == capability.arch && kernel.ptx->sharedBytes <= capability.sharedBytes;
}

StatusOr<std::shared_ptr<Executable>> kiln::rt::preparePtx(VulkanDevice &device,
                                                           VulkanDevice::State &s,
                                                           const ProgramKernel &kernel) {
  std::lock_guard<std::mutex> lock(s.mutex);
  StatusOr<cuda::Function> function = s.cuda->function(*kernel.ptx);
  if (!function.isOk())
    return Status(function.status().code(), kernel.name + ": " + function.status().message() +
                                                " (KILN_CUDA=0 runs its SPIR-V instead)");
  return std::shared_ptr<Executable>(
      std::make_shared<PtxExecutable>(device, *function, kernel.ptx));
}

std::optional<Status> kiln::rt::dispatchPtx(VulkanDevice &device, VulkanDevice::State &s,
                                            Executable &executable,
                                            const std::vector<Buffer *> &arguments) {
  auto *exe = dynamic_cast<PtxExecutable *>(&executable);
  if (!exe)
    return std::nullopt;
  std::vector<VulkanBuffer *> buffers;
  const PtxCode &code = *exe->code;
  if (code.minBytes.size() != code.bindingOrder.size())
    return Status::invalidArgument("dispatch on " + s.name + " of PTX without its buffers' sizes");
  for (size_t i = 0; i < code.bindingOrder.size(); ++i) {
    uint32_t arg = code.bindingOrder[i];
    if (arg >= arguments.size())
      return Status::invalidArgument("dispatch on " + s.name + ": the kernel reads argument " +
                                     std::to_string(arg) + " of " +
                                     std::to_string(arguments.size()));
    if (&arguments[arg]->device() != &device)
      return Status::invalidArgument("dispatch on " + s.name + " of a buffer of " +
                                     arguments[arg]->device().name());
    if (arguments[arg]->size() < code.minBytes[i])
      return Status::invalidArgument(
          "dispatch on " + s.name + ": kernel '" + code.entryPoint + "' reaches " +
          std::to_string(code.minBytes[i]) + " bytes of argument " + std::to_string(arg) +
          ", which holds " + std::to_string(arguments[arg]->size()) +
          " (a program and its inputs that do not match)");
    buffers.push_back(static_cast<VulkanBuffer *>(arguments[arg]));
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  // What Vulkan work recorded before it wrote, the kernel reads (launches
  // before it are ordered by the stream).
  if (s.stream->hasWork())
    if (Status status = submitLocked(s); !status.isOk())
      return status;
  if (Status status = s.cuda->launch(*exe->code, exe->function, buffers); !status.isOk())
    return Status(status.code(), status.message() + " (KILN_CUDA=0 runs its SPIR-V instead)");
  ++s.counters.dispatches;
  return Status::ok();
}
