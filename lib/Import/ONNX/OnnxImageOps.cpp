//===- OnnxImageOps.cpp - ONNX operators on NCHW images -------------------===//
//
// SpaceToDepth and DepthToSpace (a reshape, a permutation, a reshape),
// InstanceNormalization, GroupNormalization, LpNormalization,
// MeanVarianceNormalization, LRN (a sum of channel
// slices) and Col2Im (a sum of placed slices).
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include <array>
#include <numeric>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
void requireRank(const NodeContext &ctx, const Tensor &x, size_t rank) {
  if (x.shape().size() != rank)
    ctx.fail("an input of rank " + std::to_string(x.shape().size()) + "; this operator takes " +
             std::to_string(rank));
}

int64_t blockSize(const NodeContext &ctx, const Shape &in, bool toDepth) {
  int64_t b = ctx.attrInt("blocksize", 0);
  if (b < 1)
    ctx.fail("'blocksize' must be at least 1");
  if (toDepth ? in[2] % b || in[3] % b : in[1] % (b * b))
    ctx.fail("the input does not divide into blocks of " + std::to_string(b));
  return b;
}

std::vector<Value> spaceToDepth(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  requireRank(ctx, x, 4);
  Shape in = x.shape();
  int64_t b = blockSize(ctx, in, true);
  // DCR (the default): the block offsets outermost in the channels; CRD
  // (SpaceToDepth-25's mode): each channel's block together.
  std::string mode = ctx.attrString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    ctx.fail("mode '" + mode + "' is not DCR or CRD");
  Tensor y = x.reshape({in[0], in[1], in[2] / b, b, in[3] / b, b})
                 .permute(mode == "DCR" ? std::vector<int64_t>{0, 3, 5, 1, 2, 4}
                                        : std::vector<int64_t>{0, 1, 3, 5, 2, 4});
  return single(y.reshape({in[0], in[1] * b * b, in[2] / b, in[3] / b}));
}

std::vector<Value> depthToSpace(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  requireRank(ctx, x, 4);
  Shape in = x.shape();
  int64_t b = blockSize(ctx, in, false), c = in[1] / (b * b);
  std::string mode = ctx.attrString("mode", "DCR");
  Tensor y;
  if (mode == "DCR")
    y = x.reshape({in[0], b, b, c, in[2], in[3]}).permute({0, 3, 4, 1, 5, 2});
  else if (mode == "CRD")
    y = x.reshape({in[0], c, b, b, in[2], in[3]}).permute({0, 1, 4, 2, 5, 3});
  else
    ctx.fail("mode '" + mode + "' is not one of DCR, CRD");
  return single(y.reshape({in[0], c, in[2] * b, in[3] * b}));
}

/// (x - mean) / sqrt(variance + eps) over `axes`.
Tensor normalized(const Tensor &x, const std::vector<int64_t> &axes, float eps) {
  Tensor centered = x - mean(x, axes, true);
  Tensor variance = mean(centered * centered, axes, true);
  return centered * rsqrt(variance + scalarLike(x, eps));
}

std::vector<Value> instanceNorm(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  int64_t rank = int64_t(x.shape().size());
  if (rank < 3)
    ctx.fail("the input must have rank 3 or more ([N, C, ...])");
  std::vector<int64_t> spatial(size_t(rank - 2));
  std::iota(spatial.begin(), spatial.end(), 2);
  Shape perChannel(size_t(rank), 1);
  perChannel[1] = x.shape()[1];
  Tensor y = normalized(x, spatial, ctx.attrFloat("epsilon", 1e-5f));
  return single(y * ctx.tensor(1).reshape(perChannel) + ctx.tensor(2).reshape(perChannel));
}

/// GroupNormalization: each sample's channels in num_groups groups, each
/// normalized over its channels and positions; scale and bias per channel
/// (version 21) or per group (version 18).
std::vector<Value> groupNorm(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const Shape in = x.shape();
  if (in.size() < 3)
    ctx.fail("the input must have rank 3 or more ([N, C, ...])");
  int64_t groups = ctx.attrInt("num_groups", 0), channels = in[1];
  if (groups < 1 || channels % groups)
    ctx.fail("num_groups " + std::to_string(groups) + " does not divide the " +
             std::to_string(channels) + " channels");
  int64_t perGroup = channels / groups;
  for (size_t d = 2; d < in.size(); ++d)
    perGroup *= in[d];
  Tensor y = normalized(x.reshape({in[0], groups, perGroup}), {2}, ctx.attrFloat("epsilon", 1e-5f))
                 .reshape(in);
  Shape perChannel(in.size(), 1);
  perChannel[1] = channels;
  auto perChannelOf = [&](Tensor t) {
    if (ctx.version < 21) { // one per group: each repeated over its channels
      t = t.reshape({groups, 1}).broadcast_to({groups, channels / groups});
    }
    return t.reshape(perChannel);
  };
  return single(y * perChannelOf(ctx.tensorAs(1, x)) + perChannelOf(ctx.tensorAs(2, x)));
}

/// LpNormalization: x over its L1 or L2 norm along `axis` (0 where the norm
/// is 0).
std::vector<Value> lpNorm(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", -1), int64_t(x.shape().size()));
  int64_t p = ctx.attrInt("p", 2);
  if (p != 1 && p != 2)
    ctx.fail("p = " + std::to_string(p) + " (1 or 2)");
  Tensor norm = p == 1 ? sum(abs(x), {axis}, true) : sqrt(sum(x * x, {axis}, true));
  Tensor zero = scalarLike(x, 0.0f);
  return single(where(eq(norm, zero), zero, x / norm));
}

std::vector<Value> meanVarianceNorm(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  std::vector<int64_t> axes = ctx.attrInts("axes").value_or(std::vector<int64_t>{0, 2, 3});
  for (int64_t &a : axes)
    a = normalizeAxis(ctx, a, int64_t(x.shape().size()));
  // ONNX's function body divides by sqrt(variance) + 1e-9.
  Tensor centered = x - mean(x, axes, true);
  Tensor deviation = sqrt(mean(centered * centered, axes, true));
  return single(centered / (deviation + scalarLike(x, 1e-9f)));
}

std::vector<Value> lrn(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  int64_t size = ctx.attrInt("size", 0), rank = int64_t(x.shape().size());
  if (size < 1 || rank < 3)
    ctx.fail("LRN needs 'size' of at least 1 and an input of rank 3 or more");
  float alpha = ctx.attrFloat("alpha", 1e-4f), beta = ctx.attrFloat("beta", 0.75f);
  float bias = ctx.attrFloat("bias", 1.0f);
  int64_t before = (size - 1) / 2, after = size - 1 - before, channels = x.shape()[1];
  std::vector<int64_t> low(size_t(rank), 0), high(size_t(rank), 0);
  low[1] = before;
  high[1] = after;
  Tensor squares = kiln::pad(x * x, low, high);
  Tensor window = squares.slice(1, 0, channels);
  for (int64_t k = 1; k < size; ++k)
    window = window + squares.slice(1, k, k + channels);
  Tensor scale = scalarLike(x, bias) + scalarLike(x, alpha / float(size)) * window;
  return single(x / kiln::pow(scale, scalarLike(x, beta)));
}

/// Col2Im: the blocks' columns summed back into the image. Each offset
/// within the block places its [N, C, blocks...] slice spread by the
/// strides and shifted by offset x dilation into the padded image; the
/// pads are cut off at the end.
std::vector<Value> col2im(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  std::vector<int64_t> image = ctx.ints(1), block = ctx.ints(2);
  size_t k = image.size();
  const Shape &xs = x.shape();
  auto attr = [&](const char *name, int64_t fill, size_t count) {
    std::vector<int64_t> v = ctx.attrInts(name).value_or(std::vector<int64_t>(count, fill));
    if (v.size() != count)
      ctx.fail(std::string(name) + " must have " + std::to_string(count) + " values");
    return v;
  };
  std::vector<int64_t> dil = attr("dilations", 1, k), pads = attr("pads", 0, 2 * k),
                       strides = attr("strides", 1, k);
  int64_t blockSize = 1;
  for (int64_t b : block)
    blockSize *= b;
  if (block.size() != k || xs.size() != 3 || blockSize < 1 || xs[1] % blockSize)
    ctx.fail("input " + detail::shapeText(xs) + " for block_shape " + detail::shapeText(block) +
             "; want [N, C * prod(block_shape), L]");
  Shape counts, padded;
  int64_t total = 1;
  for (size_t i = 0; i < k; ++i) {
    padded.push_back(image[i] + pads[i] + pads[i + k]);
    counts.push_back((padded[i] - dil[i] * (block[i] - 1) - 1) / strides[i] + 1);
    total *= counts[i];
  }
  if (total != xs[2])
    ctx.fail("the input has " + std::to_string(xs[2]) + " blocks; the image, block, pads, "
             "dilations and strides make " + std::to_string(total));
  int64_t n = xs[0], c = xs[1] / blockSize;
  Shape split{n, c, blockSize};
  split.insert(split.end(), counts.begin(), counts.end());
  Tensor cols = x.reshape(split);
  std::optional<Tensor> sum;
  for (int64_t offset = 0; offset < blockSize; ++offset) {
    Shape sliced{n, c};
    sliced.insert(sliced.end(), counts.begin(), counts.end());
    Tensor piece = cols.slice(2, offset, offset + 1).reshape(sliced);
    std::vector<int64_t> low(k + 2, 0), high(k + 2, 0);
    int64_t rest = offset;
    for (size_t i = k; i-- > 0;) {
      int64_t at = rest % block[i];
      rest /= block[i];
      int64_t axis = int64_t(i) + 2;
      if (strides[i] > 1) { // zeros between the blocks: [.., m] -> [.., m, s] -> [.., m s]
        Shape s = piece.shape(), wide = s;
        s.insert(s.begin() + axis + 1, 1);
        std::vector<int64_t> lo(s.size(), 0), hi(s.size(), 0);
        hi[size_t(axis + 1)] = strides[i] - 1;
        wide[size_t(axis)] *= strides[i];
        piece = kiln::pad(piece.reshape(s), lo, hi).reshape(wide);
        piece = piece.slice(axis, 0, (counts[i] - 1) * strides[i] + 1);
      }
      low[size_t(axis)] = at * dil[i];
      high[size_t(axis)] = padded[i] - low[size_t(axis)] - piece.shape()[size_t(axis)];
    }
    Tensor placed = kiln::pad(piece, low, high);
    sum = sum ? *sum + placed : placed;
  }
  Tensor y = *sum;
  for (size_t i = 0; i < k; ++i)
    y = y.slice(int64_t(i) + 2, pads[i], pads[i] + image[i]);
  return single(y);
}
} // namespace

void onnx_import::addImageConverters(ConverterTable &table) {
  table["Col2Im"] = col2im;
  table["SpaceToDepth"] = spaceToDepth;
  table["DepthToSpace"] = depthToSpace;
  table["InstanceNormalization"] = instanceNorm;
  table["GroupNormalization"] = groupNorm;
  table["LpNormalization"] = lpNorm;
  table["MeanVarianceNormalization"] = meanVarianceNorm;
  table["LRN"] = lrn;
}
