//===- OnnxAttention.cpp - ONNX Attention and RotaryEmbedding (opset 23) --===//
//
// Attention-23 and later (scaled dot-product attention with a KV cache,
// grouped-query heads, causal and sliding-window masks, softcap) and
// RotaryEmbedding-23, as ONNX's reference defines them, built from matmul,
// softmax and elementwise ops. Masks that depend only on shapes (causal,
// sliding windows) are tables made here; an attention mask the model takes
// at run time is added to them.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include "kiln/NetworkOps.h"

#include <cmath>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// [B, S, H * D] -> [B, H, S, D].
Tensor splitHeads(const NodeContext &ctx, const Tensor &x, int64_t heads, const char *what) {
  const Shape &s = x.shape();
  if (heads < 1 || s[2] % heads)
    ctx.fail(std::string(what) + "'s hidden size " + std::to_string(s[2]) +
             " is not a multiple of its head count " + std::to_string(heads));
  return x.reshape({s[0], s[1], heads, s[2] / heads}).permute({0, 2, 1, 3});
}

/// Each of `heads` heads repeated `times` times in place: [h0, h0, h1, h1].
Tensor repeatHeads(const Tensor &x, int64_t times) {
  if (times == 1)
    return x;
  const Shape &s = x.shape();
  return unsqueeze(x, 2).broadcast_to({s[0], s[1], times, s[2], s[3]})
      .reshape({s[0], s[1] * times, s[2], s[3]});
}

/// The additive bias of the causal and sliding-window masks over
/// [q, kv]: 0 where query i (at absolute position offset + i) may attend
/// key j, -inf elsewhere; empty when neither applies.
std::vector<float> shapeMask(int64_t q, int64_t kv, int64_t offset, bool causal, int64_t left,
                             int64_t right) {
  if (!causal && left < 0 && right < 0)
    return {};
  std::vector<float> bias(size_t(q * kv), 0.0f);
  for (int64_t i = 0; i < q; ++i)
    for (int64_t j = 0; j < kv; ++j) {
      int64_t diff = offset + i - j;
      bool allowed = (!causal || diff >= 0) && (left < 0 || diff <= left) &&
                     (right < 0 || -diff <= right);
      if (!allowed)
        bias[size_t(i * kv + j)] = -INFINITY;
    }
  return bias;
}

/// The bias of an external (static) KV cache, [B, 1, q, kv]: batch b's
/// keys past nonpad_kv_seqlen[b] are padding, and the causal and window
/// masks end where its keys do (query i sits at nonpad[b] - q + i). The
/// lengths may be known at import or computed.
Tensor externalCacheMask(const NodeContext &ctx, int64_t q, int64_t kv, DType dtype) {
  Tensor lengths = ctx.tensor(6).to(DType::f32);
  int64_t batch = lengths.numel();
  lengths = lengths.reshape({batch, 1, 1, 1});
  auto iota = [](int64_t n, Shape shape) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[size_t(i)] = float(i);
    return Tensor::from(std::move(v), std::move(shape));
  };
  Tensor i = iota(q, {1, 1, q, 1}), j = iota(kv, {1, 1, 1, kv});
  Tensor diff = lengths - Tensor::scalar(float(q)) + i - j; // offset + i - j
  // Each condition as 1 or 0; their product allows a key.
  auto flag = [](const Tensor &c) { return where(c, Tensor::scalar(1.0f), Tensor::scalar(0.0f)); };
  Tensor allowed = flag(lt(j, lengths));
  if (ctx.attrInt("is_causal", 0))
    allowed = allowed * flag(ge(diff, Tensor::scalar(0.0f)));
  if (int64_t left = ctx.attrInt("left_window_size", -1); left >= 0)
    allowed = allowed * flag(le(diff, Tensor::scalar(float(left))));
  if (int64_t right = ctx.attrInt("right_window_size", -1); right >= 0)
    allowed = allowed * flag(ge(diff, Tensor::scalar(float(-right))));
  Tensor bias = where(gt(allowed, Tensor::scalar(0.5f)), Tensor::scalar(0.0f),
                      Tensor::scalar(-INFINITY));
  return dtype == DType::f32 ? bias : bias.to(dtype);
}

std::vector<Value> attention(const NodeContext &ctx) {
  Tensor q = ctx.tensor(0), k = ctx.tensorAs(1, q), v = ctx.tensorAs(2, q);
  size_t rank = q.shape().size();
  if ((rank != 3 && rank != 4) || k.shape().size() != rank || v.shape().size() != rank)
    ctx.fail("Q, K and V must all be rank 3 or all rank 4");
  if (ctx.has(6) && ctx.has(4))
    ctx.fail("nonpad_kv_seqlen (an external cache) cannot be combined with past_key");
  if (rank == 3) {
    int64_t qHeads = ctx.attrInt("q_num_heads", 0), kvHeads = ctx.attrInt("kv_num_heads", 0);
    if (qHeads < 1 || kvHeads < 1)
      ctx.fail("rank-3 inputs need q_num_heads and kv_num_heads");
    q = splitHeads(ctx, q, qHeads, "Q");
    k = splitHeads(ctx, k, kvHeads, "K");
    v = splitHeads(ctx, v, kvHeads, "V");
  }
  if (ctx.has(4) != ctx.has(5))
    ctx.fail("past_key and past_value must be given together");
  int64_t past = 0;
  if (ctx.has(4)) {
    Tensor pastKey = ctx.tensorAs(4, q), pastValue = ctx.tensorAs(5, q);
    past = pastKey.shape()[2];
    k = concat({pastKey, k}, 2);
    v = concat({pastValue, v}, 2);
  }
  Tensor presentKey = k, presentValue = v;
  // f16 and bf16 attention computes in f32 and rounds once at the end, as
  // fused attention kernels do: a rounding after each step (the scores, the
  // weights) costs up to two units in the last place of the output.
  const DType given = q.dtype();
  if (given == DType::f16 || given == DType::bf16) {
    q = q.to(DType::f32);
    k = k.to(DType::f32);
    v = v.to(DType::f32);
  }
  const Shape &qs = q.shape(), &ks = k.shape();
  int64_t qLen = qs[2], kvLen = ks[2];
  if (qs[1] != ks[1]) {
    if (ks[1] < 1 || qs[1] % ks[1] || v.shape()[1] != ks[1])
      ctx.fail(std::to_string(qs[1]) + " query heads for " + std::to_string(ks[1]) +
               " key heads: grouped-query attention needs a multiple");
    k = repeatHeads(k, qs[1] / ks[1]);
    v = repeatHeads(v, qs[1] / ks[1]);
  }

  // The bias: the shapes' masks, then the model's mask (padded to the keys
  // with "not allowed").
  std::vector<float> fixed =
      shapeMask(qLen, kvLen, past, ctx.attrInt("is_causal", 0) != 0,
                ctx.attrInt("left_window_size", -1), ctx.attrInt("right_window_size", -1));
  std::optional<Tensor> bias;
  if (ctx.has(6))
    bias = externalCacheMask(ctx, qLen, kvLen, q.dtype());
  else if (!fixed.empty())
    bias = Tensor::from(fixed, {qLen, kvLen}, q.dtype());
  if (ctx.has(3)) {
    Tensor mask = ctx.tensor(3);
    // (A boolean mask known at import arrives as integers 0 and 1.)
    const Value &given = ctx.input(3);
    bool allowList = mask.dtype() == DType::boolean ||
                     (given.ints && given.elemType == onnx::TensorProto::BOOL);
    if (allowList)
      mask = where(ne(mask.to(DType::f32), Tensor::scalar(0.0f)), scalarLike(q, 0.0f),
                   scalarLike(q, -INFINITY));
    else
      mask = ctx.tensorAs(3, q);
    if (mask.dtype() != q.dtype())
      mask = mask.to(q.dtype());
    int64_t missing = kvLen - mask.shape().back();
    if (missing < 0)
      ctx.fail("the attention mask covers " + std::to_string(mask.shape().back()) +
               " keys of " + std::to_string(kvLen));
    if (missing > 0) {
      std::vector<int64_t> low(mask.shape().size(), 0), high(mask.shape().size(), 0);
      high.back() = missing;
      mask = kiln::pad(mask, low, high, -INFINITY);
    }
    bias = bias ? *bias + mask : mask;
  }

  float scale = ctx.attrFloat("scale", 1.0f / std::sqrt(float(qs[3])));
  Tensor root = scalarLike(q, std::sqrt(scale));
  Tensor scores = matmul(q * root, (k * root).transpose(2, 3));
  float softcap = ctx.attrFloat("softcap", 0.0f);
  if (softcap > 0)
    scores = tanh(scores / scalarLike(scores, softcap)) * scalarLike(scores, softcap);
  int64_t mode = ctx.attrInt("qk_matmul_output_mode", 0);
  Tensor qk = scores;
  if (bias)
    scores = scores + *bias;
  if (mode == 2)
    qk = scores;
  // softmax_precision: the softmax in that float type, as the reference.
  Tensor weights = scores;
  if (auto precision = ctx.attribute("softmax_precision")) {
    std::optional<DType> dtype = computedDType(precision->i());
    if (!dtype || *dtype == DType::i32 || *dtype == DType::boolean)
      ctx.fail("softmax_precision " + std::to_string(precision->i()) + " is not a float type");
    weights = weights.to(*dtype);
  }
  weights = softmax(weights, -1);
  if (weights.dtype() != q.dtype())
    weights = weights.to(q.dtype());
  // A row whose every key is masked out has no weights: zeros, not NaN.
  if (bias) {
    Tensor blocked = eq(amax(*bias, {-1}, true), scalarLike(*bias, -INFINITY));
    weights = where(blocked, scalarLike(weights, 0.0f), weights);
  }
  if (mode == 3)
    qk = weights;
  else if (mode < 0 || mode > 3)
    ctx.fail("qk_matmul_output_mode " + std::to_string(mode) + " is not 0 to 3");
  Tensor y = matmul(weights, v);
  if (rank == 3) {
    const Shape &s = y.shape();
    y = y.permute({0, 2, 1, 3}).reshape({s[0], s[2], s[1] * s[3]});
  }
  if (y.dtype() != given) {
    y = y.to(given);
    qk = qk.to(given);
  }
  return {Value::of(y), Value::of(presentKey), Value::of(presentValue), Value::of(qk)};
}

std::vector<Value> rotaryEmbedding(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0), cosCache = ctx.tensorAs(1, x), sinCache = ctx.tensorAs(2, x);
  Shape original = x.shape();
  // Rotated in place along the last axis: [B, H, S, D] as it is, [B, S,
  // hidden] as [B, S, H, D]; the caches' rows ([B, S, D / 2]) broadcast
  // over the heads. (No transposes: views stacked on views make kernels
  // whose index arithmetic grows with every one.)
  int64_t headAxis = 1;
  if (original.size() == 3) {
    int64_t heads = ctx.attrInt("num_heads", 0);
    if (heads < 1 || original[2] % heads)
      ctx.fail("a rank-3 input needs num_heads dividing its hidden size");
    x = x.reshape({original[0], original[1], heads, original[2] / heads});
    headAxis = 2;
  } else if (original.size() != 4) {
    ctx.fail("the input must be rank 3 or 4");
  }
  const Shape s = x.shape();
  int64_t batch = s[0], seq = s[headAxis == 1 ? 2 : 1], width = s[3];
  int64_t dim = ctx.attrInt("rotary_embedding_dim", 0);
  dim = dim == 0 ? width : dim;
  if (dim % 2 || dim > width)
    ctx.fail("rotary_embedding_dim " + std::to_string(dim) + " must be even and at most " +
             std::to_string(width));
  int64_t half = dim / 2;
  if (ctx.has(3)) {
    // Rows of the caches at each position.
    const Value &ids = ctx.input(3);
    auto rows = [&](const Tensor &cache) {
      if (ids.ints)
        return index_select(cache, 0, *ids.ints);
      Tensor at = ctx.tensor(3);
      at = at.reshape({at.numel()});
      return index_select(cache, 0, at);
    };
    cosCache = rows(cosCache).reshape({batch, seq, half});
    sinCache = rows(sinCache).reshape({batch, seq, half});
  }
  if (cosCache.shape().back() != half || sinCache.shape().back() != half)
    ctx.fail("the caches' last dimension must be rotary_embedding_dim / 2 = " +
             std::to_string(half));
  Tensor c = unsqueeze(cosCache, headAxis), sn = unsqueeze(sinCache, headAxis);
  bool interleaved = ctx.attrInt("interleaved", 0) != 0;
  Tensor x1 = interleaved ? x.slice(3, 0, dim, 2) : x.slice(3, 0, half);
  Tensor x2 = interleaved ? x.slice(3, 1, dim, 2) : x.slice(3, half, dim);
  Tensor real = c * x1 - sn * x2, imag = sn * x1 + c * x2;
  // One concat of every part: a concat of concats fuses into kernels whose
  // size grows with the nesting.
  std::vector<Tensor> parts;
  if (interleaved)
    parts.push_back(concat({unsqueeze(real, 4), unsqueeze(imag, 4)}, 4)
                        .reshape({s[0], s[1], s[2], dim}));
  else
    parts = {real, imag};
  if (dim < width)
    parts.push_back(x.slice(3, dim, width));
  Tensor y = parts.size() == 1 ? parts[0] : concat(parts, 3);
  return single(original.size() == 3 ? y.reshape(original) : y);
}
/// FlexAttention (ai.onnx.preview): attention of rank-4 Q, K and V with
/// grouped heads, whose scores and probabilities the model may rewrite by
/// graphs (score_mod, prob_mod) of one input, converted inline. f16 and
/// bf16 scores are taken to f32 (or softmax_precision) for the softmax.
std::vector<Value> flexAttention(const NodeContext &ctx) {
  Tensor q = ctx.tensor(0), k = ctx.tensorAs(1, q), v = ctx.tensorAs(2, q);
  const Shape qs = q.shape(), ks = k.shape(), vs = v.shape();
  if (qs.size() != 4 || ks.size() != 4 || vs.size() != 4)
    ctx.fail("Q, K and V must be rank 4");
  if (ks[3] != qs[3] || ks[2] != vs[2] || ks[1] != vs[1] || ks[1] < 1 || qs[1] % ks[1])
    ctx.fail("Q " + detail::shapeText(qs) + ", K " + detail::shapeText(ks) + " and V " +
             detail::shapeText(vs) + " do not make grouped-query attention");
  k = repeatHeads(k, qs[1] / ks[1]);
  v = repeatHeads(v, qs[1] / ks[1]);
  float scale = ctx.attrFloat("scale", 1.0f / std::sqrt(float(qs[3])));
  Tensor root = scalarLike(q, std::sqrt(scale));
  Tensor scores = matmul(q * root, (k * root).transpose(2, 3));
  DType compute = DType::f32;
  if (const onnx::AttributeProto *precision = ctx.attribute("softmax_precision")) {
    std::optional<DType> dtype = computedDType(precision->i());
    if (!dtype || *dtype == DType::i32 || *dtype == DType::boolean)
      ctx.fail("softmax_precision " + std::to_string(precision->i()) + " is not a float type");
    compute = *dtype;
  }
  if (scores.dtype() != compute)
    scores = scores.to(compute);
  auto modified = [&](const char *name, const Tensor &t) {
    const onnx::AttributeProto *graph = ctx.attribute(name);
    if (!graph)
      return t;
    std::vector<Value> out = ctx.runSubgraph(graph->g(), {Value::of(t)});
    if (out.size() != 1 || !out[0].tensor || out[0].shape != t.shape())
      ctx.fail(std::string(name) + " must compute one tensor of the scores' shape " +
               detail::shapeText(t.shape()));
    return out[0].tensor->dtype() == compute ? *out[0].tensor : out[0].tensor->to(compute);
  };
  Tensor probs = modified("prob_mod", softmax(modified("score_mod", scores), -1));
  Tensor y = matmul(probs, v.dtype() == compute ? v : v.to(compute));
  return single(y.dtype() == v.dtype() ? y : y.to(v.dtype()));
}
} // namespace

void onnx_import::addAttentionConverters(ConverterTable &table) {
  table["FlexAttention"] = flexAttention;
  table["Attention"] = attention;
  table["RotaryEmbedding"] = rotaryEmbedding;
}
