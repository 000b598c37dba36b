//===- InnerRuns.cpp - affine indices over a bounded innermost loop -------===//
//
// A flat kernel reads its inputs at affine functions of the flat result
// index o, with floordiv and mod wherever views (transposes, slices,
// reshapes) regroup dimensions; LLVM cannot vectorize a loop whose loads
// divide the induction variable. Written as o = row * D + i with i in
// [0, D), most of those divisions vanish: (64 row + i) floordiv 8192 is
// row floordiv 128 and (64 row + i) mod 64 is i. simplifyWithinRun applies
// the two rules that need the bound on i, bottom-up:
//   g B + S with 0 <= S < c and c | g: floordiv by c = (g / c) B, mod = S;
//   g B + S with 0 <= S < g and g | c: floordiv by c = B floordiv (c / g),
//                                      mod = g (B mod (c / g)) + S,
// where S gathers the terms whose range is known (i, constants, mods) and
// g is the gcd of the other terms' coefficients.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilding.h"

#include "mlir/IR/AffineExprVisitor.h"

#include <numeric>
#include <optional>

using namespace mlir;
using namespace kiln;

namespace {
struct Term {
  int64_t coefficient;
  AffineExpr factor; // null for a constant term
};

void flattenSum(AffineExpr e, int64_t scale, SmallVectorImpl<Term> &terms) {
  if (auto sum = dyn_cast<AffineBinaryOpExpr>(e); sum && e.getKind() == AffineExprKind::Add) {
    flattenSum(sum.getLHS(), scale, terms);
    flattenSum(sum.getRHS(), scale, terms);
    return;
  }
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    terms.push_back({scale * c.getValue(), AffineExpr()});
    return;
  }
  if (auto product = dyn_cast<AffineBinaryOpExpr>(e); product && e.getKind() == AffineExprKind::Mul)
    if (auto c = dyn_cast<AffineConstantExpr>(product.getRHS())) {
      flattenSum(product.getLHS(), scale * c.getValue(), terms);
      return;
    }
  terms.push_back({scale, e});
}

/// [lo, hi] of `factor` alone where known: the run's dim, a mod.
std::optional<std::pair<int64_t, int64_t>> rangeOf(AffineExpr factor, unsigned dim,
                                                   int64_t bound) {
  if (auto d = dyn_cast<AffineDimExpr>(factor))
    if (d.getPosition() == dim)
      return std::pair<int64_t, int64_t>{0, bound - 1};
  if (factor.getKind() == AffineExprKind::Mod)
    if (auto c = dyn_cast<AffineConstantExpr>(cast<AffineBinaryOpExpr>(factor).getRHS()))
      if (c.getValue() > 0)
        return std::pair<int64_t, int64_t>{0, c.getValue() - 1};
  return std::nullopt;
}

AffineExpr simplify(AffineExpr e, unsigned dim, int64_t bound) {
  auto binary = dyn_cast<AffineBinaryOpExpr>(e);
  if (!binary)
    return e;
  AffineExpr lhs = simplify(binary.getLHS(), dim, bound);
  AffineExpr rhs = simplify(binary.getRHS(), dim, bound);
  switch (e.getKind()) {
  case AffineExprKind::Add:
    return lhs + rhs;
  case AffineExprKind::Mul:
    return lhs * rhs;
  case AffineExprKind::CeilDiv:
    return lhs.ceilDiv(rhs);
  default:
    break;
  }
  bool isMod = e.getKind() == AffineExprKind::Mod;
  auto rebuilt = [&] { return isMod ? lhs % rhs : lhs.floorDiv(rhs); };
  auto divisor = dyn_cast<AffineConstantExpr>(rhs);
  if (!divisor || divisor.getValue() <= 0)
    return rebuilt();
  const int64_t c = divisor.getValue();
  SmallVector<Term> terms;
  flattenSum(lhs, 1, terms);
  // S: the terms of known range; B: the rest, over the gcd g of their
  // coefficients.
  int64_t lo = 0, hi = 0, g = 0;
  AffineExpr small = getAffineConstantExpr(0, e.getContext());
  SmallVector<Term> big;
  for (const Term &t : terms) {
    std::optional<std::pair<int64_t, int64_t>> range =
        t.factor ? rangeOf(t.factor, dim, bound) : std::pair<int64_t, int64_t>{1, 1};
    if (!range) {
      big.push_back(t);
      g = std::gcd(g, t.coefficient);
      continue;
    }
    int64_t a = t.coefficient * range->first, b = t.coefficient * range->second;
    lo += std::min(a, b);
    hi += std::max(a, b);
    small = small + (t.factor ? t.factor * t.coefficient
                              : getAffineConstantExpr(t.coefficient, e.getContext()));
  }
  if (lo < 0)
    return rebuilt();
  AffineExpr rest = getAffineConstantExpr(0, e.getContext());
  auto scaledRest = [&](int64_t by) {
    for (const Term &t : big)
      rest = rest + t.factor * (t.coefficient / by);
    return rest;
  };
  if (big.empty())
    return hi < c ? (isMod ? small : getAffineConstantExpr(0, e.getContext())) : rebuilt();
  if (g % c == 0 && hi < c)
    return isMod ? small : scaledRest(c);
  if (c % g == 0 && hi < g) {
    AffineExpr quotient = scaledRest(g);
    return isMod ? (quotient % (c / g)) * g + small : quotient.floorDiv(c / g);
  }
  return rebuilt();
}

/// Whether dim `dim` appears in `e` only in sums and products by constants.
bool linearIn(AffineExpr e, unsigned dim) {
  auto binary = dyn_cast<AffineBinaryOpExpr>(e);
  if (!binary)
    return true;
  if (e.getKind() == AffineExprKind::Add ||
      (e.getKind() == AffineExprKind::Mul && isa<AffineConstantExpr>(binary.getRHS())))
    return linearIn(binary.getLHS(), dim) && linearIn(binary.getRHS(), dim);
  return !binary.getLHS().isFunctionOfDim(dim) && !binary.getRHS().isFunctionOfDim(dim);
}
} // namespace

std::optional<AffineExpr> kiln::simplifyWithinRun(AffineExpr e, unsigned dim, int64_t bound,
                                                  unsigned numDims) {
  AffineExpr simplified = simplifyAffineExpr(simplify(e, dim, bound), numDims, 0);
  if (!linearIn(simplified, dim))
    return std::nullopt;
  return simplified;
}
