//===- OnnxStateOps.cpp - ONNX's operators for stateful language models ---===//
//
// The operators that recurrent and hybrid language models export to:
// LinearAttention-27 (linear, gated, delta and gated-delta state updates,
// unrolled over the sequence), CausalConvWithState-27 (a depthwise causal
// 1-D convolution carrying its last k - 1 inputs), TensorScatter-24 (a KV
// cache written at per-batch positions, known at import or computed) and
// SwiGLU, as ONNX's reference defines them.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include "kiln/NetworkOps.h"

#include <cmath>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// [B, T, H * D] -> [B, H, T, D] in f32.
Tensor heads(const NodeContext &ctx, const Tensor &x, int64_t h, const char *what) {
  const Shape &s = x.shape();
  if (s.size() != 3)
    ctx.fail(std::string(what) + " has rank " + std::to_string(s.size()) + "; want [B, T, H * D]");
  if (h < 1 || s[2] % h)
    ctx.fail(std::string(what) + "'s last dimension " + std::to_string(s[2]) +
             " is not a multiple of its head count " + std::to_string(h));
  return asF32(x).reshape({s[0], s[1], h, s[2] / h}).permute({0, 2, 1, 3});
}

std::vector<Value> linearAttention(const NodeContext &ctx) {
  std::string rule = ctx.attrString("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    ctx.fail("update_rule '" + rule + "' (linear, gated, delta or gated_delta)");
  bool gating = rule == "gated" || rule == "gated_delta";
  bool delta = rule == "delta" || rule == "gated_delta";
  if (gating != ctx.has(4))
    ctx.fail("update_rule '" + rule + "' " + (gating ? "needs" : "takes no") + " decay input");
  if (delta != ctx.has(5))
    ctx.fail("update_rule '" + rule + "' " + (delta ? "needs" : "takes no") + " beta input");
  int64_t hq = ctx.attrInt("q_num_heads", 0), hkv = ctx.attrInt("kv_num_heads", 0);
  if (hq < 1 || hkv < 1 || hq % hkv)
    ctx.fail("q_num_heads " + std::to_string(hq) + " must be a positive multiple of kv_num_heads " +
             std::to_string(hkv));
  Tensor query = ctx.tensor(0);
  Tensor q = heads(ctx, query, hq, "query"), k = heads(ctx, ctx.tensor(1), hkv, "key"),
         v = heads(ctx, ctx.tensor(2), hkv, "value");
  int64_t b = q.shape()[0], t = q.shape()[2], dk = q.shape()[3], dv = v.shape()[3];
  if (k.shape() != Shape{b, hkv, t, dk} || v.shape()[2] != t)
    ctx.fail("key " + detail::shapeText(ctx.input(1).shape) + " and value " +
             detail::shapeText(ctx.input(2).shape) + " do not match query " +
             detail::shapeText(query.shape()) + "'s batch, length and key size");
  int64_t group = hq / hkv;
  // decay: one per head [B, T, Hkv] or per key dimension [B, T, Hkv * dk],
  // as [B, Hkv, T, 1 or dk]; beta: per head or one, as [B, Hkv or 1, T, 1].
  std::optional<Tensor> decay, beta;
  if (gating) {
    Tensor d = ctx.tensor(4);
    if (d.shape().size() != 3 || (d.shape()[2] != hkv && d.shape()[2] != hkv * dk))
      ctx.fail("decay of shape " + detail::shapeText(d.shape()) + "; want [B, T, " +
               std::to_string(hkv) + "] or [B, T, " + std::to_string(hkv * dk) + "]");
    decay = d.shape()[2] == hkv ? asF32(d).reshape({b, t, hkv, 1}).permute({0, 2, 1, 3})
                                : heads(ctx, d, hkv, "decay");
  }
  if (delta) {
    Tensor be = ctx.tensor(5);
    if (be.shape().size() != 3 || (be.shape()[2] != hkv && be.shape()[2] != 1))
      ctx.fail("beta of shape " + detail::shapeText(be.shape()) + "; want [B, T, " +
               std::to_string(hkv) + "] or [B, T, 1]");
    beta = asF32(be).reshape({b, t, be.shape()[2], 1}).permute({0, 2, 1, 3});
  }
  Shape stateShape{b, hkv, dk, dv};
  DType stateType = query.dtype();
  Tensor state = Tensor::full(stateShape, 0.0f);
  if (ctx.has(3)) {
    Tensor past = ctx.tensor(3);
    if (past.shape() != stateShape)
      ctx.fail("past_state of shape " + detail::shapeText(past.shape()) + "; want " +
               detail::shapeText(stateShape));
    stateType = past.dtype();
    state = asF32(past);
  }
  float scale = ctx.attrFloat("scale", 0.0f);
  if (scale == 0.0f)
    scale = 1.0f / std::sqrt(float(dk));
  // The recurrence, one position at a time: decay the state, correct the
  // value by what the state already recalls for the key, write k (x) v,
  // and read with each query head of the key head's group.
  std::vector<Tensor> steps;
  for (int64_t i = 0; i < t; ++i) {
    Tensor kt = k.slice(2, i, i + 1).reshape({b, hkv, dk, 1});
    Tensor vt = v.slice(2, i, i + 1).reshape({b, hkv, 1, dv});
    if (decay)
      state = state * exp(decay->slice(2, i, i + 1).reshape({b, hkv, decay->shape()[3], 1}));
    if (beta) {
      Tensor recalled = sum(state * kt, {2}, true); // [B, Hkv, 1, dv]
      vt = beta->slice(2, i, i + 1) * (vt - recalled);
    }
    state = state + kt * vt;
    Tensor qt = q.slice(2, i, i + 1).reshape({b, hkv, group, dk, 1});
    Tensor read = sum(qt * unsqueeze(state, 2), {3}); // [B, Hkv, G, dv]
    steps.push_back((read * Tensor::scalar(scale)).reshape({b, hq, 1, dv}));
  }
  Tensor out = concat(steps, 2).permute({0, 2, 1, 3}).reshape({b, t, hq * dv});
  return {Value::of(query.dtype() == DType::f32 ? out : out.to(query.dtype())),
          Value::of(stateType == DType::f32 ? state : state.to(stateType))};
}

std::vector<Value> causalConvWithState(const NodeContext &ctx) {
  std::string activation = ctx.attrString("activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish")
    ctx.fail("activation '" + activation + "' (none, silu or swish)");
  Tensor x = ctx.tensor(0), w = ctx.tensorAs(1, x);
  const Shape &s = x.shape();
  if (s.size() != 3 || w.shape().size() != 3 || w.shape()[0] != s[1] || w.shape()[1] != 1)
    ctx.fail("input " + detail::shapeText(s) + " and weight " + detail::shapeText(w.shape()) +
             "; want [B, C, L] and [C, 1, k]");
  int64_t c = s[1], length = s[2], kernel = w.shape()[2];
  Shape stateShape{s[0], c, kernel - 1};
  std::vector<Tensor> pieces;
  if (ctx.has(3)) {
    Tensor past = ctx.tensorAs(3, x);
    if (past.shape() != stateShape)
      ctx.fail("past_state of shape " + detail::shapeText(past.shape()) + "; want " +
               detail::shapeText(stateShape));
    pieces.push_back(past);
  } else if (kernel > 1) {
    pieces.push_back(Tensor::full(stateShape, 0.0f).to(x.dtype()));
  }
  pieces.push_back(x);
  Tensor padded = pieces.size() == 1 ? x : concat(pieces, 2);
  // Depthwise and valid: out[., c, t] = sum_j w[c, j] * padded[., c, t + j].
  Tensor taps = w.reshape({c, kernel});
  std::optional<Tensor> out;
  for (int64_t j = 0; j < kernel; ++j) {
    Tensor term = padded.slice(2, j, j + length) * taps.slice(1, j, j + 1);
    out = out ? *out + term : term;
  }
  if (ctx.has(2))
    out = *out + ctx.tensorAs(2, x).reshape({c, 1});
  if (activation != "none")
    out = *out * sigmoid(*out);
  int64_t all = padded.shape()[2];
  return {Value::of(*out), Value::of(padded.slice(2, all - (kernel - 1), all))};
}

std::vector<Value> tensorScatter(const NodeContext &ctx) {
  std::string mode = ctx.attrString("mode", "linear");
  if (mode != "linear" && mode != "circular")
    ctx.fail("mode '" + mode + "' (linear or circular)");
  Tensor past = ctx.tensor(0), update = ctx.tensorAs(1, past);
  const Shape &ps = past.shape(), &us = update.shape();
  int64_t rank = int64_t(ps.size());
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", -2), rank);
  bool compatible = us.size() == ps.size() && axis > 0;
  for (int64_t i = 0; compatible && i < rank; ++i)
    compatible = i == axis ? us[size_t(i)] <= ps[size_t(i)] : us[size_t(i)] == ps[size_t(i)];
  if (!compatible)
    ctx.fail("update of shape " + detail::shapeText(us) + " does not fit cache " +
             detail::shapeText(ps) + " along axis " + std::to_string(axis) +
             " (the batch is axis 0)");
  int64_t length = ps[size_t(axis)], count = us[size_t(axis)];
  // Each cache position p takes update row j where p == write[b] + j (mod
  // the length in circular mode): positions known at import or computed.
  Shape along(size_t(rank), 1);
  along[size_t(axis)] = length;
  std::vector<float> positions(static_cast<size_t>(length));
  for (int64_t p = 0; p < length; ++p)
    positions[size_t(p)] = float(p);
  Tensor position = Tensor::from(std::move(positions), along);
  Shape perBatch(size_t(rank), 1);
  perBatch[0] = ps[0];
  Tensor start = ctx.has(2) ? ctx.tensor(2).to(DType::f32).reshape(perBatch)
                            : Tensor::full(perBatch, 0.0f);
  Tensor out = past;
  for (int64_t j = 0; j < count; ++j) {
    Tensor target = start + Tensor::scalar(float(j));
    if (mode == "circular")
      target = target - Tensor::scalar(float(length)) *
                            floor(target / Tensor::scalar(float(length)));
    Tensor row = update.slice(axis, j, j + 1);
    out = where(eq(position, target), row, out);
  }
  return single(out);
}

std::vector<Value> swiglu(const NodeContext &ctx) {
  Tensor a = ctx.tensor(0), b = ctx.tensorAs(1, a);
  if (a.shape() != b.shape())
    ctx.fail("inputs of shapes " + detail::shapeText(a.shape()) + " and " +
             detail::shapeText(b.shape()) + " (SwiGLU does not broadcast)");
  Tensor gate = a * sigmoid(a * scalarLike(a, ctx.attrFloat("alpha", 1.0f)));
  return single(gate * b);
}
} // namespace

void onnx_import::addStateConverters(ConverterTable &table) {
  table["LinearAttention"] = linearAttention;
  table["CausalConvWithState"] = causalConvWithState;
  table["TensorScatter"] = tensorScatter;
  table["SwiGLU"] = swiglu;
}
