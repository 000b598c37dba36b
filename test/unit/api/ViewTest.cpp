// Views (transpose, permute, reshape, broadcast_to, slice) on every device:
// numerics against a host reference, folding into one kernel, and errors at
// the user's line.

#include "TestUtil.h"

using namespace kiln;
using kiln::test::allClose;

namespace {
class ViewOnEveryDevice : public kiln::test::OnEveryDevice {};

std::vector<double> widen(const std::vector<float> &v) { return {v.begin(), v.end()}; }

TEST_P(ViewOnEveryDevice, TransposeAndPermute) {
  Tensor x = Tensor::randn({7, 13}, *device);
  std::vector<float> xs = x.to_vector<float>();
  std::vector<double> want;
  for (int j = 0; j < 13; ++j)
    for (int i = 0; i < 7; ++i)
      want.push_back(xs[i * 13 + j]);
  EXPECT_TRUE(allClose(x.transpose(0, 1).to_vector<float>(), want));

  Tensor y = Tensor::randn({2, 3, 5}, *device);
  std::vector<float> ys = y.to_vector<float>();
  std::vector<double> permuted; // [5, 2, 3]
  for (int c = 0; c < 5; ++c)
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b)
        permuted.push_back(ys[(a * 3 + b) * 5 + c]);
  EXPECT_EQ(y.permute({2, 0, 1}).shape(), (Shape{5, 2, 3}));
  EXPECT_TRUE(allClose(y.permute({-1, 0, 1}).to_vector<float>(), permuted));
}

// Views that regroup dimensions, read along rows of 8 or more (the CPU's
// row form, BoundedIndex.cpp): an attention head's k sliced from a fused
// projection, split into heads and transposed; a permutation whose rows
// read with a stride; rows of 13 read from a [26, 13]-shaped regrouping
// of a 338-element input (ragged against 8 and 16 lanes).
TEST_P(ViewOnEveryDevice, RegroupedViewsReadAlongRows) {
  Tensor qkv = Tensor::randn({24, 1, 3 * 40}, *device);
  std::vector<float> xs = qkv.to_vector<float>();
  std::vector<double> want; // [5 heads, 24 tokens, 8] of columns 40..79
  for (int h = 0; h < 5; ++h)
    for (int t = 0; t < 24; ++t)
      for (int e = 0; e < 8; ++e)
        want.push_back(2.0 * xs[t * 120 + 40 + h * 8 + e] + 1.0);
  Tensor k = qkv.slice(2, 40, 80).reshape({24, 5, 8}).transpose(0, 1);
  EXPECT_TRUE(allClose((k * Tensor::scalar(2.0f) + Tensor::scalar(1.0f)).to_vector<float>(), want,
                       1e-6));

  Tensor y = Tensor::randn({9, 12, 10}, *device);
  std::vector<float> ys = y.to_vector<float>();
  std::vector<double> permuted; // [10, 9, 12]
  for (int c = 0; c < 10; ++c)
    for (int a = 0; a < 9; ++a)
      for (int b = 0; b < 12; ++b)
        permuted.push_back(-ys[(a * 12 + b) * 10 + c]);
  EXPECT_TRUE(allClose((-y.permute({2, 0, 1})).to_vector<float>(), permuted));

  Tensor z = Tensor::randn({2, 13, 13}, *device);
  std::vector<float> zs = z.to_vector<float>();
  std::vector<double> regrouped; // [13, 26]: transpose of the [26, 13] reshape
  for (int c = 0; c < 13; ++c)
    for (int r = 0; r < 26; ++r)
      regrouped.push_back(zs[r * 13 + c]);
  Tensor zt = z.reshape({26, 13}).transpose(0, 1);
  EXPECT_TRUE(allClose((zt + Tensor::scalar(0.0f)).to_vector<float>(), regrouped));
}

TEST_P(ViewOnEveryDevice, ReshapeAndBroadcastTo) {
  Tensor x = Tensor::randn({6, 4}, *device);
  std::vector<float> xs = x.to_vector<float>();
  Tensor r = x.reshape({3, -1});
  EXPECT_EQ(r.shape(), (Shape{3, 8}));
  EXPECT_TRUE(allClose(r.to_vector<float>(), widen(xs)));
  Tensor b = Tensor::randn({1, 1000}, *device).broadcast_to({3, 1000});
  std::vector<float> bs = b.to_vector<float>();
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(bs[i], bs[2000 + i]);
}

TEST_P(ViewOnEveryDevice, SlicesWithSteps) {
  Tensor x = Tensor::randn({1023}, *device);
  std::vector<float> xs = x.to_vector<float>();
  auto expect = [&](Tensor s, int64_t start, int64_t step, int64_t count) {
    std::vector<double> want;
    for (int64_t k = 0; k < count; ++k)
      want.push_back(xs[start + k * step]);
    EXPECT_EQ(s.numel(), count);
    EXPECT_TRUE(allClose(s.to_vector<float>(), want)) << start << " " << step;
  };
  expect(x.slice(0, 3, 100, 7), 3, 7, 14);
  expect(x.slice(0, std::nullopt, std::nullopt, -1), 1022, -1, 1023); // reversed
  expect(x.slice(0, -10, std::nullopt), 1013, 1, 10);
  expect(x.slice(0, 500, 400, -3), 500, -3, 34);
  EXPECT_EQ(x.slice(0, 10, 5).numel(), 0);
}

TEST_P(ViewOnEveryDevice, ViewsFoldIntoOneKernel) {
  // y = exp(x^T) + z[::2, ::-1] : views feed a fused elementwise chain.
  Tensor x = Tensor::randn({33, 17}, *device);
  Tensor z = Tensor::randn({34, 33});
  Tensor y = kiln::exp(x.transpose(0, 1)) + z.slice(0, std::nullopt, std::nullopt, 2)
                                              .slice(1, std::nullopt, std::nullopt, -1);
  reset_stats();
  std::vector<float> got = y.to_vector<float>();
  EXPECT_EQ(stats().kernels_dispatched, 1u);
  std::vector<float> xs = x.to_vector<float>(), zs = z.to_vector<float>();
  std::vector<double> want;
  for (int i = 0; i < 17; ++i)
    for (int j = 0; j < 33; ++j)
      want.push_back(std::exp(double(xs[j * 17 + i])) + zs[(2 * i) * 33 + (32 - j)]);
  EXPECT_TRUE(allClose(got, want));
}

TEST_P(ViewOnEveryDevice, OneInputThroughTwoViews) {
  Tensor x = Tensor::randn({16, 16}, *device);
  std::vector<float> xs = x.to_vector<float>();
  std::vector<double> want;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      want.push_back(double(xs[i * 16 + j]) - xs[j * 16 + i]); // antisymmetric part
  reset_stats();
  EXPECT_TRUE(allClose((x - x.transpose(0, 1)).to_vector<float>(), want));
  EXPECT_EQ(stats().kernels_dispatched, 1u);
}

TEST_P(ViewOnEveryDevice, PadAndConcat) {
  Tensor x = Tensor::randn({3, 5}, *device);
  Tensor y = Tensor::randn({3, 2});
  std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
  // pad: 1 row above, 2 columns right, filled with -1.
  std::vector<float> p = pad(x, {1, 0}, {0, 2}, -1.0f).to_vector<float>();
  ASSERT_EQ(p.size(), 4u * 7u);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 7; ++j)
      EXPECT_EQ(p[i * 7 + j], i == 0 || j >= 5 ? -1.0f : xs[(i - 1) * 5 + j]) << i << "," << j;
  // concat along columns, fused with arithmetic on both sides: one kernel.
  reset_stats();
  std::vector<float> c = (concat({x * 2.0f, kiln::exp(y)}, -1) + 1.0f).to_vector<float>();
  EXPECT_EQ(stats().kernels_dispatched, 1u);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 7; ++j) {
      double want = j < 5 ? 2.0 * xs[i * 5 + j] + 1 : std::exp(double(ys[i * 2 + j - 5])) + 1;
      EXPECT_NEAR(c[i * 7 + j], want, 1e-5 * std::abs(want) + 1e-6) << i << "," << j;
    }
  // along rows, three inputs
  std::vector<float> r = concat({x, x, x.slice(0, 0, 1)}, 0).to_vector<float>();
  ASSERT_EQ(r.size(), 7u * 5u);
  for (int j = 0; j < 5; ++j)
    EXPECT_EQ(r[6 * 5 + j], xs[j]);
  EXPECT_THROW(concat({x, Tensor::zeros({2, 5})}, 1), Error);
}

// More parts than a kernel may bind (lavapipe: 32 buffers): split into
// concats that fit, the values in order.
TEST_P(ViewOnEveryDevice, ConcatOfMorePartsThanAKernelBinds) {
  std::vector<Tensor> parts;
  std::vector<std::vector<float>> rows(2);
  for (int p = 0; p < 70; ++p) {
    int64_t width = p % 3 + 1;
    std::vector<float> v(2 * width);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = float(p * 10 + static_cast<int>(i));
    for (int r = 0; r < 2; ++r)
      rows[r].insert(rows[r].end(), v.begin() + r * width, v.begin() + (r + 1) * width);
    parts.push_back(Tensor::from(v, {2, width}, *device) + 0.0f * static_cast<float>(p));
  }
  std::vector<float> want = rows[0];
  want.insert(want.end(), rows[1].begin(), rows[1].end());
  Tensor joined = concat(parts, 1);
  EXPECT_EQ(joined.shape(), (Shape{2, static_cast<int64_t>(rows[0].size())}));
  EXPECT_EQ(joined.to_vector<float>(), want);
}

// SqueezeNet's fire module: two branches' bias and ReLU joined along the
// channels (the CPU writes each input's rows in place), three inputs along
// the columns of a 3-D tensor, and one straight from inputs along rows.
TEST_P(ViewOnEveryDevice, ConcatOfComputedInputs) {
  Tensor a = Tensor::randn({2, 3, 4, 9}, *device), b = Tensor::randn({2, 5, 4, 9}, *device);
  Tensor ba = Tensor::randn({1, 3, 1, 1}, *device), bb = Tensor::randn({1, 5, 1, 1}, *device);
  realize({a, b, ba, bb});
  std::vector<float> as = a.to_vector<float>(), bs = b.to_vector<float>();
  std::vector<float> bas = ba.to_vector<float>(), bbs = bb.to_vector<float>();
  std::vector<float> got = concat({relu(a + ba), relu(b + bb)}, 1).to_vector<float>();
  ASSERT_EQ(got.size(), 2u * 8 * 4 * 9);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 8; ++c)
      for (int p = 0; p < 36; ++p) {
        float want = c < 3 ? std::max(as[(n * 3 + c) * 36 + p] + bas[c], 0.0f)
                           : std::max(bs[(n * 5 + c - 3) * 36 + p] + bbs[c - 3], 0.0f);
        ASSERT_EQ(got[(n * 8 + c) * 36 + p], want) << n << "," << c << "," << p;
      }
  Tensor x = Tensor::randn({2, 3, 4}, *device);
  std::vector<float> xs = x.to_vector<float>();
  std::vector<float> cols = concat({x * 2.0f, x.slice(2, 1, 3), -x}, 2).to_vector<float>();
  ASSERT_EQ(cols.size(), 2u * 3 * 10);
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 10; ++j) {
      float want = j < 4 ? xs[r * 4 + j] * 2.0f : j < 6 ? xs[r * 4 + j - 3] : -xs[r * 4 + j - 6];
      ASSERT_EQ(cols[r * 10 + j], want) << r << "," << j;
    }
}

TEST_P(ViewOnEveryDevice, IndexSelect) {
  Tensor x = Tensor::randn({5, 7}, *device);
  std::vector<float> xs = x.to_vector<float>();
  // Rows 4, 0, 4, 2, then columns 6 and 1 of x * 2 + 1 (the arithmetic fuses
  // after the gather).
  std::vector<float> rows = index_select(x, 0, {4, 0, 4, 2}).to_vector<float>();
  std::vector<int64_t> picked = {4, 0, 4, 2};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 7; ++j)
      ASSERT_EQ(rows[i * 7 + j], xs[picked[i] * 7 + j]);
  std::vector<float> cols = (index_select(x, -1, {6, 1}) * 2.0f + 1.0f).to_vector<float>();
  for (int i = 0; i < 5; ++i) {
    EXPECT_FLOAT_EQ(cols[i * 2], xs[i * 7 + 6] * 2 + 1);
    EXPECT_FLOAT_EQ(cols[i * 2 + 1], xs[i * 7 + 1] * 2 + 1);
  }
  // Embedding lookup of a computed table: the table is its own kernel.
  std::vector<float> e = index_select(kiln::exp(x), 0, {3}).to_vector<float>();
  EXPECT_NEAR(e[0], std::exp(double(xs[21])), 1e-5 * std::exp(double(xs[21])));
  EXPECT_THROW(index_select(x, 0, Tensor::zeros({2})), Error);
  // An index outside the table is an error, as in PyTorch: a list at the
  // call, and indices whose data is known when they are used.
  EXPECT_THROW(index_select(x, 0, {1, 5}), Error);
  EXPECT_THROW(index_select(x, 1, {-1}), Error);
  try {
    index_select(x, 0, Tensor::from(std::vector<int32_t>{0, 2, 7}, {3}, *device));
    FAIL() << "index 7 of 5 rows was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("index 7 (element 2) is outside 0 <= i < 5"),
              std::string::npos)
        << e.what();
  }
  // Only the elements that index are checked: a slice of the data leaves
  // the rest (99) alone.
  Tensor some = Tensor::from(std::vector<int32_t>{4, 1, 99}, {3}, *device).slice(0, 0, 2);
  EXPECT_EQ(index_select(x, 0, some).shape(), (Shape{2, 7}));
}

KILN_ON_EVERY_DEVICE(ViewOnEveryDevice);

TEST(View, ErrorsNameTheLine) {
  Tensor x = Tensor::zeros({4, 3});
  EXPECT_THROW(x.permute({0, 0}), Error);
  EXPECT_THROW(x.transpose(0, 2), Error);
  EXPECT_THROW(x.broadcast_to({4, 4}), Error);
  EXPECT_THROW(x.slice(1, 0, 3, 0), Error);
  unsigned line = __LINE__ + 2;
  try {
    (void)x.reshape({5, -1});
    FAIL();
  } catch (const Error &error) {
    std::string text = error.what();
    EXPECT_NE(text.find("ViewTest.cpp:" + std::to_string(line)), std::string::npos) << text;
    EXPECT_NE(text.find("cannot view [4, 3] (12 elements) as [5, -1]"), std::string::npos)
        << text;
  }
}
} // namespace
