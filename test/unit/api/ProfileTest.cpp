//===- ProfileTest.cpp - kiln::profile: times, counts, sources, traces ----===//

#include "TestUtil.h"

#include "kiln/Profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace kiln;
using namespace kiln::test;

namespace {
class Profiled : public OnEveryDevice {};

TEST_P(Profiled, CountsTheFlopsAndBytesOfEachKernelAndNamesItsLines) {
  Tensor a = Tensor::randn({8, 16}).to(*device);
  Tensor b = Tensor::randn({16, 4}).to(*device);
  realize({a, b}); // on the device already: the program is the kernel alone
  int line = __LINE__ + 1;
  Tensor y = relu(matmul(a, b));
  Profile p = profile({y}, 3);
  ASSERT_EQ(p.kernels.size(), 1u) << p.table();
  const KernelProfile &k = p.kernels[0];
  EXPECT_EQ(k.kind, "matmul");
  EXPECT_EQ(k.device, device->name());
  // 2 M N K for the product, one per element for the relu.
  EXPECT_EQ(k.flops, 2u * 8 * 4 * 16 + 8 * 4);
  EXPECT_EQ(k.bytes, 4u * (8 * 16 + 16 * 4 + 8 * 4));
  EXPECT_EQ(k.ops, "matmul+relu -> [8, 4] f32");
  EXPECT_EQ(k.sources, "ProfileTest.cpp:" + std::to_string(line) + " matmul+relu");
  EXPECT_GT(k.microseconds, 0);
  EXPECT_EQ(p.runs, 3);
  EXPECT_EQ(p.clock, device->api() == "vulkan" ? "GPU timestamps"
                                               : "host clock, one dispatch at a time");
  EXPECT_NEAR(k.gflops_per_second(), k.flops / (k.microseconds * 1e3), 1e-9);
  std::string table = p.table();
  EXPECT_NE(table.find("kiln profile: 1 kernels"), std::string::npos) << table;
  EXPECT_NE(table.find("matmul+relu -> [8, 4] f32  [ProfileTest.cpp:"), std::string::npos)
      << table;
}

TEST_P(Profiled, ComputesTheSameValuesAsRealize) {
  Tensor x = Tensor::randn({4, 32}).to(*device);
  Tensor g = Tensor::randn({32}).to(*device), c = Tensor::randn({32}).to(*device);
  Tensor w = Tensor::randn({32, 32}).to(*device);
  auto model = [&] { return softmax(linear(layer_norm(x, g, c), w, c), -1) * 2.0f; };
  Tensor expected = model();
  realize({expected});
  Tensor profiled = model();
  Profile p = profile({profiled}, 2);
  EXPECT_GE(p.kernels.size(), 2u) << p.table();
  EXPECT_EQ(profiled.to_vector<float>(), expected.to_vector<float>());
}

TEST_P(Profiled, WritesAChromeTraceWithOneEventPerKernel) {
  Tensor x = Tensor::randn({1, 4, 8, 8}).to(*device);
  Tensor w = Tensor::randn({4, 4, 3, 3}).to(*device);
  Tensor h = relu(conv2d(x, w, {1, 1}, {1, 1}));
  Tensor y = sum(conv2d(h, w, {1, 1}, {1, 1}) + h, {1});
  Profile p = profile({y}, 1);
  std::string trace = p.chrome_trace();
  EXPECT_EQ(trace.rfind("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", 0), 0u) << trace;
  EXPECT_EQ(occurrences(trace, "\"ph\":\"X\""), p.kernels.size());
  EXPECT_EQ(occurrences(trace, "\"ph\":\"M\""), 1u); // the one device's row name
  EXPECT_EQ(occurrences(trace, "{"), occurrences(trace, "}"));
  EXPECT_EQ(occurrences(trace, "\"cat\":\"conv\""), 2u) << trace;

  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kiln-trace-" + std::to_string(getpid()) + ".json");
  p.write_chrome_trace(path.string());
  std::stringstream read;
  read << std::ifstream(path).rdbuf();
  EXPECT_EQ(read.str(), trace);
  std::filesystem::remove(path);
  EXPECT_NE(messageOf([&] { p.write_chrome_trace("/nonexistent-dir/trace.json"); })
                .find("cannot write the Chrome trace to '/nonexistent-dir/trace.json'"),
            std::string::npos);
}

KILN_ON_EVERY_DEVICE(Profiled);

TEST(Profile, OfComputedTensorsSaysToProfileBeforeReading) {
  Tensor y = Tensor::randn({4}) * 2.0f;
  y.to_vector<float>();
  EXPECT_NE(messageOf([&] { profile({y}); }).find("call profile before reading them"),
            std::string::npos);
  EXPECT_NE(messageOf([&] { profile({Tensor::randn({4}) + 1.0f}, 0); })
                .find("at least one run, got 0"),
            std::string::npos);
}
} // namespace
