// rt::Program without a compiler: a hand-built program on the CPU device,
// its buffer plan (intermediates share buffers by liveness), and the errors
// a malformed run gets.

#include "kiln/runtime/Program.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace kiln::rt;

namespace {
template <class T> T *binding(void **args, int index) { return *static_cast<T **>(args[index]); }

/// y[i] = x[i] * 2 (one operand, one result).
void twice(void **args) {
  const float *x = binding<const float>(args, 0);
  float *y = binding<float>(args, 1);
  int64_t begin = *static_cast<int64_t *>(args[2]), end = *static_cast<int64_t *>(args[3]);
  for (int64_t i = begin; i < end; ++i)
    y[i] = x[i] * 2.0f;
}

/// z[i] = x[i] + y[i].
void add(void **args) {
  const float *x = binding<const float>(args, 0), *y = binding<const float>(args, 1);
  float *z = binding<float>(args, 2);
  int64_t begin = *static_cast<int64_t *>(args[3]), end = *static_cast<int64_t *>(args[4]);
  for (int64_t i = begin; i < end; ++i)
    z[i] = x[i] + y[i];
}

ProgramKernel cpuKernel(const char *name, CpuKernelFn fn, int64_t elements) {
  ProgramKernel kernel;
  kernel.name = name;
  auto code = std::make_shared<CpuCode>();
  code->fn = fn;
  code->outerIterations = elements;
  kernel.cpu = code;
  kernel.elements = elements;
  return kernel;
}

uint32_t addValue(Program &p, int64_t n) {
  p.values.push_back({{{n}, ElementType::f32}, 0});
  return static_cast<uint32_t>(p.values.size() - 1);
}

void addStep(Program &p, ProgramStep::Kind kind, uint32_t index, std::vector<uint32_t> operands,
             std::vector<uint32_t> results) {
  ProgramStep step;
  step.kind = kind;
  step.index = index;
  step.operands = std::move(operands);
  step.results = std::move(results);
  p.steps.push_back(std::move(step));
}

/// x -> a = 2x -> b = 2a -> c = 2b -> out = c + 1 (constant): a chain whose
/// intermediates can share two buffers.
Program chain(int64_t n) {
  Program p;
  p.devices = {"cpu:0"};
  p.inputs = {{{n}, ElementType::f32}};
  p.kernels = {cpuKernel("twice", twice, n), cpuKernel("add", add, n)};
  float one = 1.0f;
  p.constants.emplace_back(4);
  std::memcpy(p.constants[0].data(), &one, 4);
  uint32_t x = addValue(p, n), a = addValue(p, n), b = addValue(p, n), c = addValue(p, n),
           k = addValue(p, n), out = addValue(p, n);
  addStep(p, ProgramStep::Kind::input, 0, {}, {x});
  addStep(p, ProgramStep::Kind::dispatch, 0, {x}, {a});
  addStep(p, ProgramStep::Kind::dispatch, 0, {a}, {b});
  addStep(p, ProgramStep::Kind::dispatch, 0, {b}, {c});
  addStep(p, ProgramStep::Kind::constant, 0, {}, {k});
  addStep(p, ProgramStep::Kind::dispatch, 1, {c, k}, {out});
  p.outputs = {out};
  p.planBuffers();
  return p;
}

TEST(Program, IntermediatesShareBuffersByLiveness) {
  Program p = chain(1000);
  // a, b, c, k are intermediates of 4000 bytes: a and c can share (a is dead
  // once b exists), b and k too: two slots, at most two alive at once.
  EXPECT_EQ(p.slots.size(), 2u) << p.describe();
  EXPECT_EQ(p.peakBytes, 8000u) << p.describe();
  EXPECT_EQ(p.unplannedBytes, 16000u);
  EXPECT_EQ(p.values[1].slot, p.values[3].slot) << p.describe();
  EXPECT_NE(p.values[1].slot, p.values[2].slot) << "an operand and its result never share";
  EXPECT_EQ(p.values[0].slot, ProgramValue::kNoSlot) << "inputs are the caller's";
  EXPECT_EQ(p.values[5].slot, ProgramValue::kNoSlot) << "outputs are new buffers";
}

TEST(Program, RunsOnTheCpuDevice) {
  Program p = chain(1000);
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; ++i)
    x[i] = float(i);
  std::vector<Device *> devices = {&CpuDevice::get()};
  StatusOr<RunResult> result = run(p, devices, {{nullptr, x.data()}});
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  ASSERT_EQ(result->outputs.size(), 1u);
  const float *out = static_cast<const float *>(CpuDevice::data(*result->outputs[0]));
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(out[i], 8.0f * float(i) + 1.0f) << i;
  EXPECT_EQ(result->counters.dispatches, 4u);
  ASSERT_TRUE(result->uploaded[0]) << "host input kept for the caller";
  // Two runs give two output buffers: a result is never overwritten.
  StatusOr<RunResult> again = run(p, devices, {{result->uploaded[0], nullptr}});
  ASSERT_TRUE(again.isOk());
  EXPECT_NE(again->outputs[0].get(), result->outputs[0].get());
  EXPECT_EQ(again->counters.bytesUploaded, 4000u) << "only the constant: x is on the device";
}

TEST(Program, ATransferOnOneDeviceKeepsItsSourceAlive) {
  // a = 2x; t = a moved to the device it is on (the same buffer); b = 2y;
  // out = t + b. b must not take a's buffer while t still reads it.
  Program p;
  p.devices = {"cpu:0"};
  p.inputs = {{{64}, ElementType::f32}, {{64}, ElementType::f32}};
  p.kernels = {cpuKernel("twice", twice, 64), cpuKernel("add", add, 64)};
  uint32_t x = addValue(p, 64), y = addValue(p, 64), a = addValue(p, 64), t = addValue(p, 64),
           b = addValue(p, 64), out = addValue(p, 64);
  addStep(p, ProgramStep::Kind::input, 0, {}, {x});
  addStep(p, ProgramStep::Kind::input, 1, {}, {y});
  addStep(p, ProgramStep::Kind::dispatch, 0, {x}, {a});
  addStep(p, ProgramStep::Kind::transfer, 0, {a}, {t});
  addStep(p, ProgramStep::Kind::dispatch, 0, {y}, {b});
  addStep(p, ProgramStep::Kind::dispatch, 1, {t, b}, {out});
  p.outputs = {out};
  p.planBuffers();
  EXPECT_NE(p.values[a].slot, p.values[b].slot) << p.describe();
  std::vector<float> xs(64, 3.0f), ys(64, 5.0f);
  std::vector<Device *> devices = {&CpuDevice::get()};
  StatusOr<RunResult> result = run(p, devices, {{nullptr, xs.data()}, {nullptr, ys.data()}});
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(static_cast<const float *>(CpuDevice::data(*result->outputs[0]))[63], 16.0f);
}

TEST(Program, MalformedRunsAreErrors) {
  Program p = chain(16);
  std::vector<Device *> devices = {&CpuDevice::get()};
  StatusOr<RunResult> noInputs = run(p, devices, {});
  ASSERT_FALSE(noInputs.isOk());
  EXPECT_NE(noInputs.status().message().find("takes 1 inputs, got 0"), std::string::npos)
      << noInputs.status().toString();
  StatusOr<RunResult> noDevices = run(p, {}, {{nullptr, nullptr}});
  ASSERT_FALSE(noDevices.isOk());
  StatusOr<RunResult> empty = run(p, devices, {{nullptr, nullptr}});
  ASSERT_FALSE(empty.isOk());
  EXPECT_NE(empty.status().message().find("neither a buffer nor host data"), std::string::npos);
}
} // namespace
