//===- ProgramReplay.cpp - a Program recorded once, replayed per run ------===//

#include "kiln/runtime/Program.h"

#include "kiln/runtime/Vulkan.h"

#include <cstring>

using namespace kiln::rt;

ProgramReplay::~ProgramReplay() = default;

StatusOr<std::unique_ptr<ProgramReplay>>
ProgramReplay::create(const Program &program, VulkanDevice &device,
                      const std::vector<std::shared_ptr<Buffer>> &fixed,
                      const RunOptions &options, bool timed) {
  for (const ProgramKernel &kernel : program.kernels)
    if (kernel.elements > 0 && (!kernel.spirv || device.launchesPtx(kernel)))
      return std::unique_ptr<ProgramReplay>();
  for (const ProgramStep &step : program.steps)
    if (step.kind == ProgramStep::Kind::transfer &&
        program.values[step.operands[0]].device != program.values[step.results[0]].device)
      return std::unique_ptr<ProgramReplay>();
  if (fixed.size() != program.inputs.size())
    return Status::invalidArgument("a replay needs one entry per program input");
  if (options.constants && options.constants->size() != program.constants.size())
    return Status::invalidArgument("a replay's constants must replace every program constant");

  std::unique_ptr<ProgramReplay> replay(new ProgramReplay(program, device));
  auto allocate = [&](size_t bytes, const char *what) -> StatusOr<std::shared_ptr<Buffer>> {
    StatusOr<std::shared_ptr<Buffer>> buffer =
        options.allocate ? options.allocate(device, bytes, what) : device.allocate(bytes);
    if (buffer.isOk())
      replay->owned_.push_back(*buffer);
    return buffer;
  };
  replay->values_.resize(program.values.size());
  replay->inputs_.resize(program.inputs.size());
  replay->fixed_.assign(program.inputs.size(), false);
  std::vector<std::shared_ptr<Buffer>> slots(program.slots.size());
  std::vector<RecordedDispatch> dispatches;
  for (const ProgramStep &step : program.steps) {
    switch (step.kind) {
    case ProgramStep::Kind::input: {
      std::shared_ptr<Buffer> &into = replay->inputs_[step.index];
      if (fixed[step.index] && &fixed[step.index]->device() == &device) {
        into = fixed[step.index];
        replay->fixed_[step.index] = true;
      } else if (!into) {
        StatusOr<std::shared_ptr<Buffer>> made =
            allocate(program.inputs[step.index].bytes(), "a replay's input");
        if (!made.isOk())
          return made.status();
        into = *made;
      }
      replay->values_[step.results[0]] = into;
      break;
    }
    case ProgramStep::Kind::constant: {
      // Its own buffer, filled once: a slot would be overwritten by the
      // values sharing it.
      const TensorType &type = program.values[step.results[0]].type;
      StatusOr<std::shared_ptr<Buffer>> made = allocate(type.bytes(), "a replay's constant");
      if (!made.isOk())
        return made.status();
      const std::vector<uint8_t> &one = options.constants ? (*options.constants)[step.index]
                                                          : program.constants[step.index];
      std::vector<uint8_t> bytes(type.bytes());
      for (size_t at = 0; !one.empty() && at + one.size() <= bytes.size(); at += one.size())
        std::memcpy(bytes.data() + at, one.data(), one.size());
      if (Status s = device.upload(**made, bytes.data(), bytes.size()); !s.isOk())
        return s;
      replay->values_[step.results[0]] = *made;
      break;
    }
    case ProgramStep::Kind::transfer:
      replay->values_[step.results[0]] = replay->values_[step.operands[0]];
      break;
    case ProgramStep::Kind::dispatch: {
      for (uint32_t v : step.results) {
        const ProgramValue &value = program.values[v];
        std::shared_ptr<Buffer> *slot =
            value.slot == ProgramValue::kNoSlot ? nullptr : &slots[value.slot];
        if (slot && *slot) {
          replay->values_[v] = *slot;
          continue;
        }
        StatusOr<std::shared_ptr<Buffer>> made =
            allocate(slot ? program.slots[value.slot].bytes : value.type.bytes(),
                     "a replay's intermediate");
        if (!made.isOk())
          return made.status();
        replay->values_[v] = *made;
        if (slot)
          *slot = *made;
      }
      const ProgramKernel &kernel = program.kernels[step.index];
      if (kernel.elements == 0)
        break;
      const SpirvCode &code = *kernel.spirv;
      StatusOr<Pipeline *> pipeline = device.pipeline(code);
      if (!pipeline.isOk())
        return pipeline.status();
      std::vector<Buffer *> args;
      for (const std::vector<uint32_t> *list : {&step.operands, &step.results})
        for (uint32_t v : *list)
          args.push_back(replay->values_[v].get());
      RecordedDispatch dispatch;
      dispatch.pipeline = *pipeline;
      for (uint32_t arg : code.bindingOrder)
        dispatch.bindings.push_back(args[arg]);
      std::copy(code.groups.begin(), code.groups.end(), dispatch.groups);
      dispatches.push_back(std::move(dispatch));
      replay->dispatchKernels_.push_back(step.index);
      break;
    }
    }
  }
  // The constants' uploads finish before anything is recorded over them.
  if (Status s = device.flush(); !s.isOk())
    return s;
  StatusOr<std::shared_ptr<Recording>> recording = device.record(dispatches, timed);
  if (!recording.isOk())
    return recording.status();
  replay->recording_ = *recording;
  replay->dispatches_ = dispatches.size();
  replay->timed_ = timed;
  return replay;
}

StatusOr<RunResult> ProgramReplay::run(const std::vector<ProgramInput> &inputs,
                                       const RunOptions &options) {
  if (options.poisonResults || options.constants)
    return Status::invalidArgument("a replayed program takes neither poisoned results nor "
                                   "other constants: run it with rt::run");
  if (inputs.size() != program_.inputs.size())
    return Status::invalidArgument("the program takes " + std::to_string(program_.inputs.size()) +
                                   " inputs, got " + std::to_string(inputs.size()));
  std::lock_guard<std::mutex> lock(mutex_);
  RunResult result;
  result.uploaded.resize(inputs.size());
  // Inputs into place: recorded on the device, submitted with the replay.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (fixed_[i] || !inputs_[i])
      continue;
    Buffer &into = *inputs_[i];
    const ProgramInput &input = inputs[i];
    uint64_t bytes = program_.inputs[i].bytes();
    if (bytes == 0)
      continue;
    Status status = Status::ok();
    if (!input.buffer) {
      if (!input.host)
        return Status::invalidArgument("input " + std::to_string(i) +
                                       " has neither a buffer nor host data");
      status = device_.upload(into, input.host, bytes);
      result.counters.bytesUploaded += bytes;
    } else if (&input.buffer->device() == &device_) {
      status = device_.copy(*input.buffer, into, bytes);
    } else if (void *host = CpuDevice::data(*input.buffer)) {
      status = device_.upload(into, host, bytes);
      result.counters.bytesUploaded += bytes;
    } else {
      std::vector<uint8_t> staged(bytes);
      status = input.buffer->device().download(*input.buffer, staged.data(), bytes);
      if (status.isOk())
        status = device_.upload(into, staged.data(), bytes);
      result.counters.transfers += 1;
      result.counters.bytesMoved += bytes;
    }
    if (!status.isOk())
      return status;
  }
  // Outputs are copied into buffers the caller owns, in the same submit.
  std::vector<BufferCopy> copies;
  for (uint32_t v : program_.outputs) {
    uint64_t bytes = program_.values[v].type.bytes();
    StatusOr<std::shared_ptr<Buffer>> out =
        options.allocate ? options.allocate(device_, bytes, "allocating a program output")
                         : device_.allocate(bytes);
    if (!out.isOk())
      return out.status();
    result.outputs.push_back(*out);
    copies.push_back({values_[v].get(), out->get(), bytes});
  }
  if (Status s = device_.replay(*recording_, copies, timed_ ? &nanoseconds_ : nullptr); !s.isOk())
    return s;
  result.counters.dispatches = dispatches_;
  return result;
}

std::vector<std::pair<uint32_t, double>> ProgramReplay::kernelNanoseconds() const {
  std::vector<std::pair<uint32_t, double>> out;
  for (size_t d = 0; d < nanoseconds_.size() && d < dispatchKernels_.size(); ++d)
    out.push_back({dispatchKernels_[d], nanoseconds_[d]});
  return out;
}
