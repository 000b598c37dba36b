//===- Networks.h - ResNet-18, MobileNetV2, SqueezeNet, an encoder layer --===//
//
// Four real networks written once, over an `Ops` backend: Kiln's Tensor
// API (KilnOps.h) for running and benchmarking them, and a float64
// reference in the tests. Parameter names are torchvision's and torch.nn's
// state_dict keys, so weights saved from PyTorch load as they are.
//
// An Ops backend provides a tensor type T and: param(name, shape),
// conv2d(x, w, stride, pad, groups), batch_norm(x, prefix) (eps 1e-5),
// relu, relu6, gelu, add, max_pool2d(x, k, s, p), global_pool(x) ([N, C]),
// linear(x, w, b), layer_norm(x, g, b), attention(q, k, v) over [B, H, L, E],
// chunk3(x) (thirds of the last dimension) and reshape/permute views; for
// SqueezeNet also bias(x, b) (per channel), cat(a, b) (along the channels)
// and max_pool2d_ceil(x, k, s) (no padding, ceil_mode).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EXAMPLES_NETWORKS_H
#define KILN_EXAMPLES_NETWORKS_H

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::networks {

struct ResNetConfig {
  int64_t width = 64; ///< channels of the first stage (torchvision: 64)
  int64_t classes = 1000;
};

struct MobileNetConfig {
  double width_mult = 1.0;
  int64_t classes = 1000;
};

struct EncoderConfig {
  int64_t d_model = 768, heads = 12, d_ff = 3072; ///< BERT-base
};

namespace detail {
template <class Ops>
typename Ops::T convBn(Ops &o, typename Ops::T x, const std::string &conv, const std::string &bn,
                       int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t groups = 1) {
  auto w = o.param(conv + ".weight", {cout, cin / groups, k, k});
  return o.batch_norm(o.conv2d(x, w, stride, (k - 1) / 2, groups), bn, cout);
}

/// torchvision's BasicBlock.
template <class Ops>
typename Ops::T basicBlock(Ops &o, typename Ops::T x, const std::string &name, int64_t cin,
                           int64_t cout, int64_t stride) {
  auto h = o.relu(convBn(o, x, name + ".conv1", name + ".bn1", cin, cout, 3, stride));
  h = convBn(o, h, name + ".conv2", name + ".bn2", cout, cout, 3, 1);
  auto skip = stride != 1 || cin != cout
                  ? convBn(o, x, name + ".downsample.0", name + ".downsample.1", cin, cout, 1,
                           stride)
                  : x;
  return o.relu(o.add(h, skip));
}

/// torchvision's _make_divisible: channels rounded to a multiple of 8,
/// never below 90% of the request.
inline int64_t divisible(double v, int64_t divisor = 8) {
  int64_t r = std::max<int64_t>(divisor, int64_t(v + divisor / 2.0) / divisor * divisor);
  return r < 0.9 * v ? r + divisor : r;
}
} // namespace detail

/// torchvision.models.resnet18 in eval mode: [N, 3, H, W] -> [N, classes].
template <class Ops> typename Ops::T resnet18(Ops &o, typename Ops::T x, ResNetConfig c = {}) {
  int64_t w = c.width;
  x = o.relu(detail::convBn(o, x, "conv1", "bn1", 3, w, 7, 2));
  x = o.max_pool2d(x, 3, 2, 1);
  int64_t cin = w;
  for (int stage = 0; stage < 4; ++stage) {
    int64_t cout = w << stage;
    for (int block = 0; block < 2; ++block) {
      std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      x = detail::basicBlock(o, x, name, cin, cout, block == 0 && stage > 0 ? 2 : 1);
      cin = cout;
    }
  }
  return o.linear(o.global_pool(x), o.param("fc.weight", {c.classes, cin}),
                  o.param("fc.bias", {c.classes}));
}

/// torchvision.models.mobilenet_v2 in eval mode: [N, 3, H, W] -> [N, classes].
template <class Ops>
typename Ops::T mobilenet_v2(Ops &o, typename Ops::T x, MobileNetConfig c = {}) {
  using detail::convBn;
  // expansion t, channels, repeats, first stride
  const int64_t settings[7][4] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1},  {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t cin = detail::divisible(32 * c.width_mult);
  int64_t last = detail::divisible(1280 * std::max(1.0, c.width_mult));
  x = o.relu6(convBn(o, x, "features.0.0", "features.0.1", 3, cin, 3, 2));
  int index = 1;
  for (const auto &s : settings) {
    int64_t cout = detail::divisible(double(s[1]) * c.width_mult);
    for (int64_t i = 0; i < s[2]; ++i, ++index) {
      std::string name = "features." + std::to_string(index) + ".conv.";
      int64_t stride = i == 0 ? s[3] : 1, hidden = cin * s[0];
      auto h = x;
      int layer = 0;
      if (s[0] != 1) {
        std::string l = name + std::to_string(layer++);
        h = o.relu6(convBn(o, h, l + ".0", l + ".1", cin, hidden, 1, 1));
      }
      std::string l = name + std::to_string(layer++);
      h = o.relu6(convBn(o, h, l + ".0", l + ".1", hidden, hidden, 3, stride, hidden));
      std::string conv = name + std::to_string(layer), bn = name + std::to_string(layer + 1);
      h = convBn(o, h, conv, bn, hidden, cout, 1, 1);
      x = stride == 1 && cin == cout ? o.add(x, h) : h;
      cin = cout;
    }
  }
  std::string f = "features." + std::to_string(index);
  x = o.relu6(convBn(o, x, f + ".0", f + ".1", cin, last, 1, 1));
  return o.linear(o.global_pool(x), o.param("classifier.1.weight", {c.classes, last}),
                  o.param("classifier.1.bias", {c.classes}));
}

/// torchvision.models.squeezenet1_1 in eval mode (dropout is the
/// identity): [N, 3, H, W] -> [N, classes].
template <class Ops>
typename Ops::T squeezenet1_1(Ops &o, typename Ops::T x, int64_t classes = 1000) {
  auto conv = [&](const typename Ops::T &in, const std::string &name, int64_t cin, int64_t cout,
                  int64_t k, int64_t stride) {
    auto y = o.conv2d(in, o.param(name + ".weight", {cout, cin, k, k}), stride, (k - 1) / 2, 1);
    return o.relu(o.bias(y, o.param(name + ".bias", {cout})));
  };
  auto fire = [&](const typename Ops::T &in, int index, int64_t cin, int64_t squeeze,
                  int64_t expand) {
    std::string name = "features." + std::to_string(index);
    auto s = conv(in, name + ".squeeze", cin, squeeze, 1, 1);
    return o.cat(conv(s, name + ".expand1x1", squeeze, expand, 1, 1),
                 conv(s, name + ".expand3x3", squeeze, expand, 3, 1));
  };
  // (The stem has no padding: conv picks (k - 1) / 2, so it is written here.)
  x = o.relu(o.bias(o.conv2d(x, o.param("features.0.weight", {64, 3, 3, 3}), 2, 0, 1),
                    o.param("features.0.bias", {64})));
  x = o.max_pool2d_ceil(x, 3, 2);
  x = fire(fire(x, 3, 64, 16, 64), 4, 128, 16, 64);
  x = o.max_pool2d_ceil(x, 3, 2);
  x = fire(fire(x, 6, 128, 32, 128), 7, 256, 32, 128);
  x = o.max_pool2d_ceil(x, 3, 2);
  x = fire(fire(x, 9, 256, 48, 192), 10, 384, 48, 192);
  x = fire(fire(x, 11, 384, 64, 256), 12, 512, 64, 256);
  return o.global_pool(conv(x, "classifier.1", 512, classes, 1, 1));
}

/// torch.nn.TransformerEncoderLayer(d_model, nhead, d_ff, activation="gelu",
/// batch_first=True) in eval mode (post-norm): [B, L, d] -> [B, L, d].
template <class Ops>
typename Ops::T encoder_layer(Ops &o, typename Ops::T x, EncoderConfig c = {}) {
  int64_t b = x.shape()[0], l = x.shape()[1], d = c.d_model, h = c.heads, e = d / h;
  auto qkv = o.linear(x, o.param("self_attn.in_proj_weight", {3 * d, d}),
                      o.param("self_attn.in_proj_bias", {3 * d}));
  auto parts = o.chunk3(qkv);
  auto heads = [&](const typename Ops::T &t) {
    return o.permute(o.reshape(t, {b, l, h, e}), {0, 2, 1, 3});
  };
  auto att = o.attention(heads(parts[0]), heads(parts[1]), heads(parts[2]));
  att = o.reshape(o.permute(att, {0, 2, 1, 3}), {b, l, d});
  auto sa = o.linear(att, o.param("self_attn.out_proj.weight", {d, d}),
                     o.param("self_attn.out_proj.bias", {d}));
  x = o.layer_norm(o.add(x, sa), o.param("norm1.weight", {d}), o.param("norm1.bias", {d}));
  auto ff = o.linear(o.gelu(o.linear(x, o.param("linear1.weight", {c.d_ff, d}),
                                     o.param("linear1.bias", {c.d_ff}))),
                     o.param("linear2.weight", {d, c.d_ff}), o.param("linear2.bias", {d}));
  return o.layer_norm(o.add(x, ff), o.param("norm2.weight", {d}), o.param("norm2.bias", {d}));
}

} // namespace kiln::networks

#endif // KILN_EXAMPLES_NETWORKS_H
