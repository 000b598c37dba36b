//===- WindowRules.h - how many windows fit, one rule for all -*- C++ -*-===//
//
// The output size of a sliding window (pooling, convolution), shared by the
// dialect's verifiers, the Tensor API and the ONNX importer so that
// ceil_mode means the same everywhere. Plain C++: no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECTS_KILN_WINDOWRULES_H
#define KILN_DIALECTS_KILN_WINDOWRULES_H

#include <cstdint>

namespace kiln {

/// Windows of `span` elements (dilation included) sliding with `stride`
/// over `size` elements padded by `padBegin` and `padEnd`; below 1 when the
/// window does not fit. With `ceilMode` one more window where a partial one
/// still starts inside the input or its leading padding (PyTorch's and
/// ONNX's rule).
inline int64_t windowCount(int64_t size, int64_t span, int64_t stride, int64_t padBegin,
                           int64_t padEnd, bool ceilMode) {
  int64_t room = size + padBegin + padEnd - span;
  if (room < 0)
    return 0;
  if (!ceilMode)
    return room / stride + 1;
  // Without overflow for any stride: the last window's start against the
  // input and its leading padding.
  int64_t count = room / stride + (room % stride != 0) + 1, start = 0;
  bool past = __builtin_mul_overflow(count - 1, stride, &start) || start >= size + padBegin;
  return past ? count - 1 : count;
}

} // namespace kiln

#endif // KILN_DIALECTS_KILN_WINDOWRULES_H
