//===- OnnxSignal.cpp - DFT and STFT as products with DFT matrices --------===//
//
// ONNX's signals are real ([..., 1]) or complex ([..., 2]: real and
// imaginary parts). A DFT of length N along an axis is a product with the
// N x K cosine and sine matrices, made here in double and stored as f32:
// O(N^2) work, which for the lengths models use (audio frames of 256 to
// 2048 bins) runs as well-tiled GEMMs rather than an FFT's strided passes.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include "kiln/NetworkOps.h"

#include <cmath>
#include <numbers>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// A complex signal along its last axis; `imag` empty for a real one.
struct Signal {
  Tensor real;
  std::optional<Tensor> imag;
};

/// The DFT of `x` (its last axis holding `x.real`'s `L` samples) of
/// length `n`: forward (K = n, or n / 2 + 1 `onesided`), inverse (divided
/// by n), or inverse `onesided` from n / 2 + 1 bins to n real samples
/// (numpy's irfft). Samples past n are dropped, missing ones are zeros.
Signal transform(const Signal &x, int64_t n, bool inverse, bool onesided) {
  int64_t length = x.real.shape().back();
  bool toReal = inverse && onesided;
  int64_t rows = std::min(length, toReal ? n / 2 + 1 : n);
  int64_t cols = toReal ? n : onesided ? n / 2 + 1 : n;
  std::vector<float> c(static_cast<size_t>(rows * cols)), s(c.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      double angle = 2 * std::numbers::pi * double((r * k) % n) / double(n);
      double scale = inverse ? 1.0 / double(n) : 1.0, sign = inverse ? 1.0 : -1.0;
      if (toReal) // bins 1 .. n/2 - 1 stand for their conjugate mirror too
        scale *= (r == 0 || 2 * r == n) ? 1.0 : 2.0;
      c[size_t(r * cols + k)] = float(scale * std::cos(angle));
      s[size_t(r * cols + k)] = float(sign * scale * std::sin(angle));
    }
  Tensor cosine = Tensor::from(std::move(c), {rows, cols});
  Tensor sine = Tensor::from(std::move(s), {rows, cols});
  int64_t last = int64_t(x.real.shape().size()) - 1;
  Tensor re = rows < length ? x.real.slice(last, 0, rows) : x.real;
  std::optional<Tensor> im;
  if (x.imag)
    im = rows < length ? x.imag->slice(last, 0, rows) : *x.imag;
  // (a + ib)(c + is) = (ac - bs) + i(as + bc)
  Tensor outReal = matmul(re, cosine), outImag = matmul(re, sine);
  if (im) {
    outReal = outReal - matmul(*im, sine);
    outImag = outImag + matmul(*im, cosine);
  }
  if (toReal)
    return {outReal, std::nullopt};
  return {outReal, outImag};
}

/// `x` ([..., 1] or [..., 2]) as a signal along `axis`, moved last; the
/// order that moves it back.
Signal signalAlong(const NodeContext &ctx, const Tensor &x, int64_t axis,
                   std::vector<int64_t> &back) {
  int64_t rank = int64_t(x.shape().size());
  int64_t parts = x.shape().back();
  if (rank < 2 || (parts != 1 && parts != 2))
    ctx.fail("the signal " + detail::shapeText(x.shape()) +
             " must end in 1 (real) or 2 (real and imaginary parts)");
  std::vector<int64_t> order;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis)
      order.push_back(d);
  order.push_back(axis);
  back.assign(order.size(), 0);
  for (size_t i = 0; i < order.size(); ++i)
    back[size_t(order[i])] = int64_t(i);
  auto part = [&](int64_t p) {
    Tensor t = asF32(x).slice(rank - 1, p, p + 1);
    Shape squeezed(x.shape().begin(), x.shape().end() - 1);
    return t.reshape(squeezed).permute(order);
  };
  Signal s{part(0), std::nullopt};
  if (parts == 2)
    s.imag = part(1);
  return s;
}

/// A transformed signal back in ONNX's layout, [..., 2] (or [..., 1] real).
Tensor fromSignal(const Signal &s, const std::vector<int64_t> &back, DType dtype) {
  std::vector<Tensor> parts{unsqueeze(s.real.permute(back), -1)};
  if (s.imag)
    parts.push_back(unsqueeze(s.imag->permute(back), -1));
  Tensor y = parts.size() == 1 ? parts[0] : concat(parts, -1);
  return y.dtype() == dtype ? y : y.to(dtype);
}

std::vector<Value> dft(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  int64_t rank = int64_t(x.shape().size());
  // DFT-20 takes the axis as input 2 (default -2); DFT-17 as an attribute.
  int64_t axis = ctx.version >= 20 ? (ctx.has(2) ? ctx.ints(2).at(0) : -2)
                                   : ctx.attrInt("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank - 1)
    ctx.fail("axis " + std::to_string(axis) + " is not a signal axis of " +
             detail::shapeText(x.shape()));
  bool inverse = ctx.attrInt("inverse", 0) != 0, onesided = ctx.attrInt("onesided", 0) != 0;
  if (onesided && !inverse && x.shape().back() == 2)
    ctx.fail("onesided of a complex signal");
  int64_t length = x.shape()[size_t(axis)];
  int64_t n = ctx.has(1) ? ctx.ints(1).at(0) : inverse && onesided ? 2 * (length - 1) : length;
  if (n < 1)
    ctx.fail("dft_length " + std::to_string(n) + " must be positive");
  std::vector<int64_t> back;
  Signal s = signalAlong(ctx, x, axis, back);
  return single(fromSignal(transform(s, n, inverse, onesided), back, x.dtype()));
}

std::vector<Value> stft(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const Shape &xs = x.shape();
  if (xs.size() != 3)
    ctx.fail("the signal " + detail::shapeText(xs) + " must be [batch, length, 1 or 2]");
  int64_t step = ctx.ints(1).at(0);
  std::optional<Tensor> window;
  int64_t frame = 0;
  if (ctx.has(2)) {
    window = asF32(ctx.tensor(2));
    frame = window->numel();
  }
  if (ctx.has(3))
    frame = ctx.ints(3).at(0);
  if (frame < 1 || step < 1 || frame > xs[1])
    ctx.fail("frame_length " + std::to_string(frame) + " and frame_step " + std::to_string(step) +
             " for a signal of length " + std::to_string(xs[1]) +
             " (give a window or frame_length)");
  if (window && window->numel() != frame)
    ctx.fail("the window has " + std::to_string(window->numel()) + " samples, frame_length " +
             std::to_string(frame));
  bool onesided = ctx.attrInt("onesided", 1) != 0;
  int64_t frames = 1 + (xs[1] - frame) / step;
  // [B, F, frame, parts]: the frames stacked, weighted by the window.
  std::vector<Tensor> pieces;
  for (int64_t f = 0; f < frames; ++f)
    pieces.push_back(unsqueeze(asF32(x).slice(1, f * step, f * step + frame), 1));
  Tensor framed = pieces.size() == 1 ? pieces[0] : concat(pieces, 1);
  if (window)
    framed = framed * window->reshape({frame, 1});
  std::vector<int64_t> back;
  Signal s = signalAlong(ctx, framed, 2, back);
  if (onesided && s.imag)
    ctx.fail("onesided of a complex signal");
  return single(fromSignal(transform(s, frame, false, onesided), back, x.dtype()));
}
} // namespace

void onnx_import::addSignalConverters(ConverterTable &table) {
  table["DFT"] = dft;
  table["STFT"] = stft;
}
