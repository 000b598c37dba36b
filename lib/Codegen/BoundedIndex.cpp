//===- BoundedIndex.cpp - index expressions simplified with dim ranges ----===//
//
// MLIR's affine simplification knows nothing of a dimension's range, so
// `(c * HW + p) floordiv HW` stays a division although p < HW makes it c.
// Builders that know their loop ranges (the CPU GEMM and depthwise
// epilogues, flat and row kernels read as rows) use this to turn the
// broadcast indices of bias and residual reads, and the indices of views
// that regroup dimensions, back into plain coordinates: no division per
// element, and a column loop LLVM can vectorize.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilding.h"

#include "mlir/IR/AffineExprVisitor.h"

#include <optional>

using namespace mlir;
using namespace kiln;

namespace {
using Range = std::pair<int64_t, int64_t>; // inclusive

int64_t floorDivide(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

std::optional<Range> rangeOf(AffineExpr e, ArrayRef<int64_t> upper) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return Range{c.getValue(), c.getValue()};
  if (auto d = dyn_cast<AffineDimExpr>(e)) {
    if (d.getPosition() >= upper.size() || upper[d.getPosition()] < 1)
      return std::nullopt;
    return Range{0, upper[d.getPosition()] - 1};
  }
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return std::nullopt;
  std::optional<Range> l = rangeOf(bin.getLHS(), upper);
  if (!l)
    return std::nullopt;
  auto rc = dyn_cast<AffineConstantExpr>(bin.getRHS());
  switch (e.getKind()) {
  case AffineExprKind::Add: {
    std::optional<Range> r = rangeOf(bin.getRHS(), upper);
    if (!r)
      return std::nullopt;
    return Range{l->first + r->first, l->second + r->second};
  }
  case AffineExprKind::Mul: {
    if (!rc)
      return std::nullopt;
    int64_t k = rc.getValue();
    return k >= 0 ? Range{l->first * k, l->second * k} : Range{l->second * k, l->first * k};
  }
  case AffineExprKind::FloorDiv:
    if (!rc || rc.getValue() <= 0)
      return std::nullopt;
    return Range{floorDivide(l->first, rc.getValue()), floorDivide(l->second, rc.getValue())};
  case AffineExprKind::Mod:
    if (!rc || rc.getValue() <= 0)
      return std::nullopt;
    if (l->first >= 0 && l->second < rc.getValue())
      return l;
    return Range{0, rc.getValue() - 1};
  default:
    return std::nullopt;
  }
}

void summands(AffineExpr e, SmallVectorImpl<AffineExpr> &out) {
  if (e.getKind() == AffineExprKind::Add) {
    auto bin = cast<AffineBinaryOpExpr>(e);
    summands(bin.getLHS(), out);
    summands(bin.getRHS(), out);
    return;
  }
  out.push_back(e);
}

/// The constant factor of a summand (c for `x * c`, the value of a
/// constant, else 1).
int64_t factorOf(AffineExpr e) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return c.getValue();
  if (e.getKind() == AffineExprKind::Mul)
    if (auto c = dyn_cast<AffineConstantExpr>(cast<AffineBinaryOpExpr>(e).getRHS()))
      return c.getValue();
  return 1;
}

AffineExpr rewrite(AffineExpr e, ArrayRef<int64_t> upper) {
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return e;
  AffineExpr lhs = rewrite(bin.getLHS(), upper), rhs = rewrite(bin.getRHS(), upper);
  auto rc = dyn_cast<AffineConstantExpr>(rhs);
  bool divides = (e.getKind() == AffineExprKind::FloorDiv || e.getKind() == AffineExprKind::Mod) &&
                 rc && rc.getValue() > 0;
  if (divides) {
    // lhs = multiple + rest, the multiple's terms all divisible by c: when
    // rest lies in [0, c), lhs floordiv c = multiple floordiv c and
    // lhs mod c = rest.
    int64_t c = rc.getValue();
    SmallVector<AffineExpr> terms;
    summands(lhs, terms);
    AffineExpr zero = getAffineConstantExpr(0, e.getContext());
    AffineExpr multiple = zero, rest = zero;
    for (AffineExpr t : terms) {
      if (factorOf(t) % c == 0)
        multiple = multiple + t;
      else
        rest = rest + t;
    }
    std::optional<Range> r = rangeOf(rest, upper);
    if (r && r->first >= 0 && r->second < c)
      return e.getKind() == AffineExprKind::Mod ? rest : multiple.floorDiv(c);
    // lhs = g B + rest with g dividing c and rest in [0, g): lhs floordiv c
    // = B floordiv (c / g) and lhs mod c = g (B mod (c / g)) + rest (a row
    // of 64 in a flat index: (64 r + i) floordiv 8192 = r floordiv 128).
    for (AffineExpr candidate : terms) {
      int64_t g = factorOf(candidate);
      if (g <= 1 || c % g != 0 || isa<AffineConstantExpr>(candidate))
        continue;
      AffineExpr scaled = zero, small = zero;
      for (AffineExpr t : terms) {
        int64_t f = factorOf(t);
        if (f % g == 0 && !isa<AffineConstantExpr>(t))
          scaled = scaled + (f == 1 ? t : cast<AffineBinaryOpExpr>(t).getLHS() * (f / g));
        else
          small = small + t;
      }
      std::optional<Range> s = rangeOf(small, upper);
      if (!s || s->first < 0 || s->second >= g)
        continue;
      return e.getKind() == AffineExprKind::Mod ? (scaled % (c / g)) * g + small
                                                : scaled.floorDiv(c / g);
    }
  }
  switch (e.getKind()) {
  case AffineExprKind::Add: return lhs + rhs;
  case AffineExprKind::Mul: return lhs * rhs;
  case AffineExprKind::FloorDiv: return lhs.floorDiv(rhs);
  case AffineExprKind::CeilDiv: return lhs.ceilDiv(rhs);
  case AffineExprKind::Mod: return lhs % rhs;
  default: return e;
  }
}
} // namespace

bool kiln::dividesIndex(AffineExpr e) {
  bool found = false;
  e.walk([&](AffineExpr sub) {
    found |= sub.getKind() == AffineExprKind::FloorDiv || sub.getKind() == AffineExprKind::Mod ||
             sub.getKind() == AffineExprKind::CeilDiv;
  });
  return found;
}

/// Whether dim `dim` appears in `e` only in sums and products by constants.
static bool linearIn(AffineExpr e, unsigned dim) {
  auto binary = dyn_cast<AffineBinaryOpExpr>(e);
  if (!binary)
    return true;
  if (e.getKind() == AffineExprKind::Add ||
      (e.getKind() == AffineExprKind::Mul && isa<AffineConstantExpr>(binary.getRHS())))
    return linearIn(binary.getLHS(), dim) && linearIn(binary.getRHS(), dim);
  return !binary.getLHS().isFunctionOfDim(dim) && !binary.getRHS().isFunctionOfDim(dim);
}

std::optional<AffineExpr> kiln::simplifyWithinRun(AffineExpr e, unsigned dim,
                                                  ArrayRef<int64_t> upper) {
  AffineExpr simplified = simplifyWithBounds(e, upper);
  if (!linearIn(simplified, dim))
    return std::nullopt;
  return simplified;
}

AffineExpr kiln::simplifyWithBounds(AffineExpr e, ArrayRef<int64_t> upper) {
  unsigned dims = static_cast<unsigned>(upper.size());
  // Twice: a rewrite can expose another (a mod over a floordiv just solved).
  for (int pass = 0; pass < 2; ++pass)
    e = simplifyAffineExpr(rewrite(simplifyAffineExpr(e, dims, 0), upper), dims, 0);
  return e;
}
