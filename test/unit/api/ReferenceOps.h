// A float64 backend for examples/networks/Networks.h: the same network
// definitions evaluated with plain loops, as the reference Kiln's result is
// compared with. Weights come from the Kiln side's tensors, read back.
#ifndef KILN_TEST_UNIT_API_REFERENCEOPS_H
#define KILN_TEST_UNIT_API_REFERENCEOPS_H

#include "kiln/kiln.h"

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::test {

struct Ref {
  Shape dims;
  std::vector<double> v;
  const Shape &shape() const { return dims; }
  size_t size() const { return v.size(); }
};

inline Ref refOf(const Tensor &t) {
  std::vector<float> f = t.to_vector<float>();
  return {t.shape(), std::vector<double>(f.begin(), f.end())};
}

struct RefOps {
  using T = Ref;
  std::function<Tensor(const std::string &, const Shape &)> weight;

  Ref param(const std::string &name, const Shape &shape) { return refOf(weight(name, shape)); }

  Ref conv2d(const Ref &x, const Ref &w, int64_t stride, int64_t pad, int64_t groups) {
    int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], wd = x.dims[3];
    int64_t co = w.dims[0], cg = w.dims[1], k = w.dims[2];
    int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (wd + 2 * pad - k) / stride + 1;
    int64_t per = co / groups;
    Ref y{{n, co, oh, ow}, std::vector<double>(size_t(n * co * oh * ow), 0.0)};
    for (int64_t b = 0; b < n; ++b)
      for (int64_t o = 0; o < co; ++o)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            double acc = 0;
            for (int64_t ci = 0; ci < cg; ++ci) {
              int64_t ch = (o / per) * cg + ci;
              for (int64_t a = 0; a < k; ++a)
                for (int64_t q = 0; q < k; ++q) {
                  int64_t r = i * stride - pad + a, s = j * stride - pad + q;
                  if (r >= 0 && r < h && s >= 0 && s < wd)
                    acc += x.v[size_t(((b * c + ch) * h + r) * wd + s)] *
                           w.v[size_t(((o * cg + ci) * k + a) * k + q)];
                }
            }
            y.v[size_t(((b * co + o) * oh + i) * ow + j)] = acc;
          }
    return y;
  }
  Ref batch_norm(const Ref &x, const std::string &bn, int64_t channels) {
    Shape c = {channels};
    Ref mean = param(bn + ".running_mean", c), var = param(bn + ".running_var", c),
        g = param(bn + ".weight", c), b = param(bn + ".bias", c);
    Ref y = x;
    size_t plane = x.size() / size_t(x.dims[0] * channels);
    for (size_t i = 0; i < y.size(); ++i) {
      size_t ch = (i / plane) % size_t(channels);
      y.v[i] = (x.v[i] - mean.v[ch]) / std::sqrt(var.v[ch] + 1e-5) * g.v[ch] + b.v[ch];
    }
    return y;
  }
  static Ref map(Ref x, double (*f)(double)) {
    for (double &e : x.v)
      e = f(e);
    return x;
  }
  Ref relu(const Ref &x) { return map(x, [](double v) { return std::max(v, 0.0); }); }
  Ref relu6(const Ref &x) { return map(x, [](double v) { return std::min(std::max(v, 0.0), 6.0); }); }
  Ref gelu(const Ref &x) {
    return map(x, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
  }
  Ref add(Ref a, const Ref &b) {
    if (a.dims != b.dims)
      throw std::logic_error("reference add takes equal shapes");
    for (size_t i = 0; i < a.size(); ++i)
      a.v[i] += b.v[i];
    return a;
  }
  /// ceil_mode as PyTorch's: windows may run past the end, but each starts
  /// inside the input.
  Ref max_pool2d_ceil(const Ref &x, int64_t k, int64_t s) {
    auto out = [&](int64_t n) {
      int64_t o = (n - k + s - 1) / s + 1;
      return (o - 1) * s >= n ? o - 1 : o;
    };
    return max_pool2d(x, k, s, 0, out(x.dims[2]), out(x.dims[3]));
  }
  Ref bias(const Ref &x, const Ref &b) {
    Ref y = x;
    size_t plane = size_t(x.dims[2] * x.dims[3]);
    for (size_t i = 0; i < y.size(); ++i)
      y.v[i] += b.v[(i / plane) % b.size()];
    return y;
  }
  /// Along the channels.
  Ref cat(const Ref &a, const Ref &b) {
    Ref y{{a.dims[0], a.dims[1] + b.dims[1], a.dims[2], a.dims[3]}, {}};
    size_t pa = a.size() / size_t(a.dims[0]), pb = b.size() / size_t(b.dims[0]);
    for (int64_t n = 0; n < a.dims[0]; ++n) {
      y.v.insert(y.v.end(), a.v.begin() + n * pa, a.v.begin() + (n + 1) * pa);
      y.v.insert(y.v.end(), b.v.begin() + n * pb, b.v.begin() + (n + 1) * pb);
    }
    return y;
  }
  Ref max_pool2d(const Ref &x, int64_t k, int64_t s, int64_t p, int64_t oh = -1,
                 int64_t ow = -1) {
    int64_t planes = x.dims[0] * x.dims[1], h = x.dims[2], w = x.dims[3];
    if (oh < 0)
      oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    Ref y{{x.dims[0], x.dims[1], oh, ow}, {}};
    for (int64_t c = 0; c < planes; ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double best = -INFINITY;
          for (int64_t a = 0; a < k; ++a)
            for (int64_t b = 0; b < k; ++b) {
              int64_t r = i * s - p + a, q = j * s - p + b;
              if (r >= 0 && r < h && q >= 0 && q < w)
                best = std::max(best, x.v[size_t((c * h + r) * w + q)]);
            }
          y.v.push_back(best);
        }
    return y;
  }
  Ref global_pool(const Ref &x) {
    size_t plane = size_t(x.dims[2] * x.dims[3]);
    Ref y{{x.dims[0], x.dims[1]}, {}};
    for (size_t c = 0; c < x.size() / plane; ++c) {
      double sum = 0;
      for (size_t i = 0; i < plane; ++i)
        sum += x.v[c * plane + i];
      y.v.push_back(sum / double(plane));
    }
    return y;
  }
  Ref linear(const Ref &x, const Ref &w, const Ref &b) {
    int64_t in = w.dims[1], out = w.dims[0], rows = int64_t(x.size()) / in;
    Ref y{x.dims, {}};
    y.dims.back() = out;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double acc = b.v[size_t(o)];
        for (int64_t i = 0; i < in; ++i)
          acc += x.v[size_t(r * in + i)] * w.v[size_t(o * in + i)];
        y.v.push_back(acc);
      }
    return y;
  }
  Ref layer_norm(const Ref &x, const Ref &g, const Ref &b) {
    size_t d = size_t(x.dims.back());
    Ref y = x;
    for (size_t r = 0; r < x.size() / d; ++r) {
      double mean = 0, var = 0;
      for (size_t i = 0; i < d; ++i)
        mean += x.v[r * d + i] / double(d);
      for (size_t i = 0; i < d; ++i)
        var += (x.v[r * d + i] - mean) * (x.v[r * d + i] - mean) / double(d);
      for (size_t i = 0; i < d; ++i)
        y.v[r * d + i] = (x.v[r * d + i] - mean) / std::sqrt(var + 1e-5) * g.v[i] + b.v[i];
    }
    return y;
  }
  /// softmax(q k^T / sqrt(E)) v over [B, H, L, E].
  Ref attention(const Ref &q, const Ref &k, const Ref &v) {
    size_t l = size_t(q.dims[2]), e = size_t(q.dims[3]), s = size_t(k.dims[2]);
    size_t batches = q.size() / (l * e);
    Ref y{q.dims, {}};
    for (size_t b = 0; b < batches; ++b)
      for (size_t i = 0; i < l; ++i) {
        std::vector<double> score(s);
        double top = -INFINITY, total = 0;
        for (size_t j = 0; j < s; ++j) {
          double dot = 0;
          for (size_t d = 0; d < e; ++d)
            dot += q.v[(b * l + i) * e + d] * k.v[(b * s + j) * e + d];
          top = std::max(top, score[j] = dot / std::sqrt(double(e)));
        }
        for (double &x : score)
          total += (x = std::exp(x - top));
        for (size_t d = 0; d < e; ++d) {
          double acc = 0;
          for (size_t j = 0; j < s; ++j)
            acc += score[j] / total * v.v[(b * s + j) * e + d];
          y.v.push_back(acc);
        }
      }
    return y;
  }
  std::vector<Ref> chunk3(const Ref &x) {
    size_t d = size_t(x.dims.back()), third = d / 3;
    std::vector<Ref> parts(3, Ref{x.dims, {}});
    for (Ref &p : parts)
      p.dims.back() = int64_t(third);
    for (size_t r = 0; r < x.size() / d; ++r)
      for (size_t i = 0; i < d; ++i)
        parts[i / third].v.push_back(x.v[r * d + i]);
    return parts;
  }
  Ref reshape(Ref x, const Shape &shape) {
    x.dims = shape;
    return x;
  }
  Ref permute(const Ref &x, const std::vector<int64_t> &order) {
    size_t rank = x.dims.size();
    Shape dims(rank);
    std::vector<size_t> strides(rank, 1);
    for (size_t i = rank - 1; i-- > 0;)
      strides[i] = strides[i + 1] * size_t(x.dims[i + 1]);
    for (size_t i = 0; i < rank; ++i)
      dims[i] = x.dims[size_t(order[i])];
    Ref y{dims, std::vector<double>(x.size())};
    for (size_t flat = 0; flat < x.size(); ++flat) {
      size_t rest = flat, src = 0;
      for (size_t i = rank; i-- > 0;) {
        size_t coord = rest % size_t(dims[i]);
        rest /= size_t(dims[i]);
        src += coord * strides[size_t(order[i])];
      }
      y.v[flat] = x.v[src];
    }
    return y;
  }
};

} // namespace kiln::test

#endif
