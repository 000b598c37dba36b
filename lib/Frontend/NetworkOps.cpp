//===- NetworkOps.cpp - activations, shape helpers, attention -------------===//
//
// Every op here is recorded as primitive ops under one CallScope: fusion
// sees ordinary elementwise ops and views (an activation joins the kernel
// of the conv or matmul before it), and profiles and errors name the call.
//
//===----------------------------------------------------------------------===//

#include "kiln/NetworkOps.h"

#include "lib/Frontend/Graph.h"
#include "dialects/Kiln/ShapeRules.h"
#include "lib/Frontend/OpRecording.h"

#include "kiln/Errors.h"

#include <cmath>
#include <numeric>

using namespace kiln;
using namespace kiln::detail;

namespace {
const Node &floatNode(const Tensor &x, const char *op, std::source_location loc) {
  const Node &n = nodeOf(x, loc);
  if (!isFloat(n.dtype))
    throw Error(sitePrefix(loc) + op + " needs a floating-point tensor, got " +
                dtype_name(n.dtype) + " (convert it with .to(DType::f32))");
  return n;
}

Tensor clampOf(const Tensor &x, std::optional<float> lo, std::optional<float> hi,
               std::source_location loc) {
  Tensor y = x;
  // max then min: with lo > hi every element becomes hi, as in PyTorch.
  if (lo)
    y = maximum(y, scalarLike(*lo, x, loc), loc);
  if (hi)
    y = minimum(y, scalarLike(*hi, x, loc), loc);
  return y;
}
} // namespace

Tensor kiln::clamp(const Tensor &x, std::optional<float> min, std::optional<float> max,
                   std::source_location loc) {
  floatNode(x, "clamp", loc);
  if (!min && !max)
    throw Error(sitePrefix(loc) + "clamp: give at least one of min and max");
  CallScope scope("clamp", loc, {{"x", &x}});
  return clampOf(x, min, max, loc);
}

Tensor kiln::relu6(const Tensor &x, std::source_location loc) {
  floatNode(x, "relu6", loc);
  CallScope scope("relu6", loc, {{"x", &x}});
  return clampOf(x, 0.0f, 6.0f, loc);
}

Tensor kiln::hardtanh(const Tensor &x, float min_val, float max_val, std::source_location loc) {
  floatNode(x, "hardtanh", loc);
  if (min_val > max_val)
    throw Error(sitePrefix(loc) + "hardtanh: min_val (" + std::to_string(min_val) +
                ") is above max_val (" + std::to_string(max_val) + ")");
  CallScope scope("hardtanh", loc, {{"x", &x}});
  return clampOf(x, min_val, max_val, loc);
}

Tensor kiln::hardswish(const Tensor &x, std::source_location loc) {
  floatNode(x, "hardswish", loc);
  CallScope scope("hardswish", loc, {{"x", &x}});
  Tensor gate = clampOf(add(x, scalarLike(3.0f, x, loc), loc), 0.0f, 6.0f, loc);
  return div(mul(x, gate, loc), scalarLike(6.0f, x, loc), loc);
}

Tensor kiln::hardsigmoid(const Tensor &x, std::source_location loc) {
  floatNode(x, "hardsigmoid", loc);
  CallScope scope("hardsigmoid", loc, {{"x", &x}});
  Tensor gate = clampOf(add(x, scalarLike(3.0f, x, loc), loc), 0.0f, 6.0f, loc);
  return div(gate, scalarLike(6.0f, x, loc), loc);
}

Tensor kiln::silu(const Tensor &x, std::source_location loc) {
  floatNode(x, "silu", loc);
  CallScope scope("silu", loc, {{"x", &x}});
  return mul(x, sigmoid(x, loc), loc);
}

Tensor kiln::gelu(const Tensor &x, std::string_view approximate, std::source_location loc) {
  if (approximate == "none")
    return gelu(x, loc);
  if (approximate != "tanh")
    throw Error(sitePrefix(loc) + "gelu: approximate must be \"none\" or \"tanh\", got \"" +
                std::string(approximate) + "\"");
  floatNode(x, "gelu", loc);
  CallScope scope("gelu", loc, {{"x", &x}});
  auto c = [&](float v) { return scalarLike(v, x, loc); };
  Tensor cube = mul(mul(x, x, loc), x, loc);
  Tensor inner = mul(c(0.7978845608028654f), add(x, mul(c(0.044715f), cube, loc), loc), loc);
  return mul(mul(c(0.5f), x, loc), add(c(1.0f), tanh(inner, loc), loc), loc);
}

Tensor kiln::flatten(const Tensor &x, int64_t start_dim, int64_t end_dim,
                     std::source_location loc) {
  const Shape &in = nodeOf(x, loc).shape;
  if (in.empty()) // as torch.flatten: a scalar becomes one element
    return x.reshape({1}, loc);
  int64_t start = normalizeDim(start_dim, in.size(), loc, "flatten");
  int64_t end = normalizeDim(end_dim, in.size(), loc, "flatten");
  if (start > end)
    throw Error(sitePrefix(loc) + "flatten: start_dim (" + std::to_string(start_dim) +
                ") comes after end_dim (" + std::to_string(end_dim) + ")");
  Shape shape(in.begin(), in.begin() + start);
  shape.push_back(std::accumulate(in.begin() + start, in.begin() + end + 1, int64_t(1),
                                  std::multiplies<>()));
  shape.insert(shape.end(), in.begin() + end + 1, in.end());
  return x.reshape(std::move(shape), loc);
}

Tensor kiln::squeeze(const Tensor &x, std::vector<int64_t> dims, std::source_location loc) {
  const Shape &in = nodeOf(x, loc).shape;
  std::vector<bool> drop(in.size(), dims.empty());
  if (dims.empty()) {
    for (size_t d = 0; d < in.size(); ++d)
      drop[d] = in[d] == 1;
  }
  for (int64_t dim : dims) {
    int64_t d = normalizeDim(dim, in.size(), loc, "squeeze");
    if (in[d] != 1)
      throw Error(sitePrefix(loc) + "squeeze: dimension " + std::to_string(dim) + " of " +
                  shapeText(in) + " has size " + std::to_string(in[d]) +
                  ", not 1 (reshape it if that is meant)");
    drop[d] = true;
  }
  Shape shape;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d])
      shape.push_back(in[d]);
  return x.reshape(std::move(shape), loc);
}

Tensor kiln::unsqueeze(const Tensor &x, int64_t dim, std::source_location loc) {
  Shape shape = nodeOf(x, loc).shape;
  int64_t d = normalizeDim(dim, shape.size() + 1, loc, "unsqueeze");
  shape.insert(shape.begin() + d, 1);
  return x.reshape(std::move(shape), loc);
}

std::vector<Tensor> kiln::split(const Tensor &x, const std::vector<int64_t> &sizes, int64_t dim,
                                std::source_location loc) {
  const Shape &in = nodeOf(x, loc).shape;
  int64_t d = normalizeDim(dim, in.size(), loc, "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      throw Error(sitePrefix(loc) + "split: sizes must not be negative");
    total += s;
  }
  if (total != in[d])
    throw Error(sitePrefix(loc) + "split: the sizes add up to " + std::to_string(total) +
                ", but dimension " + std::to_string(dim) + " of " + shapeText(in) + " is " +
                std::to_string(in[d]));
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t s : sizes) {
    pieces.push_back(x.slice(d, start, start + s, 1, loc));
    start += s;
  }
  return pieces;
}

std::vector<Tensor> kiln::split(const Tensor &x, int64_t split_size, int64_t dim,
                                std::source_location loc) {
  const Shape &in = nodeOf(x, loc).shape;
  int64_t d = normalizeDim(dim, in.size(), loc, "split");
  if (split_size < 1)
    throw Error(sitePrefix(loc) + "split: split_size must be positive, got " +
                std::to_string(split_size));
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < in[d]; start += split_size)
    sizes.push_back(std::min(split_size, in[d] - start));
  if (sizes.empty()) // as PyTorch: an empty dimension gives one empty piece
    sizes.push_back(0);
  return split(x, sizes, d, loc);
}

std::vector<Tensor> kiln::chunk(const Tensor &x, int64_t chunks, int64_t dim,
                                std::source_location loc) {
  const Shape &in = nodeOf(x, loc).shape;
  int64_t d = normalizeDim(dim, in.size(), loc, "chunk");
  if (chunks < 1)
    throw Error(sitePrefix(loc) + "chunk: chunks must be positive, got " +
                std::to_string(chunks));
  return split(x, std::max<int64_t>(1, (in[d] + chunks - 1) / chunks), d, loc);
}

Tensor kiln::conv2d(const Tensor &x, const Tensor &filter, const Tensor &bias,
                    std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                    std::array<int64_t, 2> dilation, int64_t groups, std::source_location loc) {
  CallScope scope("conv2d", loc, {{"x", &x}, {"filter", &filter}, {"bias", &bias}});
  Tensor y = conv2d(x, filter, stride, padding, dilation, groups, loc);
  const Node &b = nodeOf(bias, loc);
  int64_t channels = y.shape()[1];
  if (b.shape != Shape{channels} || b.dtype != y.dtype())
    throw Error(sitePrefix(loc) + "conv2d: bias has shape " + shapeText(b.shape) + " (" +
                dtype_name(b.dtype) + "); it must be [" + std::to_string(channels) +
                "] (" + dtype_name(y.dtype()) + "), one value per output channel");
  return add(y, bias.reshape({1, channels, 1, 1}, loc), loc);
}

namespace {
/// The [out, in] matrix that averages PyTorch's adaptive windows.
std::vector<float> adaptiveWindows(int64_t in, int64_t out) {
  std::vector<float> m(size_t(out * in), 0.0f);
  for (int64_t i = 0; i < out; ++i) {
    int64_t begin = i * in / out, end = ((i + 1) * in + out - 1) / out;
    for (int64_t j = begin; j < end; ++j)
      m[size_t(i * in + j)] = 1.0f / float(end - begin);
  }
  return m;
}
} // namespace

Tensor kiln::adaptive_avg_pool2d(const Tensor &x, std::array<int64_t, 2> output_size,
                                 std::source_location loc) {
  const Node &n = floatNode(x, "adaptive_avg_pool2d", loc);
  if (n.shape.size() != 4)
    throw Error(sitePrefix(loc) + "adaptive_avg_pool2d needs an NCHW tensor, got " +
                shapeText(n.shape));
  int64_t h = n.shape[2], w = n.shape[3], oh = output_size[0], ow = output_size[1];
  if (oh < 1 || ow < 1 || h < 1 || w < 1)
    throw Error(sitePrefix(loc) + "adaptive_avg_pool2d: the output size and the input's H and "
                "W must be positive, got output " + std::to_string(oh) + "x" +
                std::to_string(ow) + " for " + shapeText(n.shape));
  CallScope scope("adaptive_avg_pool2d", loc, {{"x", &x}});
  if (oh == 1 && ow == 1)
    return mean(x, {2, 3}, true, loc);
  if (h % oh == 0 && w % ow == 0) // equal windows: plain pooling
    return avg_pool2d(x, {h / oh, w / ow}, {h / oh, w / ow}, {0, 0}, false, loc);
  // Overlapping windows of two sizes: rows then columns as products with
  // averaging matrices, exact for any sizes.
  Tensor rows = Tensor::like(x, adaptiveWindows(h, oh), {oh, h}, loc);
  Tensor cols = Tensor::like(x, adaptiveWindows(w, ow), {ow, w}, loc);
  if (n.dtype != DType::f32) {
    rows = rows.to(n.dtype, loc);
    cols = cols.to(n.dtype, loc);
  }
  return matmul(rows, matmul(x, cols.transpose(0, 1, loc), loc), loc);
}

Tensor kiln::scaled_dot_product_attention(const Tensor &q, const Tensor &k, const Tensor &v,
                                          const Tensor &mask, bool causal,
                                          std::optional<float> scale,
                                          std::source_location loc) {
  const Node &qn = floatNode(q, "scaled_dot_product_attention", loc);
  const Node &kn = nodeOf(k, loc), &vn = nodeOf(v, loc);
  if (qn.shape.size() < 2 || kn.shape.size() < 2 || vn.shape.size() < 2)
    throw Error(sitePrefix(loc) + "scaled_dot_product_attention needs q, k and v of rank 2 or "
                "more ([..., L, E], [..., S, E], [..., S, Ev]), got " + shapeText(qn.shape) +
                ", " + shapeText(kn.shape) + " and " + shapeText(vn.shape));
  int64_t e = qn.shape.back(), s = kn.shape[kn.shape.size() - 2];
  int64_t l = qn.shape[qn.shape.size() - 2];
  if (kn.shape.back() != e || vn.shape[vn.shape.size() - 2] != s)
    throw Error(sitePrefix(loc) + "scaled_dot_product_attention: q " + shapeText(qn.shape) +
                ", k " + shapeText(kn.shape) + " and v " + shapeText(vn.shape) +
                " do not fit: k needs q's last size (E) and v needs k's length (S)");
  if (s == 0)
    throw Error(sitePrefix(loc) + "scaled_dot_product_attention: k " + shapeText(kn.shape) +
                " holds no keys (S = 0), so no query has anything to attend to");
  if (qn.dtype != kn.dtype || qn.dtype != vn.dtype)
    throw Error(sitePrefix(loc) + "scaled_dot_product_attention: q, k and v are " +
                dtype_name(qn.dtype) + ", " + dtype_name(kn.dtype) + " and " +
                dtype_name(vn.dtype) + "; give them one dtype");
  if (mask.defined() && causal)
    throw Error(sitePrefix(loc) + "scaled_dot_product_attention: give a mask or causal, not "
                "both (PyTorch refuses the pair too); fold the causal rule into the mask");
  // The batch dimensions (all but the last two) broadcast, as in matmul.
  Shape qb(qn.shape.begin(), qn.shape.end() - 2), kb(kn.shape.begin(), kn.shape.end() - 2),
      vb(vn.shape.begin(), vn.shape.end() - 2);
  shapes::Inferred batch = shapes::broadcast({qb, kb, vb});
  if (!batch.ok())
    throw Error(sitePrefix(loc) + "scaled_dot_product_attention: the batch dimensions of q " +
                shapeText(qn.shape) + ", k " + shapeText(kn.shape) + " and v " +
                shapeText(vn.shape) + " do not broadcast (every dimension but the last two "
                "must match or be 1: " + batch.error + ")");
  Shape scores(batch.shape.begin(), batch.shape.end());
  scores.push_back(l);
  scores.push_back(s);
  if (mask.defined()) {
    const Node &mn = nodeOf(mask, loc);
    if (mn.dtype != DType::boolean && mn.dtype != qn.dtype)
      throw Error(sitePrefix(loc) + "scaled_dot_product_attention: the mask is " +
                  dtype_name(mn.dtype) + "; give a boolean mask (true keeps a score) or one of " +
                  dtype_name(qn.dtype) + " (added to the scores)");
    std::string why = shapes::checkBroadcastTo(mn.shape, scores);
    if (!why.empty()) {
      // A key padding mask as [batch, S] is the usual slip.
      std::string hint;
      if (mn.shape.size() == 2 && mn.shape.back() == s && scores.size() == 4)
        hint = "; a per-key mask of [batch, S] is mask.reshape({" +
               std::to_string(mn.shape[0]) + ", 1, 1, " + std::to_string(s) + "})";
      throw Error(sitePrefix(loc) + "scaled_dot_product_attention: the mask " +
                  shapeText(mn.shape) + " does not broadcast to the scores " +
                  shapeText(scores) + " ([..., L, S]): " + why + hint);
    }
  }
  // One op: the CPU runs it as one kernel with an online softmax (no L x S
  // score matrix); other devices get its decomposition into two matmuls
  // and a softmax (kiln-decompose-attention).
  auto node = std::make_shared<Node>();
  node->kind = OpKind::Attention;
  node->op = "attention";
  node->operands = {q.node(), k.node(), v.node()};
  if (mask.defined())
    node->operands.push_back(mask.node());
  node->shape = Shape(batch.shape.begin(), batch.shape.end());
  node->shape.push_back(l);
  node->shape.push_back(vn.shape.back());
  node->dtype = qn.dtype;
  node->loc = loc;
  node->value = scale ? *scale : float(1.0 / std::sqrt(double(e)));
  node->causal = causal;
  return recordNode(std::move(node));
}
