//===- OnnxRecurrent.cpp - ONNX RNN, GRU and LSTM, unrolled ---------------===//
//
// The recurrent operators unrolled over the sequence, which import knows:
// each step is the gates' two products (input and hidden state), the
// biases, the activations and the state update, as ONNX defines them (gate
// order i, o, f, c for LSTM and z, r, h for GRU), forward, reverse or both
// directions. Every sequence must run its whole length (sequence_lens, if
// given, all equal to it).
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include <algorithm>
#include <cmath>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
enum class Cell { rnn, gru, lstm };

using Activation = std::function<Tensor(const Tensor &)>;

Activation activationNamed(const NodeContext &ctx, const std::string &name) {
  if (name == "Sigmoid")
    return [](const Tensor &x) { return sigmoid(x); };
  if (name == "Tanh")
    return [](const Tensor &x) { return kiln::tanh(x); };
  if (name == "Relu")
    return [](const Tensor &x) { return relu(x); };
  ctx.fail("activation '" + name + "' is not supported (Sigmoid, Tanh and Relu are)");
}

/// Rows [gate * hidden, (gate + 1) * hidden) of direction `d`'s matrix
/// [dirs, gates * hidden, k], as [k, hidden] for x @ w.
Tensor gateWeights(const Tensor &w, int64_t d, int64_t gate, int64_t hidden) {
  Tensor rows = w.slice(0, d, d + 1).slice(1, gate * hidden, (gate + 1) * hidden);
  return rows.reshape({hidden, w.shape()[2]}).transpose(0, 1);
}

std::vector<Value> recurrent(const NodeContext &ctx, Cell cell) {
  Tensor x = ctx.tensor(0), w = ctx.tensor(1), r = ctx.tensor(2);
  if (ctx.attrInt("layout", 0))
    x = x.transpose(0, 1); // [batch, seq, input] -> [seq, batch, input]
  if (x.shape().size() != 3 || w.shape().size() != 3 || r.shape().size() != 3)
    ctx.fail("X, W and R must have rank 3");
  int64_t seq = x.shape()[0], batch = x.shape()[1];
  int64_t hidden = ctx.attrInt("hidden_size", r.shape()[2]);
  int64_t gates = cell == Cell::lstm ? 4 : cell == Cell::gru ? 3 : 1;
  std::string direction = ctx.attrString("direction", "forward");
  int64_t dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    ctx.fail("direction '" + direction + "' is not one of forward, reverse, bidirectional");
  if (w.shape()[0] != dirs || w.shape()[1] != gates * hidden || r.shape()[2] != hidden)
    ctx.fail("W or R do not have the shape of " + std::to_string(dirs) + " directions of " +
             std::to_string(gates) + " gates of " + std::to_string(hidden));
  if (ctx.has(4))
    for (float length : ctx.constantFloats(4))
      if (int64_t(length) != seq)
        ctx.fail("sequence_lens other than the whole sequence is not supported");
  if (ctx.attribute("clip"))
    ctx.fail("'clip' is not supported");
  if (cell == Cell::lstm && ctx.attrInt("input_forget", 0))
    ctx.fail("input_forget = 1 is not supported");
  // Activations: f, g (and h for LSTM) per direction.
  std::vector<std::string> names = {"Sigmoid", "Tanh", "Tanh"};
  if (cell == Cell::rnn)
    names = {"Tanh"};
  else if (cell == Cell::gru)
    names = {"Sigmoid", "Tanh"};
  std::vector<std::string> given;
  if (const onnx::AttributeProto *a = ctx.attribute("activations"))
    given.assign(a->strings().begin(), a->strings().end());
  size_t perDirection = names.size();
  if (!given.empty() && given.size() != perDirection * size_t(dirs))
    ctx.fail("'activations' needs " + std::to_string(perDirection * size_t(dirs)) + " names");
  bool linearBeforeReset = ctx.attrInt("linear_before_reset", 0) != 0;

  std::vector<Tensor> lastH, lastC;
  std::vector<std::vector<Tensor>> outputs(static_cast<size_t>(dirs));
  for (int64_t d = 0; d < dirs; ++d) {
    std::vector<Activation> act;
    for (size_t i = 0; i < perDirection; ++i)
      act.push_back(activationNamed(ctx, given.empty() ? names[i] : given[size_t(d) * perDirection + i]));
    std::vector<Tensor> wg, rg, bias;
    for (int64_t g = 0; g < gates; ++g) {
      wg.push_back(gateWeights(w, d, g, hidden));
      rg.push_back(gateWeights(r, d, g, hidden));
    }
    // B is [dirs, 2 gates hidden]: the input biases, then the hidden ones.
    auto biasOf = [&](int64_t part, int64_t g) -> std::optional<Tensor> {
      if (!ctx.has(3))
        return std::nullopt;
      int64_t at = (part * gates + g) * hidden;
      return ctx.tensor(3).slice(0, d, d + 1).slice(1, at, at + hidden).reshape({hidden});
    };
    auto state = [&](size_t input) {
      return ctx.has(input) ? ctx.tensor(input).slice(0, d, d + 1).reshape({batch, hidden})
                            : Tensor::zeros({batch, hidden});
    };
    Tensor h = state(5);
    Tensor c = cell == Cell::lstm ? state(6) : Tensor();
    std::optional<Tensor> peep = cell == Cell::lstm && ctx.has(7)
                                     ? std::optional(ctx.tensor(7).slice(0, d, d + 1).reshape({3 * hidden}))
                                     : std::nullopt;
    bool backward = direction == "reverse" || d == 1;
    for (int64_t step = 0; step < seq; ++step) {
      int64_t t = backward ? seq - 1 - step : step;
      Tensor xt = x.slice(0, t, t + 1).reshape({batch, x.shape()[2]});
      auto pre = [&](int64_t g) { // x Wg + Wbg (+ Rbg unless kept apart)
        Tensor v = matmul(xt, wg[size_t(g)]);
        if (auto b = biasOf(0, g))
          v = v + *b;
        return v;
      };
      auto rec = [&](int64_t g, const Tensor &state) {
        Tensor v = matmul(state, rg[size_t(g)]);
        if (auto b = biasOf(1, g))
          v = v + *b;
        return v;
      };
      if (cell == Cell::rnn) {
        h = act[0](pre(0) + rec(0, h));
      } else if (cell == Cell::gru) {
        Tensor z = act[0](pre(0) + rec(0, h)), rr = act[0](pre(1) + rec(1, h));
        Tensor candidate = linearBeforeReset ? act[1](pre(2) + rr * rec(2, h))
                                             : act[1](pre(2) + rec(2, rr * h));
        h = (scalarLike(z, 1.0f) - z) * candidate + z * h;
      } else {
        auto peephole = [&](int64_t k, const Tensor &state) {
          return peep ? state * peep->slice(0, k * hidden, (k + 1) * hidden) : Tensor::zeros_like(state);
        };
        Tensor i = act[0](pre(0) + rec(0, h) + peephole(0, c));
        Tensor f = act[0](pre(2) + rec(2, h) + peephole(2, c));
        Tensor candidate = act[1](pre(3) + rec(3, h));
        c = f * c + i * candidate;
        Tensor o = act[0](pre(1) + rec(1, h) + peephole(1, c));
        h = o * act[2](c);
      }
      outputs[size_t(d)].push_back(h);
    }
    if (backward)
      std::reverse(outputs[size_t(d)].begin(), outputs[size_t(d)].end());
    lastH.push_back(h.reshape({1, batch, hidden}));
    if (cell == Cell::lstm)
      lastC.push_back(c.reshape({1, batch, hidden}));
  }
  // Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]).
  std::vector<Tensor> steps;
  for (int64_t t = 0; t < seq; ++t) {
    std::vector<Tensor> perDir;
    for (int64_t d = 0; d < dirs; ++d)
      perDir.push_back(outputs[size_t(d)][size_t(t)].reshape({1, 1, batch, hidden}));
    steps.push_back(dirs == 1 ? perDir[0] : concat(perDir, 1));
  }
  Tensor y = seq == 1 ? steps[0] : concat(steps, 0);
  Tensor yh = dirs == 1 ? lastH[0] : concat(lastH, 0);
  bool batchFirst = ctx.attrInt("layout", 0) != 0;
  if (batchFirst) {
    y = y.permute({2, 0, 1, 3});
    yh = yh.transpose(0, 1);
  }
  std::vector<Value> out = {Value::of(y), Value::of(yh)};
  if (cell == Cell::lstm) {
    Tensor yc = dirs == 1 ? lastC[0] : concat(lastC, 0);
    out.push_back(Value::of(batchFirst ? yc.transpose(0, 1) : yc));
  }
  return out;
}
} // namespace

void onnx_import::addRecurrentConverters(ConverterTable &table) {
  table["RNN"] = [](const NodeContext &c) { return recurrent(c, Cell::rnn); };
  table["GRU"] = [](const NodeContext &c) { return recurrent(c, Cell::gru); };
  table["LSTM"] = [](const NodeContext &c) { return recurrent(c, Cell::lstm); };
}
