//===- OnnxOptimizers.cpp - ai.onnx.preview.training's optimizer steps ---===//
//
// Adagrad, Adam and Momentum (standard and Nesterov): one update of N
// tensors from their gradients, elementwise, as ONNX's reference defines
// them. Inputs are R (the learning rate), T (the step count), then the N
// tensors, their gradients and their state (accumulators, momentums);
// outputs are the new tensors, then the new state, in that order.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
Tensor scalar(float v) { return Tensor::scalar(v); }

/// The number of tensors updated: inputs are R, T and `groups` lists of N.
int64_t tensorsUpdated(const NodeContext &ctx, int64_t groups) {
  int64_t n = (int64_t(ctx.numInputs()) - 2) / groups;
  if (n < 1 || 2 + n * groups != int64_t(ctx.numInputs()))
    ctx.fail(std::to_string(ctx.numInputs()) + " inputs; want R, T and " +
             std::to_string(groups) + " lists of as many tensors");
  return n;
}

/// g + norm_coefficient * x: the gradient with its regularization term.
Tensor regularized(const NodeContext &ctx, const Tensor &x, const Tensor &g) {
  return g + scalar(ctx.attrFloat("norm_coefficient", 0.0f)) * x;
}

/// Results in the tensors' own dtype.
Value like(const Tensor &result, const Tensor &original) {
  return Value::of(result.dtype() == original.dtype() ? result : result.to(original.dtype()));
}

std::vector<Value> adagrad(const NodeContext &ctx) {
  int64_t n = tensorsUpdated(ctx, 3);
  Tensor r = asF32(ctx.tensor(0)).reshape({}), t = asF32(ctx.tensor(1)).reshape({});
  Tensor rate = r / (scalar(1.0f) + t * scalar(ctx.attrFloat("decay_factor", 0.0f)));
  float epsilon = ctx.attrFloat("epsilon", 0.0f);
  std::vector<Value> xs, hs;
  for (int64_t i = 0; i < n; ++i) {
    Tensor x0 = ctx.tensor(size_t(2 + i)), x = asF32(x0);
    Tensor g = regularized(ctx, x, asF32(ctx.tensor(size_t(2 + n + i))));
    Tensor h0 = ctx.tensor(size_t(2 + 2 * n + i));
    Tensor h = asF32(h0) + g * g;
    xs.push_back(like(x - rate * g / (sqrt(h) + scalar(epsilon)), x0));
    hs.push_back(like(h, h0));
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

std::vector<Value> adam(const NodeContext &ctx) {
  int64_t n = tensorsUpdated(ctx, 4);
  Tensor r = asF32(ctx.tensor(0)).reshape({}), t = asF32(ctx.tensor(1)).reshape({});
  float alpha = ctx.attrFloat("alpha", 0.9f), beta = ctx.attrFloat("beta", 0.999f);
  float epsilon = ctx.attrFloat("epsilon", 0.0f);
  float post = ctx.attrFloat("norm_coefficient_post", 0.0f);
  // Bias correction from the second step on: r sqrt(1 - beta^t) / (1 - alpha^t).
  Tensor corrected = r * sqrt(scalar(1.0f) - pow(scalar(beta), t)) /
                     (scalar(1.0f) - pow(scalar(alpha), t));
  Tensor rate = where(gt(t, scalar(0.0f)), corrected, r);
  std::vector<Value> xs, vs, hs;
  for (int64_t i = 0; i < n; ++i) {
    Tensor x0 = ctx.tensor(size_t(2 + i)), x = asF32(x0);
    Tensor g = regularized(ctx, x, asF32(ctx.tensor(size_t(2 + n + i))));
    Tensor v0 = ctx.tensor(size_t(2 + 2 * n + i)), h0 = ctx.tensor(size_t(2 + 3 * n + i));
    Tensor v = scalar(alpha) * asF32(v0) + scalar(1.0f - alpha) * g;
    Tensor h = scalar(beta) * asF32(h0) + scalar(1.0f - beta) * (g * g);
    Tensor step = x - rate * (v / (sqrt(h) + scalar(epsilon)));
    xs.push_back(like(scalar(1.0f - post) * step, x0));
    vs.push_back(like(v, v0));
    hs.push_back(like(h, h0));
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

std::vector<Value> momentum(const NodeContext &ctx) {
  int64_t n = tensorsUpdated(ctx, 3);
  std::string mode = ctx.attrString("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    ctx.fail("mode '" + mode + "' (standard or nesterov)");
  for (const char *required : {"alpha", "beta", "norm_coefficient"})
    if (!ctx.attribute(required))
      ctx.fail(std::string("the attribute '") + required + "' is required");
  Tensor r = asF32(ctx.tensor(0)).reshape({}), t = asF32(ctx.tensor(1)).reshape({});
  float alpha = ctx.attrFloat("alpha", 0.0f);
  // The gradient's coefficient is 1 on the first step.
  Tensor beta = where(gt(t, scalar(0.0f)), scalar(ctx.attrFloat("beta", 0.0f)), scalar(1.0f));
  std::vector<Value> xs, vs;
  for (int64_t i = 0; i < n; ++i) {
    Tensor x0 = ctx.tensor(size_t(2 + i)), x = asF32(x0);
    Tensor g = regularized(ctx, x, asF32(ctx.tensor(size_t(2 + n + i))));
    Tensor v0 = ctx.tensor(size_t(2 + 2 * n + i));
    Tensor v = scalar(alpha) * asF32(v0) + beta * g;
    Tensor direction = mode == "nesterov" ? g + scalar(alpha) * v : v;
    xs.push_back(like(x - r * direction, x0));
    vs.push_back(like(v, v0));
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}
} // namespace

void onnx_import::addOptimizerConverters(ConverterTable &table) {
  table["Adagrad"] = adagrad;
  table["Adam"] = adam;
  table["Momentum"] = momentum;
}
