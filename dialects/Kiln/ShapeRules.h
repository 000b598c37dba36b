//===- ShapeRules.h - the result shape of every kiln op, in one place -*- C++ -*-===//
//
// Each rule takes operand shapes and attributes and gives the result shape,
// or the reason there is none. The ops' `inferReturnTypes`
// (InferTypeOpInterface), their verifiers and the Tensor API all call these,
// so broadcasting, reductions and windows mean the same everywhere. The
// Tensor API records without an MLIRContext, so the rules take plain shapes
// rather than Values; the reasons are phrases that follow the op's name.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_SHAPERULES_H
#define KILN_DIALECTS_KILN_SHAPERULES_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::shapes {

/// A result shape, or why the operands have none.
struct Inferred {
  std::vector<int64_t> shape;
  std::string error;
  bool ok() const { return error.empty(); }
  static Inferred fail(std::string why) { return {{}, std::move(why)}; }
};

std::string text(llvm::ArrayRef<int64_t> shape);

/// numpy broadcasting of any number of shapes: align at the right, a
/// dimension of 1 stretches.
Inferred broadcast(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes);

/// Result dimension i is input dimension permutation[i].
Inferred transpose(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> permutation);

/// `low` and `high` elements added around each dimension.
Inferred pad(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> low,
             llvm::ArrayRef<int64_t> high);

/// index_select: dimension `axis` takes the (rank-1) indices' length.
Inferred gather(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> indices, int64_t axis);

/// Shapes equal off `axis`, summed along it.
Inferred concat(llvm::ArrayRef<llvm::ArrayRef<int64_t>> inputs, int64_t axis);

/// `axes` sorted, distinct and inside the rank; each drops out, or stays as
/// 1 with `keepdims`.
Inferred reduce(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> axes, bool keepdims);

/// [..., m, k] x [..., k, n] -> [broadcast(...), m, n].
Inferred matmul(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// NCHW pooling; padding at most half the kernel; WindowRules.h's count.
Inferred pool2d(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> kernel,
                llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> padding,
                bool ceilMode);

/// NCHW input, OIHW filter with input channels / groups per filter.
Inferred conv2d(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> filter,
                llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> padding,
                llvm::ArrayRef<int64_t> dilation, int64_t groups);

// The views whose result shape is the op's own argument (their result type,
// as with tensor.reshape or tensor.cast): these only check it. An empty
// string means the target is fine.

/// Same element count, row-major order kept.
std::string checkReshape(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out);

/// `in` broadcasts to exactly `out`.
std::string checkBroadcastTo(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out);

/// Every element `starts[d] + i * steps[d]`, i < out[d], lies inside `in`.
std::string checkSlice(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> starts,
                       llvm::ArrayRef<int64_t> steps, llvm::ArrayRef<int64_t> out);

} // namespace kiln::shapes

#endif // KILN_DIALECTS_KILN_SHAPERULES_H
