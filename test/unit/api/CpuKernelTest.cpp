// The CPU device's code and memory: kernels are vectorized (checked in the
// optimized LLVM IR, not only by their results), call no libm, and results
// live in aligned host memory that can be read without a copy.

#include "TestUtil.h"

#include "lib/Driver/ProcessSession.h"

#include <functional>
#include <regex>
#include <set>

using namespace kiln;

namespace {
TEST(CpuKernel, TranscendentalChainIsVectorizedWithoutLibmCalls) {
  Session &s = session();
  s.captureCpuIR = true;
  // A shape no other test uses, so this compiles now.
  Tensor x = Tensor::randn({37, 129}, Device::cpu());
  Tensor w = Tensor::randn({129});
  Tensor y = kiln::tanh(x * w) + kiln::exp(-x) + gelu(x) + kiln::log(kiln::abs(x) + 1.0f);
  reset_stats();
  std::vector<float> got = y.to_vector<float>();
  s.captureCpuIR = false;
  ASSERT_EQ(stats().kernels_compiled, 1u);
  std::string ir;
  s.cpuKernels.forEach([&](const std::string &key, const CompiledCpuKernel &kernel) {
    if (key.find("37x129") != std::string::npos || key.find("4773") != std::string::npos)
      ir += kernel.optimizedIR;
  });
  ASSERT_FALSE(ir.empty()) << "no captured IR for the kernel";
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(fmul (fast )?<\d+ x float>)"))) << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(load <\d+ x float>)"))) << ir;
  for (const char *libm : {"@tanhf", "@expf", "@logf", "@erff", "@llvm.tanh", "@llvm.exp.", "@llvm.log."})
    EXPECT_EQ(ir.find(libm), std::string::npos) << "calls " << libm;

  std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>();
  std::vector<double> want;
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i];
    want.push_back(std::tanh(v * ws[i % 129]) + std::exp(-v) +
                   0.5 * v * (1 + std::erf(v / std::sqrt(2.0))) + std::log(std::abs(v) + 1));
  }
  EXPECT_TRUE(kiln::test::allClose(got, want));
}

/// The optimized IR of the CPU kernels compiled while running `make`.
std::string optimizedIRWhile(const std::function<void()> &make) {
  Session &s = session();
  std::set<std::string> before;
  s.cpuKernels.forEach(
      [&](const std::string &key, const CompiledCpuKernel &) { before.insert(key); });
  s.captureCpuIR = true;
  make();
  s.captureCpuIR = false;
  std::string ir;
  s.cpuKernels.forEach([&](const std::string &key, const CompiledCpuKernel &kernel) {
    if (!before.count(key))
      ir += kernel.optimizedIR;
  });
  return ir;
}

// Row kernels vectorize their reductions (reassociable steps) and the
// output loop; matmul is vector FMAs on the register block.
TEST(CpuKernel, RowKernelsAndMatmulAreVectorized) {
  Tensor x = Tensor::randn({23, 517}, Device::cpu());
  std::string softmaxIR = optimizedIRWhile([&] { softmax(x, -1).to_vector<float>(); });
  ASSERT_FALSE(softmaxIR.empty());
  EXPECT_TRUE(std::regex_search(softmaxIR, std::regex(R"(fadd reassoc <\d+ x float>)")))
      << softmaxIR;
  EXPECT_TRUE(std::regex_search(softmaxIR, std::regex(R"(fdiv <\d+ x float>)"))) << softmaxIR;

  Tensor a = Tensor::randn({45, 70}, Device::cpu()), b = Tensor::randn({70, 33}, Device::cpu());
  std::string matmulIR = optimizedIRWhile([&] { matmul(a, b).to_vector<float>(); });
  ASSERT_FALSE(matmulIR.empty());
  EXPECT_TRUE(std::regex_search(matmulIR, std::regex(R"(@llvm\.fmuladd\.v\d+f32|fmul <\d+ x float>)")))
      << matmulIR;
}

// A division by a row value stays a division: a product with the row's
// reciprocal (what softmax kernels do, their sum being at least 1) turns a
// row sum under 2^-128, whose reciprocal overflows, into infinities, and
// loses the low bits past 2^126 (the reciprocal subnormal).
TEST(CpuKernel, DivisionsByRowValuesKeepTinyAndHugeRows) {
  Device cpu = Device::cpu();
  std::vector<float> xs = {4e-41f, 6e-41f, 3e38f, 1e38f, 2.0f, 6.0f};
  Tensor x = Tensor::from(xs, {3, 2}, cpu);
  std::vector<float> got = (x / sum(x, {1}, true)).to_vector<float>();
  // (The second row's sum overflows to infinity, as in PyTorch: 0 each.)
  std::vector<double> want = {0.4, 0.6, 0.0, 0.0, 0.25, 0.75};
  EXPECT_TRUE(kiln::test::allClose(got, want, 1e-4, 1e-4)); // (subnormal inputs: 21 bits)
}

TEST(CpuKernel, ResultsAreAlignedHostMemoryReadWithoutCopy) {
  Tensor y = Tensor::randn({1000}, Device::cpu()) * 2.0f;
  std::span<const float> view = y.cpu_view();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(view.data()) % 64, 0u);
  EXPECT_EQ(view.size(), 1000u);
  EXPECT_EQ(y.cpu_view().data(), view.data()); // the buffer itself, no copy
  std::vector<float> copy = y.to_vector<float>();
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), view.begin()));
  if (kiln::test::availableDevices().size() > 1) {
    Tensor gpu = Tensor::zeros({4}, Device::vulkan(0)) + 1.0f;
    EXPECT_THROW((void)gpu.cpu_view(), Error);
  }
}

TEST(CpuKernel, ThreadedKernelsCoverEveryElement) {
  // Odd sizes: the outer loop splits into chunks, the inner one has a tail.
  for (Shape shape : {Shape{1}, Shape{17}, Shape{100003}, Shape{513, 1027}, Shape{3, 1, 70001}}) {
    Tensor x = Tensor::randn(shape, Device::cpu());
    Tensor b = Tensor::randn({shape.back()});
    std::vector<float> got = (x * 3.0f + b).to_vector<float>();
    std::vector<float> xs = x.to_vector<float>(), bs = b.to_vector<float>();
    std::vector<double> want;
    for (size_t i = 0; i < xs.size(); ++i)
      want.push_back(3.0 * xs[i] + bs[i % shape.back()]);
    EXPECT_TRUE(kiln::test::allClose(got, want)) << shape.size();
  }
}
} // namespace
