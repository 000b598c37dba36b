//===- KilnOps.h - the networks of Networks.h on Kiln's Tensor API --------===//
//
// Weights come from a callback (name, shape) -> Tensor: random ones for a
// benchmark, or .npy files saved from a PyTorch state_dict.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_KILNOPS_H
#define KILN_EXAMPLES_KILNOPS_H

#include "Networks.h"

#include "kiln/kiln.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

namespace kiln::networks {

struct KilnOps {
  using T = Tensor;
  std::function<Tensor(const std::string &, const Shape &)> weight;

  Tensor param(const std::string &name, const Shape &shape) { return weight(name, shape); }
  Tensor conv2d(const Tensor &x, const Tensor &w, int64_t stride, int64_t pad, int64_t groups) {
    return kiln::conv2d(x, w, {stride, stride}, {pad, pad}, {1, 1}, groups);
  }
  Tensor batch_norm(const Tensor &x, const std::string &bn, int64_t channels) {
    Shape c = {channels};
    return kiln::batch_norm(x, param(bn + ".running_mean", c), param(bn + ".running_var", c),
                            param(bn + ".weight", c), param(bn + ".bias", c));
  }
  Tensor relu(const Tensor &x) { return kiln::relu(x); }
  Tensor relu6(const Tensor &x) { return kiln::relu6(x); }
  Tensor gelu(const Tensor &x) { return kiln::gelu(x); }
  Tensor add(const Tensor &a, const Tensor &b) { return a + b; }
  Tensor max_pool2d(const Tensor &x, int64_t k, int64_t s, int64_t p) {
    return kiln::max_pool2d(x, {k, k}, {s, s}, {p, p});
  }
  Tensor max_pool2d_ceil(const Tensor &x, int64_t k, int64_t s) {
    return kiln::max_pool2d(x, {k, k}, {s, s}, {0, 0}, true);
  }
  Tensor bias(const Tensor &x, const Tensor &b) { return x + b.reshape({b.shape()[0], 1, 1}); }
  Tensor cat(const Tensor &a, const Tensor &b) { return concat({a, b}, 1); }
  Tensor global_pool(const Tensor &x) { return flatten(adaptive_avg_pool2d(x, {1, 1}), 1); }
  Tensor linear(const Tensor &x, const Tensor &w, const Tensor &b) { return kiln::linear(x, w, b); }
  Tensor layer_norm(const Tensor &x, const Tensor &g, const Tensor &b) {
    return kiln::layer_norm(x, g, b);
  }
  Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v) {
    return scaled_dot_product_attention(q, k, v);
  }
  std::vector<Tensor> chunk3(const Tensor &x) { return chunk(x, 3, -1); }
  Tensor reshape(const Tensor &x, const Shape &shape) { return x.reshape(shape); }
  Tensor permute(const Tensor &x, const std::vector<int64_t> &order) { return x.permute(order); }
};

/// Random weights as PyTorch initializes them closely enough for timing
/// and for finite outputs: N(0, 1/fan_in) for weights, batch norm's
/// running statistics and affine parameters near their defaults. Each
/// name gets its tensor once (committed to `device`), so a graph built
/// again reuses them.
class RandomWeights {
public:
  explicit RandomWeights(Device device) : device_(std::move(device)) {}
  Tensor operator()(const std::string &name, const Shape &shape) {
    auto it = made_.find(name);
    if (it != made_.end())
      return it->second;
    auto ends = [&](const char *suffix) {
      return name.size() >= std::strlen(suffix) &&
             name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0;
    };
    int64_t fanIn = 1;
    for (size_t i = 1; i < shape.size(); ++i)
      fanIn *= shape[i];
    Tensor t;
    if (ends("running_var"))
      t = Tensor::rand(shape) * 0.5f + 0.75f;
    else if (ends("running_mean") || (shape.size() == 1 && ends(".bias")))
      t = Tensor::randn(shape) * 0.1f;
    else if (shape.size() == 1) // norm weights
      t = Tensor::rand(shape) * 0.5f + 0.75f;
    else
      t = Tensor::randn(shape) * (1.0f / std::sqrt(float(fanIn)));
    t = Tensor::from(t.to_vector(), shape, device_); // a committed leaf
    realize({t});
    return made_[name] = t;
  }

private:
  Device device_;
  std::map<std::string, Tensor> made_;
};

} // namespace kiln::networks

#endif // KILN_EXAMPLES_KILNOPS_H
