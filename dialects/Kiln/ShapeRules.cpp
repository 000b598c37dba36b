//===- ShapeRules.cpp - the result shape of every kiln op ----------------===//

#include "dialects/Kiln/ShapeRules.h"
#include "dialects/Kiln/WindowRules.h"

#include <algorithm>

using llvm::ArrayRef;

namespace kiln::shapes {

std::string text(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Inferred broadcast(ArrayRef<ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (ArrayRef<int64_t> s : shapes)
    rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (ArrayRef<int64_t> s : shapes)
    for (size_t i = 0; i < s.size(); ++i) {
      // Align at the right: missing leading dimensions count as 1.
      int64_t &o = out[rank - s.size() + i];
      if (s[i] == o || s[i] == 1)
        continue;
      if (o != 1) {
        std::string all;
        for (ArrayRef<int64_t> t : shapes)
          all += (all.empty() ? "" : " and ") + text(t);
        return Inferred::fail("shapes " + all + " do not broadcast (dimension " +
                              std::to_string(rank - s.size() + i) + ": " + std::to_string(o) +
                              " vs " + std::to_string(s[i]) + ")");
      }
      o = s[i];
    }
  return {out, {}};
}

Inferred transpose(ArrayRef<int64_t> in, ArrayRef<int64_t> permutation) {
  if (permutation.size() != in.size())
    return Inferred::fail(std::to_string(permutation.size()) + " dimensions given for a rank-" +
                          std::to_string(in.size()) + " tensor");
  std::vector<bool> seen(in.size(), false);
  std::vector<int64_t> out;
  for (int64_t p : permutation) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p])
      return Inferred::fail("permutation " + text(permutation) + " is not a permutation of 0.." +
                            std::to_string(static_cast<int64_t>(in.size()) - 1));
    seen[p] = true;
    out.push_back(in[p]);
  }
  return {out, {}};
}

Inferred pad(ArrayRef<int64_t> in, ArrayRef<int64_t> low, ArrayRef<int64_t> high) {
  if (low.size() != in.size() || high.size() != in.size())
    return Inferred::fail("low and high need one value per dimension (" +
                          std::to_string(in.size()) + ")");
  std::vector<int64_t> out(in);
  for (size_t d = 0; d < in.size(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return Inferred::fail("padding must be non-negative");
    if (__builtin_add_overflow(out[d], low[d], &out[d]) ||
        __builtin_add_overflow(out[d], high[d], &out[d]))
      return Inferred::fail("padding of dimension " + std::to_string(d) + " overflows its size");
  }
  return {out, {}};
}

Inferred gather(ArrayRef<int64_t> in, ArrayRef<int64_t> indices, int64_t axis) {
  if (axis < 0 || axis >= static_cast<int64_t>(in.size()))
    return Inferred::fail("axis " + std::to_string(axis) + " is outside the rank " +
                          std::to_string(in.size()));
  if (indices.size() != 1)
    return Inferred::fail("indices must be rank 1, got " + text(indices));
  std::vector<int64_t> out(in);
  out[axis] = indices[0];
  return {out, {}};
}

Inferred concat(ArrayRef<ArrayRef<int64_t>> inputs, int64_t axis) {
  if (inputs.empty())
    return Inferred::fail("needs at least one input");
  ArrayRef<int64_t> first = inputs.front();
  if (axis < 0 || axis >= static_cast<int64_t>(first.size()))
    return Inferred::fail("axis " + std::to_string(axis) + " is outside the rank " +
                          std::to_string(first.size()));
  std::vector<int64_t> out(first);
  out[axis] = 0;
  for (ArrayRef<int64_t> in : inputs) {
    if (in.size() != first.size())
      return Inferred::fail(text(in) + " and " + text(first) + " have different ranks");
    for (size_t d = 0; d < in.size(); ++d)
      if (static_cast<int64_t>(d) != axis && in[d] != first[d])
        return Inferred::fail(text(in) + " and " + text(first) + " differ off axis " +
                              std::to_string(axis));
    if (__builtin_add_overflow(out[axis], in[axis], &out[axis]))
      return Inferred::fail("the sizes along axis " + std::to_string(axis) + " overflow");
  }
  return {out, {}};
}

Inferred reduce(ArrayRef<int64_t> in, ArrayRef<int64_t> axes, bool keepdims) {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(in.size()) ||
        (i && axes[i] <= axes[i - 1]))
      return Inferred::fail("axes " + text(axes) + " must be sorted, distinct and inside the rank " +
                            std::to_string(in.size()));
  std::vector<int64_t> out;
  for (size_t d = 0; d < in.size(); ++d) {
    bool reduced = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d));
    if (!reduced)
      out.push_back(in[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return {out, {}};
}

Inferred matmul(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() < 2 || b.size() < 2)
    return Inferred::fail("needs operands of rank 2 or more, got " + text(a) + " and " + text(b));
  if (a.back() != b[b.size() - 2])
    return Inferred::fail(text(a) + " x " + text(b) + ": the contracted dimensions (" +
                          std::to_string(a.back()) + " and " +
                          std::to_string(b[b.size() - 2]) + ") differ");
  Inferred batch = broadcast({a.drop_back(2), b.drop_back(2)});
  if (!batch.ok())
    return Inferred::fail("batch dimensions: " + batch.error);
  batch.shape.push_back(a[a.size() - 2]);
  batch.shape.push_back(b.back());
  return batch;
}

namespace {
/// Output size along one spatial dimension, or why there is none.
std::string windowOut(int64_t size, int64_t span, int64_t stride, int64_t pad, bool ceilMode,
                      int64_t &out) {
  if (stride < 1 || pad < 0)
    return "stride must be positive and padding non-negative";
  // Huge paddings are refused, not wrapped around.
  int64_t padded = 0;
  if (__builtin_mul_overflow(pad, 2, &padded) || __builtin_add_overflow(padded, size, &padded))
    return "padding " + std::to_string(pad) + " is too large";
  if (padded < span)
    return "the window (" + std::to_string(span) + ") is larger than the padded input (" +
           std::to_string(padded) + ")";
  out = windowCount(size, span, stride, pad, pad, ceilMode);
  return {};
}
} // namespace

Inferred pool2d(ArrayRef<int64_t> x, ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                ArrayRef<int64_t> padding, bool ceilMode) {
  if (x.size() != 4)
    return Inferred::fail("needs an NCHW tensor, got " + text(x));
  if (kernel.size() != 2 || strides.size() != 2 || padding.size() != 2)
    return Inferred::fail("kernel, strides and padding need two values each");
  std::vector<int64_t> out = {x[0], x[1], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (kernel[i] < 1 || padding[i] < 0 || padding[i] > kernel[i] / 2)
      return Inferred::fail("the kernel must be positive and padding at most half of it");
    std::string why = windowOut(x[2 + i], kernel[i], strides[i], padding[i], ceilMode, out[2 + i]);
    if (!why.empty())
      return Inferred::fail(why);
  }
  return {out, {}};
}

Inferred conv2d(ArrayRef<int64_t> x, ArrayRef<int64_t> w, ArrayRef<int64_t> strides,
                ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation, int64_t groups) {
  if (x.size() != 4 || w.size() != 4)
    return Inferred::fail("needs an NCHW input and an OIHW filter, got " + text(x) + " and " +
                          text(w));
  if (strides.size() != 2 || padding.size() != 2 || dilation.size() != 2)
    return Inferred::fail("strides, padding and dilation need two values each");
  if (groups < 1 || x[1] % groups || w[0] % groups || w[1] * groups != x[1])
    return Inferred::fail(std::to_string(groups) + " groups do not fit " + std::to_string(x[1]) +
                          " input channels and a filter " + text(w) +
                          " (it needs input channels / groups = " +
                          std::to_string(x[1] / std::max<int64_t>(1, groups)) + " per filter)");
  std::vector<int64_t> out = {x[0], w[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (dilation[i] < 1)
      return Inferred::fail("dilation must be positive");
    int64_t span = 0;
    if (__builtin_mul_overflow(dilation[i], w[2 + i] - 1, &span))
      return Inferred::fail("dilation " + std::to_string(dilation[i]) + " is too large");
    ++span;
    std::string why = windowOut(x[2 + i], span, strides[i], padding[i], /*ceilMode=*/false,
                                out[2 + i]);
    if (!why.empty())
      return Inferred::fail(why);
  }
  return {out, {}};
}

namespace {
/// The element count, or -1 when it overflows 64 bits.
int64_t count(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}
} // namespace

std::string checkReshape(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  int64_t a = count(in), b = count(out);
  if (a < 0 || b < 0)
    return "has a shape whose element count overflows 64 bits";
  if (a != b)
    return "cannot view " + text(in) + " (" + std::to_string(a) + " elements) as " + text(out);
  return {};
}

std::string checkBroadcastTo(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  Inferred b = broadcast({in, out});
  if (!b.ok() || ArrayRef<int64_t>(b.shape) != out)
    return "cannot broadcast " + text(in) + " to " + text(out);
  return {};
}

namespace {
std::string wide(__int128 v) {
  if (v >= INT64_MIN && v <= INT64_MAX)
    return std::to_string(static_cast<int64_t>(v));
  return v < 0 ? "-2^63 or less" : "2^63 or more";
}
} // namespace

std::string checkSlice(ArrayRef<int64_t> in, ArrayRef<int64_t> starts, ArrayRef<int64_t> steps,
                       ArrayRef<int64_t> out) {
  if (starts.size() != in.size() || steps.size() != in.size() || out.size() != in.size())
    return "starts, steps and the result must have the operand's rank " + std::to_string(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t start = starts[d], step = steps[d], n = out[d];
    if (step == 0)
      return "step of dimension " + std::to_string(d) + " is 0";
    if (n == 0)
      continue;
    // In 128 bits: a step near INT64_MAX times the count must not wrap.
    __int128 last = __int128(start) + __int128(n - 1) * step;
    if (start < 0 || start >= in[d] || last < 0 || last >= in[d])
      return "dimension " + std::to_string(d) + ": elements " + std::to_string(start) + ", " +
             wide(__int128(start) + step) + ", ... " + wide(last) + " are not all inside [0, " +
             std::to_string(in[d]) + ")";
  }
  return {};
}

} // namespace kiln::shapes
