//===- ApproximateMath.cpp - polynomials for math the targets lack --------===//
//
// SPIR-V's GLSL instruction set has no erf; MLIR's polynomial keeps f32
// accuracy. For GPUs only erf is rewritten: the others lower natively. On
// the CPU libm calls would stop vectorization, so all of them are.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNAPPROXIMATEMATH
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct ApproximateMathPass
    : public kiln::impl::KilnApproximateMathBase<ApproximateMathPass> {
  using KilnApproximateMathBase::KilnApproximateMathBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    if (all) {
      // f16 math is computed in f32, then every transcendental with a
      // polynomial; rsqrt is left out (its approximation needs AVX2 ops).
      auto transcendental = [](StringRef name) {
        name.consume_front("math.");
        return llvm::is_contained({"tanh", "exp", "expm1", "log", "log1p", "log2",
                                   "erf", "erfc", "sin", "cos", "atan", "atan2",
                                   "asin", "acos", "cbrt"},
                                  name);
      };
      populateMathF32ExpansionPatterns(patterns, transcendental);
      populateMathPolynomialApproximationPatterns(patterns, transcendental);
      // tanh and erf are not among the predicate-driven patterns in MLIR 22.
      populatePolynomialApproximateTanhPattern(patterns);
      populatePolynomialApproximateErfPattern(patterns);
    } else {
      // f16 math is computed in f32 (as PyTorch does): math-to-spirv leaves
      // casts it cannot legalize for f16 transcendentals.
      populateMathF32ExpansionPatterns(patterns, [](StringRef) { return true; });
      populatePolynomialApproximateErfPattern(patterns);
    }
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
