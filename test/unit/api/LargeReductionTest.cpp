// Wrong results once seen, reproduced on every device: long rows on a GPU
// whose driver stops loops early (llvmpipe), sums past 2^24 and 2^31
// elements, index_select past the i32 range, integer results read back
// exactly. Each answer is either exact or a kiln::Error that names the
// limit: never a wrong number.

#include "TestUtil.h"

#include <cstring>

using namespace kiln;

namespace {
class LargeReductionOnEveryDevice : public kiln::test::OnEveryDevice {
protected:
  bool isCpu() const { return device->api() == "cpu"; }
};

/// The value, or a kiln::Error whose message says which limit was hit
/// (only on GPUs: the CPU device must compute every one of these).
template <typename F>
void exactOrLimit(F read, double want, bool mustCompute, const char *what) {
  try {
    EXPECT_EQ(read(), want) << what;
  } catch (const Error &e) {
    EXPECT_FALSE(mustCompute) << what << ": " << e.what();
    std::string text = e.what();
    EXPECT_TRUE(text.find("loop iterations") != std::string::npos ||
                text.find("2^31") != std::string::npos)
        << what << ": the error must name the limit: " << text;
  }
}

TEST_P(LargeReductionOnEveryDevice, LongRowsKeepEveryPartialSum) {
  // 65536 loop trips per work item once lost one partial sum on llvmpipe.
  EXPECT_EQ(sum(Tensor::full({2048, 2048}, 1.0f, *device)).item<float>(), 4194304.0f);
  std::vector<float> means =
      mean(Tensor::full({2, 1 << 23}, 1.0f, *device), {1}).to_vector<float>();
  EXPECT_EQ(means, (std::vector<float>{1.0f, 1.0f}));
  // A column reduction: one work item per column once looped 2^22 times.
  std::vector<float> columns =
      sum(Tensor::full({1 << 22, 2}, 1.0f, *device), {0}).to_vector<float>();
  EXPECT_EQ(columns, (std::vector<float>{4194304.0f, 4194304.0f}));
}

TEST_P(LargeReductionOnEveryDevice, MaximumInTheLastElementIsFound) {
  int64_t n = (int64_t(1) << 22) + 5;
  std::vector<float> xs(n, 0.0f);
  xs.back() = 3.0f;
  Tensor x = Tensor::from(xs, {n}, *device);
  EXPECT_EQ(amax(x).item<float>(), 3.0f);
  EXPECT_EQ(amin(-x).item<float>(), -3.0f);
  EXPECT_EQ(argmax(x).item<int32_t>(), n - 1);
  EXPECT_EQ(argmin(-x).item<int32_t>(), n - 1);
}

// argmax / argmin over rows from short to past llvmpipe's loop budget (a
// workgroup per row on GPUs from 2048 columns): the first occurrence wins a
// tie, NaN wins over every number, a row of -inf gives 0, as in PyTorch.
TEST_P(LargeReductionOnEveryDevice, ArgReductionsAgreeWithTheHostAtEveryRowLength) {
  for (int64_t n : {1L, 255L, 2047L, 2048L, 2049L, 65535L, 65536L, 300001L}) {
    std::vector<float> xs(2 * n);
    for (int64_t i = 0; i < 2 * n; ++i)
      xs[i] = float((i * 7919) % 1000);
    xs[n / 3] = 2000.0f;             // row 0: a tie, the first one counts
    xs[n - 1] = 2000.0f;
    xs[n + n / 2] = std::nanf("");   // row 1: two NaNs, the first one counts
    xs[2 * n - 1] = std::nanf("");
    Tensor x = Tensor::from(xs, {2, n}, *device);
    std::vector<int32_t> maxAt = argmax(x, 1).to_vector<int32_t>();
    EXPECT_EQ(maxAt[0], n / 3) << "n = " << n;
    EXPECT_EQ(maxAt[1], n == 1 ? 0 : n / 2) << "n = " << n;
    // argmin over a transposed view ([n, 2], axis 0): strided columns.
    std::vector<int32_t> minAt = argmin(-x.transpose(0, 1), 0).to_vector<int32_t>();
    EXPECT_EQ(minAt, maxAt) << "n = " << n;
    // f16 input, and an epilogue (position + 1) in the same kernel.
    std::vector<float> plusOne = (argmax(x.to(DType::f16), 1).to(DType::f32) + 1.0f).to_vector();
    EXPECT_EQ(plusOne[0], float(maxAt[0] + 1)) << "n = " << n;
    std::vector<float> low(n, -INFINITY);
    EXPECT_EQ(argmax(Tensor::from(low, {n}, *device)).item<int32_t>(), 0) << "n = " << n;
  }
}

TEST_P(LargeReductionOnEveryDevice, ArgmaxPast2To24IsExact) {
  int64_t n = (int64_t(1) << 24) + 2;
  std::vector<float> xs(n, 0.0f);
  xs[16777217] = 1.0f;
  Tensor x = Tensor::from(xs, {n}, *device);
  EXPECT_EQ(argmax(x).item<int32_t>(), 16777217);
}

TEST_P(LargeReductionOnEveryDevice, IndexSelectRowPast2To24IsExact) {
  int64_t n = (int64_t(1) << 24) + 2;
  std::vector<float> xs(n, 0.0f);
  xs[16777216] = 2.0f;
  xs[16777217] = 1.0f;
  Tensor x = Tensor::from(xs, {n, 1}, *device);
  EXPECT_EQ(index_select(x, 0, {16777217}).item<float>(), 1.0f);
  EXPECT_EQ(index_select(x, 0, Tensor::from(std::vector<int32_t>{16777217}, {1}))
                .item<float>(),
            1.0f);
}

TEST_P(LargeReductionOnEveryDevice, SumsPast2To31Elements) {
  // A computed 2^31-element operand: no buffer that large exists, the
  // iteration space is. The CPU sums it exactly (a cascade of f32 sums);
  // Vulkan indexes with 32 bits and must refuse.
  exactOrLimit([&] { return sum(Tensor::full({int64_t(1) << 31}, 1.0f, *device) * 2.0f)
                                .item<float>(); },
               4294967296.0, isCpu(), "sum of 2^31 twos");
  if (!isCpu()) {
    // An elementwise kernel over 2^32 elements is refused before it is
    // configured (its workgroup size once came out as 0 and the error said
    // only that), naming the limit.
    try {
      (Tensor::zeros({int64_t(1) << 32}, *device) + 1.0f).to_vector<float>();
      ADD_FAILURE() << "2^32 elements ran on " << device->name();
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("beyond the 2^31 elements"), std::string::npos)
          << e.what();
    }
    return;
  }
  EXPECT_EQ(sum(Tensor::full({1 << 16, 1 << 16}, 1.0f, *device)).item<float>(), 4294967296.0f);
  std::vector<float> rows = sum(Tensor::full({3, 1}, 1.0f, *device).broadcast_to({3, 1 << 30}),
                                {1})
                                .to_vector<float>();
  EXPECT_EQ(rows, (std::vector<float>(3, 1073741824.0f)));
}

TEST_P(LargeReductionOnEveryDevice, MatmulOf2To31ProductsIsNotRefused) {
  // M * N * K = 2^31 products, every index far below 2^31: the 32-bit
  // index limit is about tensors, not about the work.
  Tensor a = Tensor::full({1024, 2048}, 1.0f, *device), b = Tensor::full({2048, 1024}, 0.5f);
  std::vector<float> c = matmul(a, b).to_vector<float>();
  ASSERT_EQ(c.size(), size_t(1) << 20);
  EXPECT_EQ(c.front(), 1024.0f);
  EXPECT_EQ(c.back(), 1024.0f);
}

TEST_P(LargeReductionOnEveryDevice, IndexSelectPastTheI32Range) {
  Tensor x = Tensor::from({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2}, *device);
  // A list is checked exactly, never wrapped to i32.
  for (int64_t bad : {int64_t(3000000000), int64_t(-3000000000), int64_t(1) << 40, int64_t(1) << 32})
    EXPECT_THROW(index_select(x, 0, {2, bad}), Error) << bad;
  // i32 indices computed from floats beyond the range saturate, then the
  // kernel clamps them into the table.
  Tensor big = Tensor::from({1e10f, -1e10f, NAN}, {3}).to(DType::i32);
  EXPECT_EQ(big.to_vector<int32_t>(), (std::vector<int32_t>{INT32_MAX, INT32_MIN, 0}));
  EXPECT_EQ(index_select(x, 0, big).to_vector<float>(),
            (std::vector<float>{8, 9, 0, 1, 0, 1}));
}

TEST_P(LargeReductionOnEveryDevice, AccessorsReadTheElementTypeExactly) {
  Tensor ints = Tensor::from(std::vector<int32_t>{16777217, -5, INT32_MAX}, {3}, *device);
  EXPECT_EQ(ints.dtype(), DType::i32);
  EXPECT_EQ(ints.to_vector<int32_t>(), (std::vector<int32_t>{16777217, -5, INT32_MAX}));
  EXPECT_EQ(ints.slice(0, 0, 1).item<int32_t>(), 16777217);
  // A lossy read is an error that names the right accessor.
  try {
    ints.to_vector<float>();
    ADD_FAILURE() << "to_vector<float>() read an i32 tensor";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("to_vector<int32_t>()"), std::string::npos) << e.what();
  }
  Tensor x = Tensor::from({-1.5f, 0.0f, 2.0f}, {3}, *device);
  EXPECT_EQ(gt(x, Tensor::scalar(0.0f)).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(gt(x, Tensor::scalar(0.0f)).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 1}));
  EXPECT_THROW(x.to_vector<bool>(), Error);
  EXPECT_THROW(x.to_vector<int32_t>(), Error);
  std::vector<half> halves = x.to(DType::f16).to_vector<half>();
  ASSERT_EQ(halves.size(), 3u);
  EXPECT_EQ(halves[0].bits, 0xBE00); // -1.5 in binary16
  EXPECT_EQ(float(halves[2]), 2.0f);
  EXPECT_THROW(x.to_vector<half>(), Error);
  EXPECT_EQ(x.to(DType::f16).to_vector<float>(), (std::vector<float>{-1.5f, 0.0f, 2.0f}));
}

KILN_ON_EVERY_DEVICE(LargeReductionOnEveryDevice);
} // namespace
