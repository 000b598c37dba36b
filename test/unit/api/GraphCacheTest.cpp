// The JIT graph cache: a graph of the same structure reuses its
// Program without building MLIR, and every value that differs between two
// such graphs (inputs, scalars) is read from the new graph, never from the
// one the Program was compiled for.

#include "TestUtil.h"

using namespace kiln;

namespace {
TEST(GraphCache, ATrainingLoopCompilesOnce) {
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor w = Tensor::randn({16, 8}, device), b = Tensor::zeros({8}, device);
    std::vector<float> ws = w.to_vector<float>();
    reset_stats();
    for (int step = 0; step < 5; ++step) {
      Tensor x = Tensor::from(std::vector<float>(64, float(step)), {4, 16}, device);
      float lr = 0.1f * float(step + 1);
      std::vector<float> got = (relu(matmul(x, w) + b) * lr).to_vector<float>();
      for (int j = 0; j < 8; ++j) {
        double dot = 0;
        for (int k = 0; k < 16; ++k)
          dot += double(step) * ws[k * 8 + j];
        EXPECT_NEAR(got[j], std::max(0.0, dot) * lr, 1e-4) << device.name() << " step " << step;
      }
    }
    EXPECT_EQ(stats().graphs_compiled, 1u) << device.name();
    EXPECT_EQ(stats().graph_cache_hits, 4u) << device.name();
  }
}

TEST(GraphCache, EqualScalarsAreAPartOfTheStructure) {
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor x = Tensor::full({64}, 1.0f, device);
    // Equal scalars share one buffer; different ones do not: another Program.
    EXPECT_EQ((x * 2.0f + 2.0f).to_vector<float>()[0], 4.0f) << device.name();
    reset_stats();
    EXPECT_EQ((x * 2.0f + 3.0f).to_vector<float>()[0], 5.0f) << device.name();
    EXPECT_EQ(stats().graphs_compiled, 1u) << device.name();
    EXPECT_EQ((x * 5.0f + 7.0f).to_vector<float>()[0], 12.0f) << device.name();
    EXPECT_EQ(stats().graph_cache_hits, 1u) << device.name();
    EXPECT_EQ((x * 4.0f + 4.0f).to_vector<float>()[0], 8.0f) << device.name();
    EXPECT_EQ(stats().graph_cache_hits, 2u) << device.name();
  }
}

TEST(GraphCache, TensorConstantsAndF16ScalarsKeepTheirValues) {
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor x = Tensor::full({32}, 1.0f, device);
    // A [32] splat is copied into the kernel: its value is in the key.
    EXPECT_EQ((x + Tensor::full({32}, 2.0f)).to_vector<float>()[31], 3.0f) << device.name();
    EXPECT_EQ((x + Tensor::full({32}, 5.0f)).to_vector<float>()[31], 6.0f) << device.name();
    Tensor h = x.to(DType::f16);
    EXPECT_EQ((h * 3.0f).to(DType::f32).to_vector<float>()[0], 3.0f) << device.name();
    // 0.1 rounds to binary16 0x2E66 = 0.0999755859375 (to nearest, as the
    // first compile did for 3.0).
    EXPECT_EQ((h * 0.1f).to(DType::f32).to_vector<float>()[0], 0.0999755859375f)
        << device.name();
  }
}

TEST(GraphCache, EmptyHostInputsRun) {
  // An empty vector's data() may be null: still a valid input of 0 bytes.
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor e = Tensor::randn({0, 16}, device);
    EXPECT_EQ((e * 2.0f).shape(), (Shape{0, 16})) << device.name();
    EXPECT_TRUE((e * 2.0f).to_vector().empty()) << device.name();
    EXPECT_EQ(sum(e).item(), 0.0f) << device.name();
  }
}

TEST(GraphCache, NewInputsAreRead) {
  for (const Device &device : kiln::test::availableDevices()) {
    for (int i = 0; i < 3; ++i) {
      std::vector<float> data(10, float(i));
      Tensor x = Tensor::from(data, {10}, device);
      Tensor realized = Tensor::full({10}, float(10 * i), device);
      (void)realized.to_vector<float>(); // a realized input the next time
      EXPECT_EQ((x + realized).to_vector<float>()[9], float(11 * i)) << device.name();
    }
  }
}
} // namespace
