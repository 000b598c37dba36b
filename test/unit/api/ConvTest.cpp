// Convolution and pooling on every device: exact on small integers (stride,
// padding, dilation, groups, depthwise), pooling with padding, and a CNN
// block (conv, batch norm, ReLU, max pooling) with its kernel count.

#include "TestUtil.h"

#include <random>

using namespace kiln;
using kiln::test::allClose;

namespace {
class ConvOnEveryDevice : public kiln::test::OnEveryDevice {};

std::vector<float> smallIntegers(size_t n, std::mt19937 &rng) {
  std::uniform_int_distribution<int> dist(-3, 3);
  std::vector<float> v(n);
  for (float &x : v)
    x = float(dist(rng));
  return v;
}

struct ConvCase {
  int64_t n, c, h, w, cout, kh, kw;
  std::array<int64_t, 2> stride, padding, dilation;
  int64_t groups;
};

std::vector<double> convReference(const std::vector<float> &x, const std::vector<float> &f,
                                  const ConvCase &k, int64_t ho, int64_t wo) {
  std::vector<double> y(k.n * k.cout * ho * wo, 0);
  int64_t cg = k.c / k.groups, per = k.cout / k.groups;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t co = 0; co < k.cout; ++co)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) {
          double acc = 0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t a = 0; a < k.kh; ++a)
              for (int64_t b = 0; b < k.kw; ++b) {
                int64_t hh = i * k.stride[0] - k.padding[0] + a * k.dilation[0];
                int64_t ww = j * k.stride[1] - k.padding[1] + b * k.dilation[1];
                if (hh < 0 || hh >= k.h || ww < 0 || ww >= k.w)
                  continue;
                int64_t ch = (co / per) * cg + ci;
                acc += double(x[((n * k.c + ch) * k.h + hh) * k.w + ww]) *
                       f[((co * cg + ci) * k.kh + a) * k.kw + b];
              }
          y[((n * k.cout + co) * ho + i) * wo + j] = acc;
        }
  return y;
}

TEST_P(ConvOnEveryDevice, ExactOnSmallIntegers) {
  std::mt19937 rng(3);
  ConvCase cases[] = {
      {2, 3, 7, 9, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 4, 13, 8, 6, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2},
      {1, 5, 7, 7, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 5}, // depthwise
      {1, 1, 1, 1, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},
      // 16+ output channels per group: the implicit-GEMM form on GPUs.
      {2, 8, 9, 11, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 6, 10, 10, 36, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2},
      {1, 3, 12, 12, 70, 5, 3, {1, 2}, {2, 0}, {2, 1}, 1},
      // Rows of 16+ outputs at stride 1 along them: the CPU packs its panel
      // by runs of an output row (two images, padding, a dilated window,
      // groups, a stride along the height only).
      {2, 3, 10, 37, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 4, 9, 40, 8, 3, 3, {1, 1}, {0, 2}, {1, 2}, 2},
      {1, 2, 6, 20, 4, 1, 3, {2, 1}, {0, 1}, {1, 1}, 1},
      // Rows of 16+ outputs at a stride along them (packed per column, by
      // tables): a ResNet-like 7x7 stem, a 3x3 at stride 2, stride 3 with
      // dilation.
      {2, 3, 11, 40, 8, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1},
      {1, 3, 20, 38, 8, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1},
      {1, 2, 9, 50, 4, 3, 3, {1, 3}, {1, 2}, {1, 2}, 1},
      // Several images with groups: one GEMM per (image, group), in each
      // form (runs of a row, per-column tables, a 1x1 plain matrix, the
      // GPU's implicit GEMM).
      {3, 4, 9, 20, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},
      {2, 4, 8, 8, 8, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2},
      {3, 6, 5, 7, 12, 1, 1, {1, 1}, {0, 0}, {1, 1}, 3},
      {2, 8, 6, 6, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},
      // The CPU's direct form (output channels in whole 16-lane vectors,
      // rows of its block's pixels or more): 4 pixels x 4 vectors at a
      // stride, one vector where 32 channels do not divide, a dilated
      // window with uneven padding, a 5x3 window strided along the height,
      // rows not a whole number of blocks.
      {1, 16, 20, 21, 64, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1},
      {2, 5, 12, 19, 16, 3, 3, {1, 1}, {2, 1}, {2, 1}, 1},
      {1, 7, 15, 17, 32, 5, 3, {2, 1}, {2, 1}, {1, 1}, 1},
      // Rows in the blocks that recompute fewest pixels with AVX-512:
      // 13 in two of 7 (the second overlapping), 27 in three of 9.
      {1, 8, 13, 13, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      {1, 6, 5, 27, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
      // Its pointwise case (1x1, to a third of the channels or fewer, the
      // plane swept flat): two images in blocks of 7 pixels, 99 pixels
      // whose last block of 8 overlaps, and a plane of exactly 64.
      {2, 96, 14, 14, 32, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},
      {1, 48, 9, 11, 16, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},
      {1, 64, 8, 8, 16, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1},
  };
  for (const ConvCase &k : cases) {
    std::vector<float> xs = smallIntegers(k.n * k.c * k.h * k.w, rng);
    std::vector<float> fs = smallIntegers(k.cout * (k.c / k.groups) * k.kh * k.kw, rng);
    Tensor x = Tensor::from(xs, {k.n, k.c, k.h, k.w}, *device);
    Tensor f = Tensor::from(fs, {k.cout, k.c / k.groups, k.kh, k.kw});
    Tensor y = conv2d(x, f, k.stride, k.padding, k.dilation, k.groups);
    std::vector<float> got = y.to_vector<float>();
    std::vector<double> want = convReference(xs, fs, k, y.shape()[2], y.shape()[3]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "groups " << k.groups << " at " << i;
  }
}

// Depthwise shapes wide enough for the CPU's vector form (8 columns a
// vector): stride 1 and 2 with a tail, dilation, two filters per channel, a
// 1x7 and a 7x7 window, padding past the window's reach, rows too short
// for 8 lanes, and a 9x9 window
// (more taps than the vector form holds: built untiled). Each with a bias,
// a ReLU6 and a residual in its epilogue, as MobileNet fuses them.
TEST_P(ConvOnEveryDevice, DepthwiseExactWithEpilogue) {
  std::mt19937 rng(11);
  ConvCase cases[] = {
      {2, 6, 9, 37, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 6},
      {1, 4, 11, 40, 4, 3, 3, {2, 2}, {1, 1}, {1, 1}, 4},
      {1, 3, 9, 35, 3, 3, 3, {2, 2}, {0, 0}, {1, 1}, 3},
      {1, 3, 8, 30, 6, 5, 5, {1, 1}, {2, 2}, {1, 1}, 3},
      {1, 2, 10, 33, 2, 3, 3, {1, 1}, {2, 2}, {2, 2}, 2},
      {1, 2, 6, 31, 2, 3, 3, {1, 2}, {0, 1}, {1, 1}, 2},
      {1, 2, 5, 20, 2, 3, 3, {1, 1}, {3, 3}, {1, 1}, 2},
      {1, 2, 4, 30, 2, 1, 7, {1, 1}, {0, 3}, {1, 1}, 2},
      {1, 2, 12, 26, 2, 7, 7, {1, 1}, {3, 3}, {1, 1}, 2},
      {1, 2, 12, 26, 2, 9, 9, {1, 1}, {4, 4}, {1, 1}, 2},
      // Rows of 5 interior columns: 4 lanes, the second vector overlapping.
      {1, 2, 6, 7, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},
      {1, 3, 14, 14, 3, 3, 3, {2, 2}, {1, 1}, {1, 1}, 3},
      // Stride 2 along rows of 16+ (8 and 16 lanes, no padding, 5x5 taps,
      // 112 wide).
      {1, 2, 10, 16, 2, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2},
      {1, 2, 9, 112, 2, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2},
      {1, 2, 7, 36, 2, 3, 3, {2, 2}, {0, 0}, {1, 1}, 2},
      {2, 2, 11, 32, 4, 5, 5, {2, 2}, {2, 2}, {1, 1}, 2},
      // Small "same" planes at stride 1, swept flat in 16-lane vectors: 196
      // and 49 outputs (a last vector overlapping), exactly 16, 5x5 taps,
      // two filters per channel, and a plane that is not square.
      {2, 4, 14, 14, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4},
      {1, 3, 7, 7, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 3},
      {1, 2, 4, 4, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},
      {1, 2, 8, 12, 2, 5, 5, {1, 1}, {2, 2}, {1, 1}, 2},
      {1, 2, 7, 7, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},
      {1, 2, 5, 9, 2, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},
      // Strided planes with rows under 16, split into one padded part per
      // window row parity and column, then swept flat, or (two output rows
      // to a vector, input rows under 16: 14 -> 7, 15 -> 8 with 5x5 taps,
      // 9x13 and the 1x3 window) two rows a vector, each tap a two-source
      // shuffle: MobileNet's 28 -> 14
      // and 14 -> 7 (two filters per channel), stride 2 by 1, stride 3
      // with rows of 40 inputs, a 5x5 window, dilation along the row, a
      // plane that is not square, a 1x3 window (one row parity unused),
      // and 9 outputs (under a vector: the row sweep).
      {2, 3, 28, 28, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 3},
      {1, 4, 14, 14, 4, 3, 3, {2, 2}, {1, 1}, {1, 1}, 4},
      {1, 2, 9, 12, 2, 3, 3, {2, 1}, {1, 1}, {1, 1}, 2},
      {1, 2, 13, 40, 2, 3, 3, {3, 3}, {1, 1}, {1, 1}, 2},
      {1, 2, 15, 15, 2, 5, 5, {2, 2}, {2, 2}, {1, 1}, 2},
      {1, 2, 12, 20, 2, 3, 3, {2, 2}, {1, 2}, {1, 2}, 2},
      {1, 2, 9, 13, 2, 3, 3, {2, 2}, {0, 0}, {1, 1}, 2},
      {1, 2, 11, 11, 2, 1, 3, {2, 2}, {0, 1}, {1, 1}, 2},
      {1, 2, 6, 6, 2, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2},
  };
  for (const ConvCase &k : cases) {
    std::vector<float> xs = smallIntegers(k.n * k.c * k.h * k.w, rng);
    std::vector<float> fs = smallIntegers(k.cout * k.kh * k.kw, rng);
    std::vector<float> bs = smallIntegers(k.cout, rng);
    Tensor x = Tensor::from(xs, {k.n, k.c, k.h, k.w}, *device);
    Tensor f = Tensor::from(fs, {k.cout, 1, k.kh, k.kw}, *device);
    Tensor bias = Tensor::from(bs, {1, k.cout, 1, 1}, *device);
    Tensor conv = conv2d(x, f, k.stride, k.padding, k.dilation, k.groups) + bias;
    Tensor y = minimum(relu(conv), Tensor::full({}, 6.0f, *device));
    int64_t ho = y.shape()[2], wo = y.shape()[3];
    // A residual where the shapes allow one.
    bool residual = k.cout == k.c && ho == k.h && wo == k.w;
    // On 7x7 planes the residual is read transposed: an epilogue that is
    // not contiguous along the plane runs per element.
    bool transposed = residual && k.h == 7 && k.w == 7;
    if (residual)
      y = y + (transposed ? x.transpose(2, 3) : x);
    std::vector<float> got = y.to_vector<float>();
    std::vector<double> want = convReference(xs, fs, k, ho, wo);
    for (size_t i = 0; i < want.size(); ++i) {
      int64_t co = (i / (ho * wo)) % k.cout;
      size_t from = transposed ? (i / 49) * 49 + (i % 7) * 7 + (i % 49) / 7 : i;
      want[i] = std::min(std::max(want[i] + bs[co], 0.0), 6.0) + (residual ? xs[from] : 0);
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << k.kh << "x" << k.kw << " stride " << k.stride[0] << ","
                                 << k.stride[1] << " width " << k.w << " at " << i;
  }
}

TEST_P(ConvOnEveryDevice, PoolingWithPadding) {
  Tensor x = Tensor::randn({2, 3, 7, 9}, *device);
  std::vector<float> xs = x.to_vector<float>();
  Tensor mx = max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  Tensor av = avg_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  EXPECT_EQ(mx.shape(), (Shape{2, 3, 4, 5}));
  std::vector<double> wantMax, wantAvg;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 5; ++j) {
          double m = -INFINITY, s = 0;
          for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) {
              int h = i * 2 - 1 + a, w = j * 2 - 1 + b;
              if (h < 0 || h >= 7 || w < 0 || w >= 9)
                continue;
              double v = xs[((n * 3 + c) * 7 + h) * 9 + w];
              m = std::max(m, v);
              s += v;
            }
          wantMax.push_back(m);
          wantAvg.push_back(s / 9.0);
        }
  EXPECT_TRUE(allClose(mx.to_vector<float>(), wantMax));
  EXPECT_TRUE(allClose(av.to_vector<float>(), wantAvg));
  std::vector<double> gap;
  for (int nc = 0; nc < 6; ++nc) {
    double s = 0;
    for (int k = 0; k < 63; ++k)
      s += xs[nc * 63 + k];
    gap.push_back(s / 63);
  }
  EXPECT_TRUE(allClose(global_avg_pool2d(x).to_vector<float>(), gap));
}

// Pooling over rows wide enough for the CPU's vector form, strides 1 and
// 2, with and without padding, straight from an input and behind a bias
// and ReLU prologue (as after a convolution).
TEST_P(ConvOnEveryDevice, PoolingWideRowsWithPrologue) {
  struct Case {
    int64_t h, w, k, stride, pad;
  };
  for (const Case &c : {Case{11, 37, 3, 2, 1}, Case{9, 30, 3, 1, 1}, Case{8, 40, 2, 2, 0},
                        Case{7, 23, 3, 2, 0}}) {
    for (bool prologue : {false, true}) {
      Tensor x = Tensor::randn({2, 3, c.h, c.w}, *device);
      Tensor bias = Tensor::randn({1, 3, 1, 1}, *device);
      realize({x, bias});
      Tensor in = prologue ? relu(x + bias) : x;
      Tensor mx = max_pool2d(in, {c.k, c.k}, {c.stride, c.stride}, {c.pad, c.pad});
      Tensor av = avg_pool2d(in, {c.k, c.k}, {c.stride, c.stride}, {c.pad, c.pad});
      std::vector<float> xs = x.to_vector<float>(), bs = bias.to_vector<float>();
      int64_t oh = (c.h + 2 * c.pad - c.k) / c.stride + 1, ow = (c.w + 2 * c.pad - c.k) / c.stride + 1;
      ASSERT_EQ(mx.shape(), (Shape{2, 3, oh, ow}));
      std::vector<double> wantMax, wantAvg;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t ch = 0; ch < 3; ++ch)
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
              double m = -INFINITY, s = 0;
              for (int64_t a = 0; a < c.k; ++a)
                for (int64_t b = 0; b < c.k; ++b) {
                  int64_t h = i * c.stride - c.pad + a, w = j * c.stride - c.pad + b;
                  if (h < 0 || h >= c.h || w < 0 || w >= c.w)
                    continue;
                  double v = xs[((n * 3 + ch) * c.h + h) * c.w + w];
                  if (prologue)
                    v = std::max(double(float(v + bs[ch])), 0.0);
                  m = std::max(m, v);
                  s += v;
                }
              wantMax.push_back(m);
              wantAvg.push_back(s / double(c.k * c.k));
            }
      std::vector<float> gotMax = mx.to_vector<float>();
      for (size_t i = 0; i < gotMax.size(); ++i)
        ASSERT_EQ(gotMax[i], wantMax[i]) << c.w << " wide, stride " << c.stride << " at " << i;
      EXPECT_TRUE(allClose(av.to_vector<float>(), wantAvg, 1e-5, 1e-6));
    }
  }
}

TEST_P(ConvOnEveryDevice, CnnBlockKernelCount) {
  // conv -> batch norm -> ReLU -> 2x2 max pool: the conv, then one kernel
  // for the pooling with batch norm and ReLU fused in front of it.
  Tensor x = Tensor::randn({2, 3, 16, 16}, *device);
  Tensor w = Tensor::randn({8, 3, 3, 3});
  Tensor mean = Tensor::randn({8}), var = Tensor::rand({8}) + 0.5f;
  Tensor gamma = Tensor::randn({8}), beta = Tensor::randn({8});
  Tensor y = max_pool2d(relu(batch_norm(conv2d(x, w, {1, 1}, {1, 1}), mean, var, gamma, beta)),
                        {2, 2}, {2, 2});
  reset_stats();
  std::vector<float> got = y.to_vector<float>();
  EXPECT_EQ(stats().kernels_dispatched, 2u);

  std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>(),
                     ms = mean.to_vector<float>(), vs = var.to_vector<float>(),
                     gs = gamma.to_vector<float>(), bs = beta.to_vector<float>();
  ConvCase k{2, 3, 16, 16, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1};
  std::vector<double> conv = convReference(xs, ws, k, 16, 16);
  std::vector<double> want;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 8; ++c)
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) {
          double m = -INFINITY;
          for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) {
              double v = conv[((n * 8 + c) * 16 + 2 * i + a) * 16 + 2 * j + b];
              v = (v - ms[c]) / std::sqrt(double(vs[c]) + 1e-5) * gs[c] + bs[c];
              m = std::max(m, std::max(v, 0.0));
            }
          want.push_back(m);
        }
  EXPECT_TRUE(allClose(got, want, 1e-4, 1e-5));
}

KILN_ON_EVERY_DEVICE(ConvOnEveryDevice);

TEST(Conv, ShapeErrors) {
  EXPECT_THROW(conv2d(Tensor::zeros({1, 3, 5, 5}), Tensor::zeros({4, 2, 3, 3})), Error);
  EXPECT_THROW(conv2d(Tensor::zeros({1, 3, 2, 2}), Tensor::zeros({4, 3, 3, 3})), Error);
  EXPECT_THROW(conv2d(Tensor::zeros({3, 5, 5}), Tensor::zeros({4, 3, 3, 3})), Error);
  EXPECT_THROW(max_pool2d(Tensor::zeros({1, 1, 4, 4}), {2, 2}, {0, 1}), Error);
  EXPECT_EQ(conv2d(Tensor::zeros({1, 4, 9, 9}), Tensor::zeros({8, 1, 3, 3}), {2, 2}, {1, 1},
                   {1, 1}, 4).shape(),
            (Shape{1, 8, 5, 5}));
}
} // namespace
