//===- DispatchTest.cpp - Pipelines and compute dispatches ----------------===//

#include "VulkanTestUtil.h"

#include "kiln/runtime/PipelineStatistics.h"

#include <cstdlib>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace kiln::rt::test {
namespace {

// out[i] = in[i] * 2.0 + 1.0 for i < out.length(); local size 64.
// Assembled once with spirv-as (SPIR-V 1.0), checked with
// spirv-val --target-env vulkan1.0. Its GLSL equivalent:
//
//   #version 450
//   layout(local_size_x = 64) in;
//   layout(set = 0, binding = 0) readonly buffer In { float x[]; } src;
//   layout(set = 0, binding = 1) buffer Out { float y[]; } dst;
//   void main() {
//     uint i = gl_GlobalInvocationID.x;
//     if (i < dst.y.length())
//       dst.y[i] = src.x[i] * 2.0 + 1.0;
//   }
//
// The assembly:
//
//                OpCapability Shader
//                OpMemoryModel Logical GLSL450
//                OpEntryPoint GLCompute %main "main" %gid
//                OpExecutionMode %main LocalSize 64 1 1
//                OpDecorate %gid BuiltIn GlobalInvocationId
//                OpDecorate %rta ArrayStride 4
//                OpMemberDecorate %In 0 NonWritable
//                OpMemberDecorate %In 0 Offset 0
//                OpDecorate %In BufferBlock
//                OpDecorate %src DescriptorSet 0
//                OpDecorate %src Binding 0
//                OpMemberDecorate %Out 0 Offset 0
//                OpDecorate %Out BufferBlock
//                OpDecorate %dst DescriptorSet 0
//                OpDecorate %dst Binding 1
//        %void = OpTypeVoid
//          %fn = OpTypeFunction %void
//        %uint = OpTypeInt 32 0
//       %float = OpTypeFloat 32
//        %bool = OpTypeBool
//      %v3uint = OpTypeVector %uint 3
// %ptr_in_v3uint = OpTypePointer Input %v3uint
// %ptr_in_uint = OpTypePointer Input %uint
//         %gid = OpVariable %ptr_in_v3uint Input
//      %uint_0 = OpConstant %uint 0
//     %float_2 = OpConstant %float 2
//     %float_1 = OpConstant %float 1
//         %rta = OpTypeRuntimeArray %float
//          %In = OpTypeStruct %rta
//         %Out = OpTypeStruct %rta
//      %ptr_In = OpTypePointer Uniform %In
//     %ptr_Out = OpTypePointer Uniform %Out
//   %ptr_float = OpTypePointer Uniform %float
//         %src = OpVariable %ptr_In Uniform
//         %dst = OpVariable %ptr_Out Uniform
//        %main = OpFunction %void None %fn
//       %entry = OpLabel
//      %gidx_p = OpAccessChain %ptr_in_uint %gid %uint_0
//           %i = OpLoad %uint %gidx_p
//           %n = OpArrayLength %uint %dst 0
//          %ok = OpULessThan %bool %i %n
//                OpSelectionMerge %end None
//                OpBranchConditional %ok %body %end
//        %body = OpLabel
//          %sp = OpAccessChain %ptr_float %src %uint_0 %i
//           %x = OpLoad %float %sp
//           %m = OpFMul %float %x %float_2
//           %y = OpFAdd %float %m %float_1
//          %dp = OpAccessChain %ptr_float %dst %uint_0 %i
//                OpStore %dp %y
//                OpBranch %end
//         %end = OpLabel
//                OpReturn
//                OpFunctionEnd
const std::vector<uint32_t> kScaleKernel = {
    0x07230203, 0x00010000, 0x00070000, 0x00000022, 0x00000000, 0x00020011,
    0x00000001, 0x0003000e, 0x00000000, 0x00000001, 0x0006000f, 0x00000005,
    0x00000001, 0x6e69616d, 0x00000000, 0x00000002, 0x00060010, 0x00000001,
    0x00000011, 0x00000040, 0x00000001, 0x00000001, 0x00040047, 0x00000002,
    0x0000000b, 0x0000001c, 0x00040047, 0x00000003, 0x00000006, 0x00000004,
    0x00040048, 0x00000004, 0x00000000, 0x00000018, 0x00050048, 0x00000004,
    0x00000000, 0x00000023, 0x00000000, 0x00030047, 0x00000004, 0x00000003,
    0x00040047, 0x00000005, 0x00000022, 0x00000000, 0x00040047, 0x00000005,
    0x00000021, 0x00000000, 0x00050048, 0x00000006, 0x00000000, 0x00000023,
    0x00000000, 0x00030047, 0x00000006, 0x00000003, 0x00040047, 0x00000007,
    0x00000022, 0x00000000, 0x00040047, 0x00000007, 0x00000021, 0x00000001,
    0x00020013, 0x00000008, 0x00030021, 0x00000009, 0x00000008, 0x00040015,
    0x0000000a, 0x00000020, 0x00000000, 0x00030016, 0x0000000b, 0x00000020,
    0x00020014, 0x0000000c, 0x00040017, 0x0000000d, 0x0000000a, 0x00000003,
    0x00040020, 0x0000000e, 0x00000001, 0x0000000d, 0x00040020, 0x0000000f,
    0x00000001, 0x0000000a, 0x0004003b, 0x0000000e, 0x00000002, 0x00000001,
    0x0004002b, 0x0000000a, 0x00000010, 0x00000000, 0x0004002b, 0x0000000b,
    0x00000011, 0x40000000, 0x0004002b, 0x0000000b, 0x00000012, 0x3f800000,
    0x0003001d, 0x00000003, 0x0000000b, 0x0003001e, 0x00000004, 0x00000003,
    0x0003001e, 0x00000006, 0x00000003, 0x00040020, 0x00000013, 0x00000002,
    0x00000004, 0x00040020, 0x00000014, 0x00000002, 0x00000006, 0x00040020,
    0x00000015, 0x00000002, 0x0000000b, 0x0004003b, 0x00000013, 0x00000005,
    0x00000002, 0x0004003b, 0x00000014, 0x00000007, 0x00000002, 0x00050036,
    0x00000008, 0x00000001, 0x00000000, 0x00000009, 0x000200f8, 0x00000016,
    0x00050041, 0x0000000f, 0x00000017, 0x00000002, 0x00000010, 0x0004003d,
    0x0000000a, 0x00000018, 0x00000017, 0x00050044, 0x0000000a, 0x00000019,
    0x00000007, 0x00000000, 0x000500b0, 0x0000000c, 0x0000001a, 0x00000018,
    0x00000019, 0x000300f7, 0x0000001b, 0x00000000, 0x000400fa, 0x0000001a,
    0x0000001c, 0x0000001b, 0x000200f8, 0x0000001c, 0x00060041, 0x00000015,
    0x0000001d, 0x00000005, 0x00000010, 0x00000018, 0x0004003d, 0x0000000b,
    0x0000001e, 0x0000001d, 0x00050085, 0x0000000b, 0x0000001f, 0x0000001e,
    0x00000011, 0x00050081, 0x0000000b, 0x00000020, 0x0000001f, 0x00000012,
    0x00060041, 0x00000015, 0x00000021, 0x00000007, 0x00000010, 0x00000018,
    0x0003003e, 0x00000021, 0x00000020, 0x000200f9, 0x0000001b, 0x000200f8,
    0x0000001b, 0x000100fd, 0x00010038,
};

constexpr uint64_t kScaleHash = 0x5ca1e0001;

KernelBinary scaleKernel() {
  return KernelBinary{kScaleHash, &kScaleKernel, "main", 2};
}

/// What the kernel computes, in the same float operations.
float scale(float x) { return x * 2.0f + 1.0f; }

std::vector<float> randomFloats(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::vector<float> values(count);
  for (float &value : values)
    value = dist(rng);
  return values;
}

using DispatchTest = VulkanTest;

TEST_F(DispatchTest, ScaleKernelOverANonMultipleOfTheWorkgroupSize) {
  constexpr size_t n =
      1000; // 16 groups of 64 = 1024 invocations, 24 guarded off
  std::vector<float> input = randomFloats(n, 1);
  KILN_ASSERT_OK_AND_ASSIGN(pipeline, device->pipeline(scaleKernel()));
  KILN_ASSERT_OK_AND_ASSIGN(in, device->allocate(n * 4));
  KILN_ASSERT_OK_AND_ASSIGN(out, device->allocate(n * 4));
  std::vector<float> poison(n, -12345.0f);
  KILN_ASSERT_OK(device->upload(*out, poison.data(), n * 4));
  KILN_ASSERT_OK(device->upload(*in, input.data(), n * 4));
  KILN_ASSERT_OK(
      device->dispatch(pipeline, {in.get(), out.get()}, (n + 63) / 64, 1, 1));
  std::vector<float> output(n, 0.0f);
  KILN_ASSERT_OK(device->download(*out, output.data(), n * 4));
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(output[i], scale(input[i])) << "element " << i;

  DeviceStats stats = device->stats();
  EXPECT_EQ(stats.dispatches, 1u);
  EXPECT_EQ(stats.pipelinesCreated, 1u);
  EXPECT_EQ(stats.pipelineCacheHits, 0u);
  // Uploads and the dispatch went in one submit; the download in another.
  EXPECT_EQ(stats.submits, 2u);
}

// KILN_PIPELINE_STATISTICS=1 when the device is created: pipelines capture
// the driver's statistics where it reports them, and compute the same.
class PipelineStatisticsTest : public VulkanTest {
protected:
  void SetUp() override {
    setenv(kPipelineStatisticsEnv, "1", 1);
    VulkanTest::SetUp();
  }
  void TearDown() override {
    VulkanTest::TearDown();
    unsetenv(kPipelineStatisticsEnv);
  }
};

TEST_F(PipelineStatisticsTest, PipelinesSayWhatTheDriverMadeOfThem) {
  constexpr size_t n = 256;
  std::vector<float> input = randomFloats(n, 3);
  KILN_ASSERT_OK_AND_ASSIGN(pipeline, device->pipeline(scaleKernel()));
  KILN_ASSERT_OK_AND_ASSIGN(in, device->allocate(n * 4));
  KILN_ASSERT_OK_AND_ASSIGN(out, device->allocate(n * 4));
  KILN_ASSERT_OK(device->upload(*in, input.data(), n * 4));
  KILN_ASSERT_OK(device->dispatch(pipeline, {in.get(), out.get()}, n / 64, 1, 1));
  std::vector<float> output(n, 0.0f);
  KILN_ASSERT_OK(device->download(*out, output.data(), n * 4));
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(output[i], scale(input[i])) << "element " << i;
  std::string statistics = pipelineStatistics(*pipeline);
  if (!device->capturesPipelineStatistics()) {
    EXPECT_EQ(statistics, "");
    GTEST_SKIP() << device->adapterName()
                 << " does not offer pipeline statistics (VK_KHR_pipeline_executable_properties): "
                    "the dispatch above was checked, the statistics were not";
  }
  // "NAME: statistic=value, ..." per executable, each line ended.
  EXPECT_NE(statistics.find(": "), std::string::npos) << statistics;
  EXPECT_NE(statistics.find('='), std::string::npos) << statistics;
  EXPECT_EQ(statistics.back(), '\n') << statistics;
}

TEST_F(DispatchTest, SecondRequestForTheSameHashHitsTheCache) {
  KILN_ASSERT_OK_AND_ASSIGN(first, device->pipeline(scaleKernel()));
  KILN_ASSERT_OK_AND_ASSIGN(second, device->pipeline(scaleKernel()));
  EXPECT_EQ(first, second);
  DeviceStats stats = device->stats();
  EXPECT_EQ(stats.pipelinesCreated, 1u);
  EXPECT_EQ(stats.pipelineCacheHits, 1u);

  // Same hash with another interface is a hashing bug, reported.
  KernelBinary mismatched = scaleKernel();
  mismatched.numBindings = 3;
  StatusOr<Pipeline *> wrong = device->pipeline(mismatched);
  ASSERT_FALSE(wrong.isOk());
  EXPECT_EQ(wrong.status().code(), Status::Code::InvalidArgument);

  // The cache is per device: another context's device compiles its own.
  KILN_ASSERT_OK_AND_ASSIGN(other, VulkanContext::create(options()));
  KILN_ASSERT_OK_AND_ASSIGN(otherDevice, other->device(0));
  KILN_ASSERT_OK_AND_ASSIGN(third, otherDevice->pipeline(scaleKernel()));
  EXPECT_EQ(otherDevice->stats().pipelinesCreated, 1u);
  EXPECT_EQ(device->dispatch(third, {nullptr, nullptr}, 1, 1, 1).code(),
            Status::Code::InvalidArgument)
      << "a pipeline of another device was accepted";
}

TEST_F(DispatchTest, ChainedDispatchesSeeEachOthersWrites) {
  // a -> b -> a -> ... : each dispatch reads what the previous one wrote, in
  // one command buffer, so only the barriers order them.
  constexpr size_t n = 4096;
  constexpr int steps = 8;
  std::vector<float> input = randomFloats(n, 2);
  for (float &value : input)
    value = float(int(value)); // small integers: exact through every step
  KILN_ASSERT_OK_AND_ASSIGN(pipeline, device->pipeline(scaleKernel()));
  KILN_ASSERT_OK_AND_ASSIGN(a, device->allocate(n * 4));
  KILN_ASSERT_OK_AND_ASSIGN(b, device->allocate(n * 4));
  KILN_ASSERT_OK(device->upload(*a, input.data(), n * 4));
  for (int step = 0; step < steps; ++step) {
    Buffer *from = step % 2 ? b.get() : a.get();
    Buffer *to = step % 2 ? a.get() : b.get();
    KILN_ASSERT_OK(device->dispatch(pipeline, {from, to}, n / 64, 1, 1));
  }
  std::vector<float> output(n);
  KILN_ASSERT_OK(device->download(*a, output.data(), n * 4));
  for (size_t i = 0; i < n; ++i) {
    float expected = input[i];
    for (int step = 0; step < steps; ++step)
      expected = scale(expected);
    ASSERT_EQ(output[i], expected) << "element " << i;
  }
  EXPECT_EQ(device->stats().dispatches, uint64_t(steps));
}

TEST_F(DispatchTest, UploadAfterADispatchDoesNotChangeWhatItRead) {
  // Within one command buffer: dispatch reads `in`, then an upload
  // overwrites `in`, then a second dispatch reads the new contents.
  constexpr size_t n = 640;
  std::vector<float> first = randomFloats(n, 5), second = randomFloats(n, 6);
  KILN_ASSERT_OK_AND_ASSIGN(pipeline, device->pipeline(scaleKernel()));
  KILN_ASSERT_OK_AND_ASSIGN(in, device->allocate(n * 4));
  KILN_ASSERT_OK_AND_ASSIGN(outFirst, device->allocate(n * 4));
  KILN_ASSERT_OK_AND_ASSIGN(outSecond, device->allocate(n * 4));
  KILN_ASSERT_OK(device->upload(*in, first.data(), n * 4));
  KILN_ASSERT_OK(
      device->dispatch(pipeline, {in.get(), outFirst.get()}, n / 64, 1, 1));
  KILN_ASSERT_OK(device->upload(*in, second.data(), n * 4));
  KILN_ASSERT_OK(
      device->dispatch(pipeline, {in.get(), outSecond.get()}, n / 64, 1, 1));
  std::vector<float> gotFirst(n), gotSecond(n);
  KILN_ASSERT_OK(device->download(*outFirst, gotFirst.data(), n * 4));
  KILN_ASSERT_OK(device->download(*outSecond, gotSecond.data(), n * 4));
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(gotFirst[i], scale(first[i])) << "element " << i;
    ASSERT_EQ(gotSecond[i], scale(second[i])) << "element " << i;
  }
}

TEST_F(DispatchTest, InvalidSpirvIsAnErrorNotACrash) {
  auto expectError = [&](const std::vector<uint32_t> &words, const char *entry,
                         Status::Code code, const char *mentions) {
    KernelBinary kernel{0xbad0 + words.size(), &words, entry, 2};
    StatusOr<Pipeline *> pipeline = device->pipeline(kernel);
    ASSERT_FALSE(pipeline.isOk()) << mentions;
    EXPECT_EQ(pipeline.status().code(), code) << pipeline.status().message();
    EXPECT_NE(pipeline.status().message().find(mentions), std::string::npos)
        << pipeline.status().message();
  };
  expectError({}, "main", Status::Code::InvalidArgument,
              "shorter than the header");
  expectError({1, 2, 3, 4, 5, 6}, "main", Status::Code::InvalidArgument,
              "magic");
  std::vector<uint32_t> truncated(kScaleKernel.begin(),
                                  kScaleKernel.begin() + 12);
  expectError(truncated, "main", Status::Code::InvalidArgument,
              "runs past the end");
  std::vector<uint32_t> zeroLength = kScaleKernel;
  zeroLength[5] = 0;
  expectError(zeroLength, "main", Status::Code::InvalidArgument, "zero length");
  expectError(kScaleKernel, "other", Status::Code::NotFound, "'main'");

  KernelBinary noCode{0xbad1, nullptr, "main", 2};
  EXPECT_EQ(device->pipeline(noCode).status().code(),
            Status::Code::InvalidArgument);
  EXPECT_EQ(device->stats().pipelinesCreated, 0u);

  // The device is still usable.
  KILN_ASSERT_OK_AND_ASSIGN(pipeline, device->pipeline(scaleKernel()));
  EXPECT_NE(pipeline, nullptr);
}

// A kernel on cooperative matrices the device lacks is refused before the
// driver sees it (lavapipe fails such modules with no reason given), with
// the fix: compile for this device. Capabilities open a module, so a module
// of the header and the capability is enough to be refused.
TEST_F(DispatchTest, CooperativeMatrixKernelsTheDeviceLacksAreRefused) {
  const AdapterInfo &adapter = device->adapter();
  auto refused = [&](uint32_t capability, const char *mentions) {
    std::vector<uint32_t> words = {0x07230203, 0x00010600, 0, 1, 0, (2u << 16) | 17, capability};
    KernelBinary kernel{0xc0de + capability, &words, "main", 2};
    StatusOr<Pipeline *> pipeline = device->pipeline(kernel);
    ASSERT_FALSE(pipeline.isOk());
    EXPECT_EQ(pipeline.status().code(), Status::Code::Unavailable);
    EXPECT_NE(pipeline.status().message().find(mentions), std::string::npos)
        << pipeline.status().message();
    EXPECT_NE(pipeline.status().message().find("compile the model for this device"),
              std::string::npos);
  };
  if (adapter.cooperativeMatrixF16 && adapter.cooperativeMatrixBF16)
    GTEST_SKIP() << adapter.name << " has f16 and bf16 cooperative matrices";
  if (!adapter.cooperativeMatrixF16)
    refused(/*CooperativeMatrixKHR=*/6022, "multiplies f16 on cooperative matrices");
  refused(/*BFloat16CooperativeMatrixKHR=*/5118, "multiplies bf16 on cooperative matrices");
  EXPECT_EQ(device->stats().pipelinesCreated, 0u);
}

TEST_F(DispatchTest, BadDispatchArgumentsAreInvalid) {
  KILN_ASSERT_OK_AND_ASSIGN(pipeline, device->pipeline(scaleKernel()));
  KILN_ASSERT_OK_AND_ASSIGN(in, device->allocate(256));
  KILN_ASSERT_OK_AND_ASSIGN(out, device->allocate(256));
  EXPECT_EQ(device->dispatch(pipeline, {in.get()}, 1, 1, 1).code(),
            Status::Code::InvalidArgument);
  EXPECT_EQ(device->dispatch(pipeline, {in.get(), nullptr}, 1, 1, 1).code(),
            Status::Code::InvalidArgument);
  EXPECT_EQ(device->dispatch(nullptr, {in.get(), out.get()}, 1, 1, 1).code(),
            Status::Code::InvalidArgument);
  uint32_t tooMany = device->adapter().maxWorkgroupCount[0] + 1;
  if (tooMany != 0)
    EXPECT_EQ(
        device->dispatch(pipeline, {in.get(), out.get()}, tooMany, 1, 1).code(),
        Status::Code::InvalidArgument);
  EXPECT_EQ(device->stats().dispatches, 0u);
}

TEST_F(DispatchTest, ZeroSizeBuffersCanBeBound) {
  KILN_ASSERT_OK_AND_ASSIGN(pipeline, device->pipeline(scaleKernel()));
  KILN_ASSERT_OK_AND_ASSIGN(in, device->allocate(0));
  KILN_ASSERT_OK_AND_ASSIGN(out, device->allocate(0));
  KILN_ASSERT_OK(device->dispatch(pipeline, {in.get(), out.get()}, 1, 1, 1));
  KILN_ASSERT_OK(device->flush());
}

class ThreadedDispatchTest : public VulkanTest {
protected:
  ContextOptions options() const override {
    ContextOptions options = VulkanTest::options();
    options.virtualDevices = 2;
    return options;
  }
};

TEST_F(ThreadedDispatchTest, DevicesWorkConcurrentlyFromTwoThreads) {
  KILN_ASSERT_OK_AND_ASSIGN(second, context->device(1));
  auto work = [](VulkanDevice *dev, uint32_t seed, std::string *failure) {
    StatusOr<Pipeline *> pipeline = dev->pipeline(scaleKernel());
    if (!pipeline.isOk()) {
      *failure = pipeline.status().toString();
      return;
    }
    constexpr size_t n = 777;
    for (int round = 0; round < 10; ++round) {
      std::vector<float> input = randomFloats(n, seed + round);
      StatusOr<std::shared_ptr<Buffer>> in = dev->allocate(n * 4);
      StatusOr<std::shared_ptr<Buffer>> out = dev->allocate(n * 4);
      if (!in.isOk() || !out.isOk()) {
        *failure = "allocation failed";
        return;
      }
      std::vector<float> output(n);
      Status status = dev->upload(**in, input.data(), n * 4);
      if (status.isOk())
        status = dev->dispatch(*pipeline, {in->get(), out->get()},
                               (n + 63) / 64, 1, 1);
      if (status.isOk())
        status = dev->download(**out, output.data(), n * 4);
      if (!status.isOk()) {
        *failure = status.toString();
        return;
      }
      for (size_t i = 0; i < n; ++i)
        if (output[i] != scale(input[i])) {
          *failure =
              "wrong value at " + std::to_string(i) + " on " + dev->name();
          return;
        }
    }
  };
  std::string firstFailure, secondFailure;
  std::thread a(work, device, 10u, &firstFailure);
  std::thread b(work, second, 20u, &secondFailure);
  a.join();
  b.join();
  EXPECT_EQ(firstFailure, "");
  EXPECT_EQ(secondFailure, "");
  EXPECT_EQ(device->stats().dispatches, 10u);
  EXPECT_EQ(second->stats().dispatches, 10u);
}

} // namespace
} // namespace kiln::rt::test
