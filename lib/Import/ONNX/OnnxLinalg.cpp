//===- OnnxLinalg.cpp - Det -----------------------------------------------===//
//
// Det of [..., n, n] by cofactor expansion along the first row, unrolled
// at import: elementwise products of the matrices' entries, so it runs in
// one fused kernel per batch of matrices and needs no pivoting. It grows
// as n!, so it stops at n = 5 (120 products), past what models use Det
// for (2-D and 3-D transforms).
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
constexpr int64_t kLargestDet = 5;

/// det of the minor with rows `rows` (in order) and columns `cols` of the
/// entries `at(i, j)`.
Tensor minorDet(const std::function<Tensor(int64_t, int64_t)> &at, std::vector<int64_t> rows,
                const std::vector<int64_t> &cols) {
  if (rows.size() == 1)
    return at(rows[0], cols[0]);
  int64_t row = rows[0];
  std::vector<int64_t> rest(rows.begin() + 1, rows.end());
  std::optional<Tensor> sum;
  for (size_t c = 0; c < cols.size(); ++c) {
    std::vector<int64_t> others;
    for (size_t k = 0; k < cols.size(); ++k)
      if (k != c)
        others.push_back(cols[k]);
    Tensor term = at(row, cols[c]) * minorDet(at, rest, others);
    sum = !sum ? term : c % 2 ? *sum - term : *sum + term;
  }
  return *sum;
}

std::vector<Value> det(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const Shape &s = x.shape();
  size_t rank = s.size();
  if (rank < 2 || s[rank - 1] != s[rank - 2])
    ctx.fail("the input " + detail::shapeText(s) + " is not [..., n, n]");
  int64_t n = s[rank - 1];
  if (n < 1 || n > kLargestDet)
    ctx.fail("a determinant of " + std::to_string(n) + " x " + std::to_string(n) + " matrices",
             "Kiln expands determinants of up to " + std::to_string(kLargestDet) + " x " +
                 std::to_string(kLargestDet) + " by cofactors");
  Shape batch(s.begin(), s.end() - 2);
  Tensor wide = asF32(x);
  auto at = [&](int64_t i, int64_t j) {
    return wide.slice(int64_t(rank) - 2, i, i + 1).slice(int64_t(rank) - 1, j, j + 1).reshape(batch);
  };
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    all[size_t(i)] = i;
  Tensor d = minorDet(at, all, all);
  return single(d.dtype() == x.dtype() ? d : d.to(x.dtype()));
}
} // namespace

void onnx_import::addLinalgConverters(ConverterTable &table) { table["Det"] = det; }
