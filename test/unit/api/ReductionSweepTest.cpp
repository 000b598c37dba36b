// The reduction sweep: row lengths at every boundary that changes the code
// path (subgroup and workgroup sizes, columns kept in registers, cascade
// blocks, loop budgets), split over 1 to 4 reduced dimensions, rows and
// columns, f32 and f16, on every device, against a float64 reference.
// CI runs lengths up to 2^20 + 3; KILN_FULL_SWEEP=1 adds 2^22 + 1 and 2^24.

#include "TestUtil.h"

#include <cstdlib>
#include <random>

using namespace kiln;

namespace {
class ReductionSweep : public kiln::test::OnEveryDevice {};

std::vector<int64_t> sweepLengths() {
  std::vector<int64_t> lengths = {1,    2,    7,    8,     9,     31,    32,    33,
                                  63,   64,   65,   127,   255,   256,   257,   511,
                                  1023, 1024, 1025, 4095,  4096,  4097,  16384, 65535,
                                  65536, 65537, 262147, (1 << 20) + 3};
  if (const char *full = std::getenv("KILN_FULL_SWEEP"); full && std::string(full) == "1") {
    lengths.push_back((1 << 22) + 1);
    lengths.push_back(1 << 24);
  }
  return lengths;
}

/// `length` split over `dims` dimensions (the innermost take the factors of
/// two first), so a reduction over all of them reads the same elements.
Shape splitInto(int64_t length, int dims) {
  Shape shape(dims, 1);
  int64_t rest = length;
  for (int d = dims - 1; d > 0 && rest % 2 == 0; --d) {
    int64_t f = 1;
    while (rest % 2 == 0 && f < 64) {
      f *= 2;
      rest /= 2;
    }
    shape[d] = f;
  }
  shape[0] = rest;
  return shape;
}

struct Expect {
  double sum = 0, absSum = 0, max = -INFINITY, min = INFINITY;
};

TEST_P(ReductionSweep, RowsAndColumnsOfEveryLength) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t length : sweepLengths()) {
    // One row past 2^22: three rows of 2^24 floats would exceed lavapipe's
    // 128 MiB storage-buffer range (a clear error, tested elsewhere).
    const int rows = length > (1 << 22) ? 1 : 3;
    for (DType dtype : {DType::f32, DType::f16}) {
      if (dtype == DType::f16 && length > (1 << 20))
        continue; // the f16 path is the f32 one after a widening load
      std::vector<float> xs(rows * length);
      for (float &v : xs)
        v = dist(rng);
      Tensor x = Tensor::from(xs, {rows, length}, *device);
      if (dtype == DType::f16) {
        x = x.to(DType::f16);
        xs = x.to_vector<float>(); // the reference sees the rounded values
      }
      std::vector<Expect> want(rows);
      for (int r = 0; r < rows; ++r)
        for (int64_t c = 0; c < length; ++c) {
          double v = xs[r * length + c];
          want[r].sum += v;
          want[r].absSum += std::abs(v);
          want[r].max = std::max(want[r].max, v);
          want[r].min = std::min(want[r].min, v);
        }
      double rtol = dtype == DType::f16 ? 1e-2 : 1e-5;
      int dims = 1 + static_cast<int>(length % 4); // 1 to 4 reduced dimensions
      Shape split = splitInto(length, dims);
      Shape shape = {rows};
      std::vector<int64_t> axes;
      for (int d = 0; d < dims; ++d) {
        shape.push_back(split[d]);
        axes.push_back(d + 1);
      }
      Tensor view = x.reshape(shape);
      std::string what = std::string(dtype_name(dtype)) + " rows of " + std::to_string(length) +
                         " over " + std::to_string(dims) + " dims";
      std::vector<float> s = sum(view, axes).to(DType::f32).to_vector<float>();
      std::vector<float> m = mean(view, axes).to(DType::f32).to_vector<float>();
      std::vector<float> hi = amax(view, axes).to(DType::f32).to_vector<float>();
      std::vector<float> lo = amin(view, axes).to(DType::f32).to_vector<float>();
      ASSERT_EQ(s.size(), size_t(rows)) << what;
      for (int r = 0; r < rows; ++r) {
        // Summation error grows with the sum of magnitudes, not the sum.
        double tol = rtol * want[r].absSum + 1e-6;
        EXPECT_NEAR(s[r], want[r].sum, tol) << what << ", row " << r;
        EXPECT_NEAR(m[r], want[r].sum / length, tol / length + 1e-6) << what << ", row " << r;
        EXPECT_EQ(hi[r], float(want[r].max)) << what << ", row " << r;
        EXPECT_EQ(lo[r], float(want[r].min)) << what << ", row " << r;
      }
      // The other way round: the long dimension reduced, rows kept (a
      // column reduction, strided reads).
      if (dtype == DType::f32) {
        Tensor t = x.transpose(0, 1); // [length, rows]
        std::vector<float> cs = sum(t, {0}).to_vector<float>();
        std::vector<float> cmax = amax(t, {0}).to_vector<float>();
        for (int r = 0; r < rows; ++r) {
          EXPECT_NEAR(cs[r], want[r].sum, rtol * want[r].absSum + 1e-6)
              << "columns of " << length << ", column " << r;
          EXPECT_EQ(cmax[r], float(want[r].max)) << "columns of " << length << ", column " << r;
        }
      }
    }
  }
}

KILN_ON_EVERY_DEVICE(ReductionSweep);
} // namespace
