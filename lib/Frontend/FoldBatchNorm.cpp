//===- FoldBatchNorm.cpp - batch norms folded into their convolutions -----===//
//
// batch_norm (lib/Frontend/Tensor.cpp) records
//   add(mul(sub(x, reshape(mean)), mul(reshape(gamma), rsqrt(add(reshape(var),
//       eps)))), reshape(beta))
// On x = conv2d(input, W), W and the four parameters weights of x's dtype
// (f32, f16 or bf16; leaves that are not model inputs) and the convolution read
// by the batch norm alone, that is
// conv2d(input, W * s) + reshape(beta - mean * s), s = gamma / sqrt(var +
// eps) per output channel, computed here in double (and rounded once to
// f16 or bf16 when the weights are: a half model's epilogue then adds a bias
// instead of computing a square root per element).
//
//===----------------------------------------------------------------------===//

#include "lib/Frontend/FoldBatchNorm.h"

#include <cmath>
#include <string>
#include <unordered_map>

using namespace kiln;

namespace {

using NodePtr = std::shared_ptr<Node>;

/// A new node like `n` (everything but its buffer) over `operands`.
NodePtr cloneWith(const Node &n, std::vector<NodePtr> operands) {
  auto c = std::make_shared<Node>();
  c->kind = n.kind;
  c->op = n.op;
  c->operands = std::move(operands);
  c->shape = n.shape;
  c->dtype = n.dtype;
  c->device = n.device;
  c->loc = n.loc;
  c->label = n.label;
  c->call = n.call;
  c->stack = n.stack;
  c->host = n.host;
  c->hostInts = n.hostInts;
  c->value = n.value;
  c->permutation = n.permutation;
  c->starts = n.starts;
  c->steps = n.steps;
  c->axes = n.axes;
  c->keepdims = n.keepdims;
  c->window = n.window;
  c->stride = n.stride;
  c->padding = n.padding;
  c->dilation = n.dilation;
  c->groups = n.groups;
  c->ceilMode = n.ceilMode;
  c->causal = n.causal;
  c->low = n.low;
  c->high = n.high;
  return c;
}

bool isOp(const NodePtr &n, OpKind kind, const char *op) {
  return n && n->kind == kind && n->op == op && !n->realized();
}

class Folder {
public:
  Folder(const std::function<bool(const Node *)> &isModelInput,
         const std::function<std::vector<float>(const Node &)> &valuesOf)
      : isModelInput(isModelInput), valuesOf(valuesOf) {}

  std::vector<NodePtr> run(const std::vector<NodePtr> &roots) {
    countUses(roots);
    std::vector<NodePtr> out;
    for (const NodePtr &root : roots)
      out.push_back(rewrite(root));
    return out;
  }

private:
  /// How many operand slots read each node, over the graph of the roots.
  void countUses(const std::vector<NodePtr> &roots) {
    std::vector<Node *> stack;
    std::unordered_map<const Node *, bool> seen;
    for (const NodePtr &root : roots)
      if (!seen[root.get()]) {
        seen[root.get()] = true;
        stack.push_back(root.get());
      }
    while (!stack.empty()) {
      Node *n = stack.back();
      stack.pop_back();
      if (n->realized())
        continue;
      for (const NodePtr &operand : n->operands) {
        ++uses[operand.get()];
        if (!seen[operand.get()]) {
          seen[operand.get()] = true;
          stack.push_back(operand.get());
        }
      }
    }
  }

  /// A weight of `dtype` (a leaf of the graph, not a model input) of
  /// `count` values: its values, read once.
  const std::vector<float> *weight(const NodePtr &n, size_t count, DType dtype) {
    // (A realized tensor is a leaf whatever computed it: an f16 model's
    // weights are realized casts.)
    if (!n || !(n->realized() || (n->kind == OpKind::Input && n->operands.empty())) ||
        n->dtype != dtype || isModelInput(n.get()) ||
        numElements(n->shape) != static_cast<int64_t>(count))
      return nullptr;
    auto [it, fresh] = values.try_emplace(n.get());
    if (fresh)
      it->second = valuesOf(*n);
    return it->second.size() == count ? &it->second : nullptr;
  }

  /// `n` = reshape(p) of a [channels] weight p to [channels, 1, 1], which
  /// broadcasts per channel against [N, channels, H, W]: p's values. (A
  /// [1, channels, 1] view would broadcast along the rows instead.)
  const std::vector<float> *reshapedWeight(const NodePtr &n, size_t channels, DType dtype) {
    const Shape perChannel = {static_cast<int64_t>(channels), 1, 1};
    return isOp(n, OpKind::View, "reshape") && n->operands.size() == 1 && n->shape == perChannel
               ? weight(n->operands[0], channels, dtype)
               : nullptr;
  }

  /// `n` folded, when it is the last node of a batch norm on a foldable
  /// convolution; else nothing.
  NodePtr fold(const NodePtr &n) {
    const DType dtype = n->dtype;
    if (!isOp(n, OpKind::Binary, "add") || n->operands.size() != 2 ||
        (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16))
      return nullptr;
    const NodePtr &scaled = n->operands[0], &betaView = n->operands[1];
    if (!isOp(scaled, OpKind::Binary, "mul") || scaled->operands.size() != 2)
      return nullptr;
    const NodePtr &centered = scaled->operands[0], &scale = scaled->operands[1];
    if (!isOp(centered, OpKind::Binary, "sub") || !isOp(scale, OpKind::Binary, "mul") ||
        centered->operands.size() != 2 || scale->operands.size() != 2)
      return nullptr;
    const NodePtr &conv = centered->operands[0];
    if (!isOp(conv, OpKind::Conv2d, "conv2d") || conv->operands.size() != 2 ||
        conv->dtype != dtype || conv->shape.size() != 4 || uses[conv.get()] != 1)
      return nullptr;
    const NodePtr &root = scale->operands[1];
    if (!isOp(root, OpKind::Unary, "rsqrt") || root->operands.size() != 1)
      return nullptr;
    const NodePtr &shifted = root->operands[0];
    if (!isOp(shifted, OpKind::Binary, "add") || shifted->operands.size() != 2)
      return nullptr;
    const NodePtr &eps = shifted->operands[1];
    if (!eps || eps->kind != OpKind::Constant || !eps->shape.empty() || eps->dtype != dtype)
      return nullptr;
    const size_t channels = static_cast<size_t>(conv->shape[1]);
    const NodePtr &filter = conv->operands[1];
    const std::vector<float> *w =
        weight(filter, static_cast<size_t>(numElements(filter->shape)), dtype);
    const std::vector<float> *mean = reshapedWeight(centered->operands[1], channels, dtype);
    const std::vector<float> *gamma = reshapedWeight(scale->operands[0], channels, dtype);
    const std::vector<float> *var = reshapedWeight(shifted->operands[0], channels, dtype);
    const std::vector<float> *beta = reshapedWeight(betaView, channels, dtype);
    // Every step keeps the convolution's shape (no broadcast widens it).
    if (!w || !mean || !gamma || !var || !beta || filter->shape.empty() ||
        static_cast<size_t>(filter->shape[0]) != channels || n->shape != conv->shape ||
        scaled->shape != conv->shape || centered->shape != conv->shape)
      return nullptr;

    const size_t perChannel = w->size() / channels;
    std::vector<float> folded(w->size()), bias(channels);
    // f16 holds up to 65504: a scale of a near-zero variance (gamma /
    // sqrt(eps), 316 gamma) could carry a folded value past it where the
    // unfolded graph stayed finite. Such a batch norm stays as written.
    const double largest = dtype == DType::f16 ? 65504.0 : dtype == DType::bf16 ? 3.38e38 : 3.4e38;
    for (size_t c = 0; c < channels; ++c) {
      const double s = double((*gamma)[c]) / std::sqrt(double((*var)[c]) + double(eps->value));
      for (size_t i = 0; i < perChannel; ++i) {
        const double v = double((*w)[c * perChannel + i]) * s;
        if (!(std::abs(v) <= largest))
          return nullptr;
        folded[c * perChannel + i] = float(v);
      }
      const double b = double((*beta)[c]) - double((*mean)[c]) * s;
      if (!(std::abs(b) <= largest))
        return nullptr;
      bias[c] = float(b);
    }
    // Named for `describe` after the filter and the batch norm's line.
    std::string site = std::string(n->loc.file_name()) + ":" + std::to_string(n->loc.line());
    std::string filterName = filter->label ? *filter->label
                                           : std::string(filter->loc.file_name()) + ":" +
                                                 std::to_string(filter->loc.line());
    auto source = [&](std::vector<float> values, Shape shape, std::string label) {
      auto s = std::make_shared<Node>();
      s->kind = OpKind::Input;
      s->shape = std::move(shape);
      s->dtype = dtype; // f16 and bf16 values rounded when their bytes are written
      s->device = filter->device;
      s->loc = n->loc;
      s->call = n->call;
      s->host = std::make_shared<const std::vector<float>>(std::move(values));
      s->label = std::make_shared<const std::string>(std::move(label));
      return s;
    };
    NodePtr newFilter =
        source(std::move(folded), filter->shape,
               filterName + " with the batch norm at " + site + " folded in");
    NodePtr newBias = source(std::move(bias), Shape{static_cast<int64_t>(channels)},
                             "bias of the batch norm at " + site + " folded into " + filterName);
    NodePtr newConv = cloneWith(*conv, {done.at(conv->operands[0].get()), newFilter});
    NodePtr biasView = cloneWith(*betaView, {newBias});
    return cloneWith(*n, {newConv, biasView});
  }

  NodePtr rewrite(const NodePtr &n) {
    // Iterative over the graph (a chain of 100k ops must not recurse that
    // deep): operands first, then the node.
    std::vector<std::pair<NodePtr, bool>> stack{{n, false}};
    while (!stack.empty()) {
      auto [node, expanded] = stack.back();
      stack.pop_back();
      if (done.count(node.get()))
        continue;
      if (node->realized() || node->operands.empty()) {
        done[node.get()] = node;
        continue;
      }
      if (!expanded) {
        stack.push_back({node, true});
        for (const NodePtr &operand : node->operands)
          if (!done.count(operand.get()))
            stack.push_back({operand, false});
        continue;
      }
      if (NodePtr folded = fold(node)) {
        done[node.get()] = folded;
        continue;
      }
      std::vector<NodePtr> operands;
      bool changed = false;
      for (const NodePtr &operand : node->operands) {
        operands.push_back(done.at(operand.get()));
        changed |= operands.back() != operand;
      }
      done[node.get()] = changed ? cloneWith(*node, std::move(operands)) : node;
    }
    return done.at(n.get());
  }

  const std::function<bool(const Node *)> &isModelInput;
  const std::function<std::vector<float>(const Node &)> &valuesOf;
  std::unordered_map<const Node *, std::vector<float>> values;
  std::unordered_map<const Node *, unsigned> uses;
  std::unordered_map<const Node *, NodePtr> done;
};

} // namespace

std::vector<std::shared_ptr<Node>>
kiln::foldBatchNorms(const std::vector<std::shared_ptr<Node>> &roots,
                     const std::function<bool(const Node *)> &isModelInput,
                     const std::function<std::vector<float>(const Node &)> &valuesOf) {
  return Folder(isModelInput, valuesOf).run(roots);
}
