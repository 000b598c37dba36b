// The threading contract of Tensor.h: threads read, realize and record at
// once, on shared tensors too, and every one sees the right values.

#include "TestUtil.h"

#include <thread>

using namespace kiln;

namespace {
TEST(Threading, ThreadsReadAndRealizeOneTensorAtOnce) {
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor x = Tensor::from({1, 2, 3, 4, 5, 6, 7, 8}, {8}, device);
    Tensor y = kiln::exp(x) * 2.0f + x;
    std::vector<float> want;
    for (float v : {1, 2, 3, 4, 5, 6, 7, 8})
      want.push_back(std::exp(v) * 2.0f + v);
    std::vector<std::vector<float>> got(6);
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
      threads.emplace_back([&, t] {
        if (t % 3 == 0)
          realize({y});
        got[t] = y.to_vector<float>();
        // Each thread also records and runs a graph of its own on y.
        Tensor mine = y * float(t);
        std::vector<float> scaled = mine.to_vector<float>();
        for (size_t i = 0; i < scaled.size(); ++i)
          EXPECT_FLOAT_EQ(scaled[i], want[i] * float(t)) << device.name() << " thread " << t;
        EXPECT_TRUE(y.is_realized());
      });
    for (std::thread &thread : threads)
      thread.join();
    for (int t = 0; t < 6; ++t)
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_FLOAT_EQ(got[t][i], want[i]) << device.name() << " thread " << t;
  }
}

TEST(Threading, CpuViewsFromManyThreads) {
  Tensor x = Tensor::rand({1024}, Device::cpu()) + 1.0f;
  std::vector<std::thread> threads;
  std::vector<double> sums(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (float v : x.cpu_view())
        sums[t] += v;
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 1; t < 4; ++t)
    EXPECT_EQ(sums[t], sums[0]);
  EXPECT_GT(sums[0], 1024.0);
}
} // namespace
