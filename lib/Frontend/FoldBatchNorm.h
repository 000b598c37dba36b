//===- FoldBatchNorm.h - batch norms folded into their convolutions -*- C++ -*-===//
//
// A program compiled ahead of time knows its weights. A batch norm whose
// statistics and affine parameters are weights, applied to a convolution
// whose filter is a weight, becomes that convolution with the scale folded
// into its filter and a per-channel bias (what ONNX exporters and PyTorch's
// freezing do): its kernel's epilogue adds a bias instead of computing
// (x - mean) * gamma / sqrt(var + eps) + beta per element.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_FOLDBATCHNORM_H
#define KILN_LIB_FRONTEND_FOLDBATCHNORM_H

#include "lib/Frontend/Graph.h"

#include <functional>
#include <memory>
#include <vector>

namespace kiln {

/// The graph of `roots` with every foldable batch norm folded: new nodes
/// where something changed, the caller's nodes untouched (the JIT keeps
/// computing what the user wrote). `isModelInput` tells the model's inputs
/// from weights; `valuesOf` reads an f32 or f16 weight's values as floats.
std::vector<std::shared_ptr<Node>>
foldBatchNorms(const std::vector<std::shared_ptr<Node>> &roots,
               const std::function<bool(const Node *)> &isModelInput,
               const std::function<std::vector<float>(const Node &)> &valuesOf);

} // namespace kiln

#endif // KILN_LIB_FRONTEND_FOLDBATCHNORM_H
