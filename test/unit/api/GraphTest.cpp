// The lazy graph: no work before a read, reads that do not recompute,
// freed nodes, errors at the user's line.

#include "TestUtil.h"

#include "lib/Frontend/Graph.h"

using namespace kiln;

namespace {
TEST(Graph, NothingRunsBeforeARead) {
  KILN_REQUIRE_DEVICES(1u);
  reset_stats();
  Tensor x = Tensor::randn({64});
  Tensor y = kiln::exp(x) * 2.0f + x;
  EXPECT_FALSE(y.is_realized());
  EXPECT_EQ(stats().graphs_compiled, 0u);
  EXPECT_EQ(stats().kernels_dispatched, 0u);
  (void)y.to_vector<float>();
  EXPECT_TRUE(y.is_realized());
  EXPECT_EQ(stats().kernels_dispatched, 1u);
}

TEST(Graph, IntermediatesShareBuffersByLiveness) {
  // Four matmuls, each its own kernel: three [8, 16] intermediates (512
  // bytes each), at most two alive at once, on every device.
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor x = Tensor::randn({8, 16}, device);
    Tensor w = Tensor::full({16, 16}, 1.0f / 16.0f, device);
    Tensor y = x;
    for (int i = 0; i < 4; ++i)
      y = relu(matmul(y, w));
    reset_stats();
    std::vector<float> got = y.to_vector<float>();
    EXPECT_EQ(stats().kernels_dispatched, 4u) << device.name();
    EXPECT_EQ(stats().last_graph_unplanned_bytes, 3u * 512u) << device.name();
    EXPECT_EQ(stats().last_graph_peak_bytes, 2u * 512u) << device.name();
    // And the shared buffers hold the right values: relu of each row's mean.
    std::vector<float> xs = x.to_vector<float>();
    for (int r = 0; r < 8; ++r) {
      double mean = 0;
      for (int c = 0; c < 16; ++c)
        mean += xs[r * 16 + c] / 16.0;
      for (int c = 0; c < 16; ++c)
        EXPECT_NEAR(got[r * 16 + c], std::max(0.0, mean), 1e-5) << device.name();
    }
  }
}

TEST(Graph, ReadingAgainDoesNotRecompute) {
  KILN_REQUIRE_DEVICES(1u);
  Tensor y = kiln::sigmoid(Tensor::randn({1000}));
  std::vector<float> first = y.to_vector<float>();
  reset_stats();
  std::vector<float> second = y.to_vector<float>();
  EXPECT_EQ(first, second);
  EXPECT_EQ(stats().graphs_compiled, 0u);
  EXPECT_EQ(stats().kernels_dispatched, 0u);
  // A realized value feeds later graphs as an input, not as its ops again.
  reset_stats();
  (void)(y + 1.0f).to_vector<float>();
  EXPECT_EQ(stats().kernels_dispatched, 1u);
}

TEST(Graph, SecondRealizeOfTheSameShapeCompilesNothing) {
  for (const Device &device : kiln::test::availableDevices()) {
    auto run = [&] {
      Tensor a = Tensor::randn({33, 17}, device);
      return (kiln::relu(a) * 3.0f - kiln::abs(a)).to_vector<float>();
    };
    run();
    reset_stats();
    run();
    // The same structure: its Program is reused, no MLIR is built and no
    // kernel is even looked up.
    EXPECT_EQ(stats().graphs_compiled, 0u) << device.name();
    EXPECT_EQ(stats().graph_cache_hits, 1u) << device.name();
    EXPECT_EQ(stats().kernels_compiled, 0u) << device.name();
    EXPECT_EQ(stats().kernels_dispatched, 1u) << device.name();
  }
}

TEST(Graph, NewScalarValuesReuseTheCompiledKernel) {
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor x = Tensor::randn({100}, device);
    (void)(x * 0.5f + 1.0f).to_vector<float>();
    reset_stats();
    std::vector<float> got = (x * 0.25f + 3.0f).to_vector<float>(); // a learning-rate step
    EXPECT_EQ(stats().kernels_compiled, 0u) << device.name();
    EXPECT_EQ(stats().graph_cache_hits, 1u) << "scalars are slots of one Program";
    std::vector<float> xs = x.to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_FLOAT_EQ(got[i], xs[i] * 0.25f + 3.0f);
  }
}

TEST(Graph, HostInputsAreUploadedOnce) {
  Tensor w = Tensor::randn({1 << 16}); // host data, never realized by hand
  Tensor x = Tensor::randn({1 << 16});
  (void)(x * w).to_vector<float>();
  reset_stats();
  (void)(x + w).to_vector<float>();
  // Both inputs are on the device already: nothing but the read comes back.
  EXPECT_EQ(stats().bytes_uploaded, 0u);
}

TEST(Graph, UnusedNodesAreFreed) {
  KILN_REQUIRE_DEVICES(1u);
  std::weak_ptr<Node> input, middle;
  Tensor out;
  {
    Tensor x = Tensor::randn({16});
    Tensor m = kiln::exp(x);
    out = m + 1.0f;
    input = x.node();
    middle = m.node();
  }
  // Still needed by `out`.
  EXPECT_FALSE(middle.expired());
  (void)out.to_vector<float>();
  // Realized: `out` holds its buffer and lets go of the graph above it.
  EXPECT_TRUE(middle.expired());
  EXPECT_TRUE(input.expired());
}

TEST(Graph, DroppedGraphIsFreedWithoutRunning) {
  std::weak_ptr<Node> node;
  {
    Tensor x = Tensor::full({4}, 1.0f);
    Tensor y = x * x;
    node = y.node();
  }
  EXPECT_TRUE(node.expired());
}

TEST(Graph, ShapeErrorsNameTheUsersLine) {
  Tensor a = Tensor::zeros({4, 3});
  Tensor b = Tensor::zeros({5});
  unsigned line = __LINE__ + 2;
  try {
    Tensor c = a + b;
    FAIL() << "expected a shape error";
  } catch (const Error &error) {
    std::string text = error.what();
    EXPECT_NE(text.find("GraphTest.cpp:" + std::to_string(line)), std::string::npos) << text;
    EXPECT_NE(text.find("[4, 3] and [5] do not broadcast"), std::string::npos) << text;
  }
  EXPECT_THROW(Tensor::from({1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW((void)Tensor::zeros({2}).item<float>(), Error);
  EXPECT_THROW(where(a, a, a), Error);
  EXPECT_THROW(kiln::exp(Tensor()), Error);
}

TEST(Graph, RealizeSeveralAtOnceSharesWork) {
  KILN_REQUIRE_DEVICES(1u);
  Tensor x = Tensor::randn({128});
  Tensor e = kiln::exp(x);
  Tensor a = e + 1.0f, b = e * 2.0f;
  reset_stats();
  realize({a, b});
  EXPECT_EQ(stats().graphs_compiled, 1u);
  std::vector<float> xs = x.to_vector<float>(), as = a.to_vector<float>(),
                     bs = b.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(as[i], std::exp(double(xs[i])) + 1, 1e-5 * (std::exp(double(xs[i])) + 1));
    EXPECT_NEAR(bs[i], 2 * std::exp(double(xs[i])), 1e-5 * 2 * std::exp(double(xs[i])));
  }
}
} // namespace
