//===- Program.cpp - the buffer plan and the interpreter of a Program -----===//

#include "kiln/runtime/Program.h"
#include "kiln/runtime/Vulkan.h"


#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>
#include <cstring>
#include <sstream>

using namespace kiln::rt;

size_t kiln::rt::elementBytes(ElementType type) {
  switch (type) {
  case ElementType::f32:
  case ElementType::i32: return 4;
  case ElementType::f16:
  case ElementType::bf16: return 2;
  case ElementType::i1: return 1;
  }
  return 4;
}

const char *kiln::rt::elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::f32: return "f32";
  case ElementType::f16: return "f16";
  case ElementType::i32: return "i32";
  case ElementType::i1: return "bool";
  case ElementType::bf16: return "bf16";
  }
  return "?";
}

uint64_t TensorType::bytes() const {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n * elementBytes(element);
}

std::string TensorType::str() const {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "] " + elementTypeName(element);
}

void Program::planBuffers() {
  slots.clear();
  peakBytes = unplannedBytes = 0;
  // The last step reading each value; outputs live to the end.
  std::vector<size_t> lastUse(values.size(), 0);
  std::vector<bool> planned(values.size(), false);
  for (size_t s = 0; s < steps.size(); ++s)
    for (uint32_t v : steps[s].operands)
      lastUse[v] = s;
  for (uint32_t v : outputs)
    lastUse[v] = steps.size();
  // A transfer to the device a value is already on binds the same buffer:
  // its source lives as long as its result.
  for (size_t s = steps.size(); s-- > 0;)
    if (steps[s].kind == ProgramStep::Kind::transfer)
      lastUse[steps[s].operands[0]] =
          std::max(lastUse[steps[s].operands[0]], lastUse[steps[s].results[0]]);
  // Constants and kernel results; inputs and transfers bind buffers made
  // elsewhere (the caller's, or a copy on the target device).
  for (size_t s = 0; s < steps.size(); ++s)
    if (steps[s].kind == ProgramStep::Kind::constant ||
        steps[s].kind == ProgramStep::Kind::dispatch)
      for (uint32_t v : steps[s].results)
        planned[v] = true;
  for (uint32_t v : outputs)
    planned[v] = false;
  for (ProgramValue &value : values)
    value.slot = ProgramValue::kNoSlot;

  std::vector<uint32_t> freeSlots;
  uint64_t live = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    // Results first (a step's results must not share a slot with its own
    // operands), then the operands whose last use this was become free.
    for (uint32_t v : steps[s].results) {
      if (!planned[v])
        continue;
      ProgramValue &value = values[v];
      uint64_t bytes = value.type.bytes();
      unplannedBytes += bytes;
      // Best fit among free slots of the value's device: the smallest that
      // holds it, else the largest (grown).
      auto best = freeSlots.end();
      for (auto it = freeSlots.begin(); it != freeSlots.end(); ++it) {
        const ProgramSlot &slot = slots[*it];
        if (slot.device != value.device)
          continue;
        if (best == freeSlots.end()) {
          best = it;
          continue;
        }
        const ProgramSlot &chosen = slots[*best];
        bool fits = slot.bytes >= bytes, chosenFits = chosen.bytes >= bytes;
        if ((fits && (!chosenFits || slot.bytes < chosen.bytes)) ||
            (!fits && !chosenFits && slot.bytes > chosen.bytes))
          best = it;
      }
      if (best == freeSlots.end()) {
        value.slot = static_cast<uint32_t>(slots.size());
        slots.push_back({value.device, bytes});
      } else {
        value.slot = *best;
        freeSlots.erase(best);
        slots[value.slot].bytes = std::max(slots[value.slot].bytes, bytes);
      }
      live += bytes;
      peakBytes = std::max(peakBytes, live);
      // A result nobody reads is free after its own step.
      if (lastUse[v] < s || lastUse[v] == 0)
        lastUse[v] = s;
    }
    for (const std::vector<uint32_t> *list : {&steps[s].operands, &steps[s].results})
      for (uint32_t v : *list)
        if (planned[v] && lastUse[v] == s && values[v].slot != ProgramValue::kNoSlot &&
            std::find(freeSlots.begin(), freeSlots.end(), values[v].slot) == freeSlots.end()) {
          freeSlots.push_back(values[v].slot);
          live -= values[v].type.bytes();
        }
  }
}

std::string Program::describe() const {
  std::ostringstream os;
  auto list = [](const std::vector<uint32_t> &ids) {
    std::string text;
    for (size_t i = 0; i < ids.size(); ++i)
      text += (i ? ", " : "") + std::string("%") + std::to_string(ids[i]);
    return text;
  };
  for (const ProgramStep &step : steps) {
    os << list(step.results) << " = ";
    switch (step.kind) {
    case ProgramStep::Kind::input: os << "input " << step.index; break;
    case ProgramStep::Kind::constant: os << "constant " << step.index; break;
    case ProgramStep::Kind::transfer: os << "transfer " << list(step.operands); break;
    case ProgramStep::Kind::dispatch:
      os << "dispatch " << kernels[step.index].name << " (" << list(step.operands) << ")";
      break;
    }
    os << " on " << devices[step.device] << "\n";
  }
  for (size_t v = 0; v < values.size(); ++v) {
    os << "%" << v << ": " << values[v].type.str();
    if (values[v].slot != ProgramValue::kNoSlot)
      os << " in slot " << values[v].slot;
    os << "\n";
  }
  os << "outputs: " << list(outputs) << "\n";
  os << slots.size() << " slots, peak " << peakBytes << " bytes of " << unplannedBytes
     << " without reuse\n";
  if (cpuLibrary) {
    const CpuLibrary::Description &d = cpuLibrary->description();
    os << "cpu code: " << d.isa << ", " << d.bytes.size() << " bytes, needs";
    for (const std::string &f : d.features)
      os << " " << f;
    os << (cpuLibrary->loaded() ? "" : " (not loaded: this CPU lacks some)") << "\n";
  }
  // What each GPU kernel assumes of the device that runs it.
  for (const ProgramKernel &kernel : kernels)
    if (kernel.spirv) {
      const SpirvCode &code = *kernel.spirv;
      os << kernel.name << " assumes: workgroup " << code.workgroupSize[0] << "x"
         << code.workgroupSize[1] << "x" << code.workgroupSize[2] << ", " << code.sharedBytes
         << " bytes shared, " << code.bindingOrder.size() << " buffers, subgroup size "
         << (code.subgroupSize ? std::to_string(code.subgroupSize) : "any") << "\n";
    }
  return os.str();
}

namespace {
class Runner {
public:
  Runner(const Program &program, const std::vector<Device *> &devices,
         const std::vector<ProgramInput> &inputs, const RunOptions &options)
      : program(program), devices(devices), inputs(inputs), options(options),
        buffers(program.values.size()), slotBuffers(program.slots.size()) {
    result.uploaded.resize(inputs.size());
  }

  StatusOr<RunResult> run();
  /// The checks run() starts with.
  Status check() const;
  /// Steps [begin, end) in order.
  Status runSteps(size_t begin, size_t end);
  /// Collects the outputs once every step ran; waits for them.
  StatusOr<RunResult> finish();

private:
  StatusOr<std::shared_ptr<Buffer>> allocate(Device &device, size_t bytes, const char *what) {
    if (options.allocate)
      return options.allocate(device, bytes, what);
    StatusOr<std::shared_ptr<Buffer>> buffer = device.allocate(bytes);
    if (!buffer.isOk())
      return Status(buffer.status().code(), std::string(what) + ": " + buffer.status().message());
    return buffer;
  }
  /// The buffer value `v` is computed into: its slot's, else a new one.
  StatusOr<std::shared_ptr<Buffer>> resultBuffer(uint32_t v, const char *what);
  StatusOr<std::shared_ptr<Buffer>> moveTo(const std::shared_ptr<Buffer> &buffer,
                                           Device &target, uint64_t bytes);
  Status runInput(const ProgramStep &step);
  Status runConstant(const ProgramStep &step);
  Status runDispatch(const ProgramStep &step);

  const Program &program;
  const std::vector<Device *> &devices;
  const std::vector<ProgramInput> &inputs;
  const RunOptions &options;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::vector<std::shared_ptr<Buffer>> slotBuffers;
  RunResult result;
};

StatusOr<std::shared_ptr<Buffer>> Runner::resultBuffer(uint32_t v, const char *what) {
  const ProgramValue &value = program.values[v];
  Device &device = *devices[value.device];
  if (value.slot == ProgramValue::kNoSlot)
    return allocate(device, value.type.bytes(), what);
  std::shared_ptr<Buffer> &slot = slotBuffers[value.slot];
  if (!slot) {
    StatusOr<std::shared_ptr<Buffer>> made =
        allocate(device, program.slots[value.slot].bytes, what);
    if (!made.isOk())
      return made.status();
    slot = *made;
  }
  return slot;
}

StatusOr<std::shared_ptr<Buffer>> Runner::moveTo(const std::shared_ptr<Buffer> &buffer,
                                                 Device &target, uint64_t bytes) {
  if (&buffer->device() == &target)
    return buffer;
  ++result.counters.transfers;
  result.counters.bytesMoved += bytes;
  StatusOr<std::shared_ptr<Buffer>> moved = allocate(target, bytes, "moving a tensor");
  if (!moved.isOk())
    return moved;
  // CPU buffers are host memory: one copy to or from them.
  if (void *source = CpuDevice::data(*buffer)) {
    if (Status s = buffer->device().flush(); !s.isOk())
      return s;
    if (Status s = target.upload(**moved, source, bytes); !s.isOk())
      return s;
    return moved;
  }
  if (void *destination = CpuDevice::data(**moved)) {
    if (Status s = buffer->device().download(*buffer, destination, bytes); !s.isOk())
      return s;
    return moved;
  }
  // Between Vulkan devices: through host memory both import, in overlapped
  // chunks, where the drivers allow it (PeerTransfer.cpp).
  VulkanDevice *from = buffer->device().replayDevice();
  if (VulkanDevice *to = target.replayDevice(); from && to) {
    if (Status s = from->copyToDevice(*buffer, *to, **moved, bytes); !s.isOk())
      return s;
    return moved;
  }
  std::vector<uint8_t> host(bytes);
  if (Status s = buffer->device().download(*buffer, host.data(), bytes); !s.isOk())
    return s;
  if (Status s = target.upload(**moved, host.data(), bytes); !s.isOk())
    return s;
  return moved;
}

Status Runner::runInput(const ProgramStep &step) {
  uint32_t v = step.results[0];
  Device &target = *devices[step.device];
  const ProgramInput &input = inputs[step.index];
  uint64_t bytes = program.values[v].type.bytes();
  if (input.buffer) {
    for (const std::shared_ptr<Buffer> &copy : input.elsewhere)
      if (&copy->device() == &target) {
        buffers[v] = copy;
        return Status::ok();
      }
    StatusOr<std::shared_ptr<Buffer>> moved = moveTo(input.buffer, target, bytes);
    if (!moved.isOk())
      return moved.status();
    buffers[v] = *moved;
    return Status::ok();
  }
  // An empty tensor's host data may be null (an empty vector's data()).
  if (!input.host && bytes > 0)
    return Status::invalidArgument("input " + std::to_string(step.index) +
                                   " has neither a buffer nor host data");
  // Host data used on several devices is uploaded to each once.
  std::shared_ptr<Buffer> &first = result.uploaded[step.index];
  if (first && &first->device() == &target) {
    buffers[v] = first;
    return Status::ok();
  }
  StatusOr<std::shared_ptr<Buffer>> buffer = allocate(target, bytes, "uploading an input");
  if (!buffer.isOk())
    return buffer.status();
  if (bytes > 0)
    if (Status s = target.upload(**buffer, input.host, bytes); !s.isOk())
      return s;
  result.counters.bytesUploaded += bytes;
  if (!first)
    first = *buffer;
  buffers[v] = *buffer;
  return Status::ok();
}

Status Runner::runConstant(const ProgramStep &step) {
  uint32_t v = step.results[0];
  const std::vector<uint8_t> &one =
      options.constants ? (*options.constants)[step.index] : program.constants[step.index];
  uint64_t bytes = program.values[v].type.bytes();
  StatusOr<std::shared_ptr<Buffer>> buffer = resultBuffer(v, "materializing a constant");
  if (!buffer.isOk())
    return buffer.status();
  buffers[v] = *buffer;
  auto fill = [&](uint8_t *out) {
    if (one.size() == 1 || std::all_of(one.begin(), one.end(), [](uint8_t b) { return b == 0; })) {
      std::memset(out, one.empty() ? 0 : one[0], bytes);
      return;
    }
    for (uint64_t at = 0; at + one.size() <= bytes; at += one.size())
      std::memcpy(out + at, one.data(), one.size());
  };
  if (void *data = CpuDevice::data(**buffer)) {
    fill(static_cast<uint8_t *>(data));
  } else {
    std::vector<uint8_t> host(bytes);
    fill(host.data());
    if (Status s = devices[step.device]->upload(**buffer, host.data(), bytes); !s.isOk())
      return s;
  }
  result.counters.bytesUploaded += bytes;
  return Status::ok();
}

Status Runner::runDispatch(const ProgramStep &step) {
  const ProgramKernel &kernel = program.kernels[step.index];
  Device &device = *devices[step.device];
  std::vector<Buffer *> bindings;
  for (uint32_t v : step.operands)
    bindings.push_back(buffers[v].get());
  for (uint32_t v : step.results) {
    StatusOr<std::shared_ptr<Buffer>> buffer = resultBuffer(v, "allocating a kernel result");
    if (!buffer.isOk())
      return buffer.status();
    if (options.poisonResults) {
      std::vector<uint8_t> poison(program.values[v].type.bytes(), 0xFF);
      if (Status s = device.upload(**buffer, poison.data(), poison.size()); !s.isOk())
        return s;
    }
    buffers[v] = *buffer;
    bindings.push_back(buffers[v].get());
  }
  if (kernel.elements == 0)
    return Status::ok();
  ++result.counters.dispatches;
  StatusOr<std::shared_ptr<Executable>> executable = device.prepare(kernel);
  if (!executable.isOk())
    return executable.status();
  if (!options.dispatchNanoseconds)
    return device.dispatch(**executable, bindings);
  // Timed alone: earlier work finishes first, this one before the clock stops.
  if (Status s = device.flush(); !s.isOk())
    return s;
  auto start = std::chrono::steady_clock::now();
  if (Status s = device.dispatch(**executable, bindings); !s.isOk())
    return s;
  if (Status s = device.flush(); !s.isOk())
    return s;
  options.dispatchNanoseconds->push_back(
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count());
  return Status::ok();
}

Status Runner::check() const {
  if (inputs.size() != program.inputs.size())
    return Status::invalidArgument("the program takes " + std::to_string(program.inputs.size()) +
                                   " inputs, got " + std::to_string(inputs.size()));
  if (options.constants && options.constants->size() != program.constants.size())
    return Status::invalidArgument("the program has " +
                                   std::to_string(program.constants.size()) +
                                   " constants, the run gives " +
                                   std::to_string(options.constants->size()));
  if (devices.size() != program.devices.size())
    return Status::invalidArgument("the program runs on " +
                                   std::to_string(program.devices.size()) + " devices, got " +
                                   std::to_string(devices.size()));
  return Status::ok();
}

Status Runner::runSteps(size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const ProgramStep &step = program.steps[i];
    Status status = Status::ok();
    switch (step.kind) {
    case ProgramStep::Kind::input: status = runInput(step); break;
    case ProgramStep::Kind::constant: status = runConstant(step); break;
    case ProgramStep::Kind::transfer: {
      StatusOr<std::shared_ptr<Buffer>> moved =
          moveTo(buffers[step.operands[0]], *devices[step.device],
                 program.values[step.results[0]].type.bytes());
      if (moved.isOk())
        buffers[step.results[0]] = *moved;
      else
        status = moved.status();
      break;
    }
    case ProgramStep::Kind::dispatch: status = runDispatch(step); break;
    }
    if (!status.isOk())
      return status;
  }
  return Status::ok();
}

StatusOr<RunResult> Runner::finish() {
  for (uint32_t v : program.outputs)
    result.outputs.push_back(buffers[v]);
  // Synchronous: when run returns the outputs are computed.
  for (const std::shared_ptr<Buffer> &output : result.outputs)
    if (Status s = output->device().flush(); !s.isOk())
      return s;
  return std::move(result);
}

StatusOr<RunResult> Runner::run() {
  if (Status s = check(); !s.isOk())
    return s;
  if (Status s = runSteps(0, program.steps.size()); !s.isOk())
    return s;
  return finish();
}
} // namespace

StatusOr<RunResult> kiln::rt::run(const Program &program, const std::vector<Device *> &devices,
                                  const std::vector<ProgramInput> &inputs,
                                  const RunOptions &options) {
  return Runner(program, devices, inputs, options).run();
}

std::vector<ProgramStage> kiln::rt::programStages(const Program &program) {
  std::vector<ProgramStage> stages;
  for (size_t i = 0; i < program.steps.size(); ++i) {
    uint32_t device = program.steps[i].device;
    if (stages.empty() || stages.back().device != device)
      stages.push_back({device, i, i});
    stages.back().end = i + 1;
  }
  return stages;
}

StatusOr<std::vector<RunResult>>
kiln::rt::runPipelined(const Program &program, const std::vector<Device *> &devices,
                       const std::vector<std::vector<ProgramInput>> &batches,
                       const RunOptions &options) {
  if (options.dispatchNanoseconds)
    return Status::invalidArgument("a pipelined run cannot time its dispatches one by one");
  std::vector<std::unique_ptr<Runner>> runners;
  for (const std::vector<ProgramInput> &inputs : batches) {
    runners.push_back(std::make_unique<Runner>(program, devices, inputs, options));
    if (Status s = runners.back()->check(); !s.isOk())
      return s;
  }
  std::vector<ProgramStage> stages = programStages(program);
  // One worker per device the stages use (a device of two program indices
  // is still one device: its work stays in order on one thread).
  std::vector<Device *> workers;
  std::vector<size_t> workerOf(stages.size());
  for (size_t s = 0; s < stages.size(); ++s) {
    Device *d = devices[stages[s].device];
    auto it = std::find(workers.begin(), workers.end(), d);
    workerOf[s] = size_t(it - workers.begin());
    if (it == workers.end())
      workers.push_back(d);
  }
  // done[b] counts the stages of batch b finished; a stage waits for the
  // one before it in its batch. Each worker takes its stages batch by batch,
  // so a device works on batch b + 1 while the next device works on b.
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<size_t> done(batches.size(), 0);
  Status failure = Status::ok();
  auto work = [&](size_t worker) {
    for (size_t b = 0; b < batches.size(); ++b)
      for (size_t s = 0; s < stages.size(); ++s) {
        if (workerOf[s] != worker)
          continue;
        {
          std::unique_lock<std::mutex> lock(mutex);
          changed.wait(lock, [&] { return !failure.isOk() || done[b] == s; });
          if (!failure.isOk())
            return;
        }
        Status status = runners[b]->runSteps(stages[s].begin, stages[s].end);
        // Submitted now, so the device works while this thread records the
        // next batch's stage.
        if (status.isOk())
          status = workers[worker]->flush();
        std::lock_guard<std::mutex> lock(mutex);
        if (!status.isOk() && failure.isOk())
          failure = status;
        ++done[b];
        changed.notify_all();
      }
  };
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers.size(); ++w)
    threads.emplace_back(work, w);
  if (!workers.empty())
    work(0);
  for (std::thread &t : threads)
    t.join();
  if (!failure.isOk())
    return failure;
  std::vector<RunResult> results;
  for (std::unique_ptr<Runner> &runner : runners) {
    StatusOr<RunResult> result = runner->finish();
    if (!result.isOk())
      return result.status();
    results.push_back(std::move(*result));
  }
  return results;
}
