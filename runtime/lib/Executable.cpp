//===- Executable.cpp - prepare() and dispatch() of each backend ----------===//
//
// A Program's kernel carries code per kind of device; each backend prepares
// the code it runs and dispatches it over the step's arguments in program
// order (operands, then results).
//
//===----------------------------------------------------------------------===//

#include "DeviceState.h"
#include "VulkanUtil.h"

#include "kiln/runtime/Program.h"
#include "kiln/runtime/ThreadPool.h"
#include "kiln/runtime/Vulkan.h"

#include <algorithm>

using namespace kiln::rt;

Executable::~Executable() = default;

namespace {
class VulkanExecutable final : public Executable {
public:
  VulkanExecutable(Device &device, Pipeline *pipeline, std::shared_ptr<const SpirvCode> code)
      : Executable(device), pipeline(pipeline), code(std::move(code)) {}
  Pipeline *pipeline;
  std::shared_ptr<const SpirvCode> code; // binding order and grid
};

class CpuExecutable final : public Executable {
public:
  CpuExecutable(Device &device, std::shared_ptr<const CpuCode> code)
      : Executable(device), code(std::move(code)) {}
  std::shared_ptr<const CpuCode> code; // keeps its JIT engine or library alive
};

Status noCode(const ProgramKernel &kernel, const Device &device) {
  return Status::notFound(kernel.name + " has no code for " + device.name() + " (" +
                          device.api() + ")");
}
} // namespace

StatusOr<Pipeline *> VulkanDevice::pipeline(const SpirvCode &code) {
  KernelBinary binary;
  binary.hash = code.hash;
  binary.spirv = &code.words;
  binary.entryPoint = code.entryPoint;
  binary.numBindings = static_cast<uint32_t>(code.bindingOrder.size());
  binary.subgroupSize = code.subgroupSize;
  binary.code = &code;
  return pipeline(binary);
}

Status VulkanDevice::checkKernel(const ProgramKernel &kernel) {
  if (!kernel.spirv || launchesPtx(kernel))
    return Status::ok();
  return checkAssumptions(*kernel.spirv, state_->adapter, kernel.name);
}

StatusOr<std::shared_ptr<Executable>> VulkanDevice::prepare(const ProgramKernel &kernel) {
  if (launchesPtx(kernel))
    return preparePtx(*this, *state_, kernel);
  if (!kernel.spirv)
    return noCode(kernel, *this);
  StatusOr<Pipeline *> pipeline = this->pipeline(*kernel.spirv);
  if (!pipeline.isOk())
    return pipeline.status();
  return std::shared_ptr<Executable>(
      std::make_shared<VulkanExecutable>(*this, *pipeline, kernel.spirv));
}

Status VulkanDevice::dispatch(Executable &executable, const std::vector<Buffer *> &arguments) {
  if (&executable.device() == this)
    if (std::optional<Status> launched = dispatchPtx(*this, *state_, executable, arguments))
      return *launched;
  auto *exe = dynamic_cast<VulkanExecutable *>(&executable);
  if (!exe || &executable.device() != this)
    return Status::invalidArgument("dispatch on " + name() +
                                   " of an executable prepared for another device");
  std::vector<Buffer *> ordered;
  for (uint32_t arg : exe->code->bindingOrder) {
    if (arg >= arguments.size())
      return Status::invalidArgument("dispatch on " + name() + ": the kernel binds argument " +
                                     std::to_string(arg) + " of " +
                                     std::to_string(arguments.size()));
    ordered.push_back(arguments[arg]);
  }
  const auto &g = exe->code->groups;
  return dispatch(exe->pipeline, ordered, g[0], g[1], g[2]);
}

StatusOr<std::shared_ptr<Executable>> CpuDevice::prepare(const ProgramKernel &kernel) {
  if (!kernel.cpu)
    return noCode(kernel, *this);
  if (!kernel.cpu->fn)
    return Status::invalidArgument(kernel.name +
                                   ": its CPU code is not loaded here (it was compiled for an "
                                   "instruction set this CPU lacks)");
  return std::shared_ptr<Executable>(std::make_shared<CpuExecutable>(*this, kernel.cpu));
}

Status CpuDevice::dispatch(Executable &executable, const std::vector<Buffer *> &arguments) {
  auto *exe = dynamic_cast<CpuExecutable *>(&executable);
  if (!exe || &executable.device() != this)
    return Status::invalidArgument("dispatch on " + name() +
                                   " of an executable prepared for another device");
  const CpuCode &code = *exe->code;
  // Chunks of at least ~16K elements: below that, waking a thread costs
  // more than it saves. An outer iteration that is itself a loop (a row,
  // a panel of a matmul) needs no vector-aligned chunk boundaries.
  int64_t grain = std::max<int64_t>(1, 16384 / code.innerIterations);
  int64_t alignment = code.innerIterations > 1 ? 1 : ThreadPool::kChunkAlignment;
  return dispatch(code.fn, arguments, code.outerIterations, grain, alignment);
}
