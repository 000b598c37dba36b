// Accidents: inputs the API must refuse with a clear error (or
// accept and compute), never turn into another computation or a crash.

#include "TestUtil.h"

#include <cstdlib>

using namespace kiln;

namespace {
using kiln::test::messageOf;

TEST(InputChecks, NormalizationParametersMustMatchTheirDimension) {
  Tensor x = Tensor::randn({2, 4});
  Tensor g4 = Tensor::full({4}, 1.0f), b4 = Tensor::zeros({4});
  // Broadcastable, but another computation: refused as in PyTorch.
  std::string text = messageOf([&] { layer_norm(x, Tensor::full({2, 4}, 1.0f), b4); });
  EXPECT_NE(text.find("layer_norm: gamma has shape [2, 4]; it must be [4]"), std::string::npos)
      << text;
  EXPECT_THROW(layer_norm(Tensor::randn({1, 4}), Tensor::full({4, 4}, 1.0f), b4), Error);
  EXPECT_THROW(layer_norm(x, g4, Tensor::zeros({1})), Error);
  EXPECT_NO_THROW(layer_norm(x, g4, b4));

  Tensor img = Tensor::randn({1, 4, 3, 3});
  Tensor c = Tensor::full({4}, 1.0f);
  text = messageOf([&] { batch_norm(img, Tensor::zeros({2, 2}), c, c, c); });
  EXPECT_NE(text.find("batch_norm: mean has shape [2, 2]; it must be [4]"), std::string::npos)
      << text;
  EXPECT_THROW(batch_norm(img, c, c, c, Tensor::zeros({4, 1, 1})), Error);
  EXPECT_NO_THROW(batch_norm(img, c, c, c, c));
}

TEST(InputChecks, ConvolutionOfConstantsCompiles) {
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor y = conv2d(Tensor::full({1, 2, 4, 4}, 1.0f, device), Tensor::full({3, 2, 3, 3}, 2.0f),
                      {1, 1}, {1, 1});
    std::vector<float> got = y.to_vector<float>();
    ASSERT_EQ(got.size(), 48u) << device.name();
    // Corner: 2 channels x 2x2 window inside x 2; centre: 2 x 9 x 2.
    EXPECT_EQ(got[0], 16.0f) << device.name();
    EXPECT_EQ(got[5], 36.0f) << device.name();
  }
}
} // namespace

namespace {
TEST(InputChecks, OutOfMemoryIsATypedErrorAndTheProcessGoesOn) {
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor huge = Tensor::full({int64_t(1) << 39}, 1.0f, device); // 2 TiB
    try {
      huge.to_vector<float>();
      ADD_FAILURE() << device.name() << " held 2 TiB";
    } catch (const OutOfMemoryError &e) {
      EXPECT_EQ(e.bytes(), uint64_t(1) << 41) << e.what();
      EXPECT_EQ(e.device(), device.name()) << e.what();
      EXPECT_NE(std::string(e.what()).find("cannot hold 2048.00 GiB"), std::string::npos)
          << e.what();
    }
    // Nothing was lost: the same device computes the next graph.
    EXPECT_EQ((Tensor::full({4}, 1.0f, device) + 1.0f).to_vector<float>(),
              (std::vector<float>(4, 2.0f)))
        << device.name();
  }
}
} // namespace

namespace {
TEST(InputChecks, LongScalarChainsAndManyInputsFitTheBindingLimit) {
  for (const Device &device : kiln::test::availableDevices()) {
    // 31 `+ 1.0f` once bound 33 buffers where lavapipe allows 32.
    Tensor x = Tensor::zeros({8}, device);
    for (int i = 0; i < 31; ++i)
      x = x + 1.0f;
    EXPECT_EQ(x.to_vector<float>(), std::vector<float>(8, 31.0f)) << device.name();
    // 40 distinct scalars, and 40 distinct input buffers: split into
    // kernels that fit, never refused.
    Tensor y = Tensor::zeros({8}, device);
    for (int i = 0; i < 40; ++i)
      y = y + float(i);
    EXPECT_EQ(y.to_vector<float>(), std::vector<float>(8, 780.0f)) << device.name();
    Tensor z = Tensor::zeros({8}, device);
    for (int i = 0; i < 40; ++i)
      z = z + Tensor::from(std::vector<float>(8, float(i)), {8});
    EXPECT_EQ(z.to_vector<float>(), std::vector<float>(8, 780.0f)) << device.name();
  }
}

TEST(InputChecks, MatmulOfConstantsCompiles) {
  for (const Device &device : kiln::test::availableDevices())
    EXPECT_EQ(matmul(Tensor::full({4, 4}, 1.0f, device), Tensor::full({4, 4}, 2.0f))
                  .to_vector<float>(),
              std::vector<float>(16, 8.0f))
        << device.name();
}
} // namespace

namespace {
TEST(InputChecks, ShapeArithmeticNeverWraps) {
  Tensor col = Tensor::zeros({int64_t(1) << 21, 1}), row = Tensor::zeros({1, int64_t(1) << 21});
  std::string text = messageOf([&] { col + row; });
  EXPECT_NE(text.find("shape [2097152, 2097152] has too many elements"), std::string::npos)
      << text;
  Tensor tall = Tensor::zeros({int64_t(1) << 40, 1}), wide = Tensor::zeros({1, int64_t(1) << 40});
  EXPECT_THROW(tall * wide, Error);
  EXPECT_THROW(Tensor::zeros({4}).reshape({INT64_MAX, 2, -1}), Error);
  EXPECT_THROW(Tensor::zeros({4}).reshape({INT64_MAX, INT64_MAX}), Error);
  EXPECT_THROW(pad(Tensor::zeros({4}), {INT64_MAX}, {INT64_MAX}), Error);
  EXPECT_THROW(pad(Tensor::zeros({4}), {INT64_MAX - 2}, {0}), Error);
  // Steps and bounds at the int64 extremes follow Python's rules, on every
  // device (a GPU kernel's index constants are 32 bits: a step of INT64_MIN
  // once failed to lower there).
  for (const Device &device : kiln::test::availableDevices()) {
    Tensor x = Tensor::from({0, 1, 2, 3, 4}, {5}).to(device);
    EXPECT_EQ(x.slice(0, std::nullopt, std::nullopt, INT64_MAX).shape(), (Shape{1}));
    EXPECT_EQ(x.slice(0, std::nullopt, std::nullopt, INT64_MAX).to_vector<float>(),
              (std::vector<float>{0}))
        << device.name();
    EXPECT_EQ(x.slice(0, std::nullopt, std::nullopt, INT64_MIN).shape(), (Shape{1}));
    EXPECT_EQ(x.slice(0, std::nullopt, std::nullopt, INT64_MIN).to_vector<float>(),
              (std::vector<float>{4}))
        << device.name();
    EXPECT_EQ(x.slice(0, INT64_MIN, INT64_MAX).shape(), (Shape{5}));
    EXPECT_EQ(x.slice(0, INT64_MAX, INT64_MIN, -2).to_vector<float>(),
              (std::vector<float>{4, 2, 0}))
        << device.name();
  }
  Tensor empty = Tensor::zeros({0, 3});
  EXPECT_EQ(empty.slice(0, std::nullopt, std::nullopt, INT64_MAX).shape(), (Shape{0, 3}));
  EXPECT_EQ(empty.slice(0, std::nullopt, std::nullopt, INT64_MIN).shape(), (Shape{0, 3}));
}
} // namespace
