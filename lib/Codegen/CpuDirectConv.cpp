//===- CpuDirectConv.cpp - dense convolution without im2col on the CPU ----===//
//
// A dense (one group) f32 convolution with a window larger than 1x1, with
// vectors along the output channels instead of along the pixels: per block
// of 8 output pixels of one row and 32 (or 16) output channels, 16 (or 8)
// accumulators; per input channel and tap, two vector loads of filter
// values and one broadcast per pixel of the input value it reads, then the
// FMAs. Nothing is packed per panel (the GEMM form's im2col copy of K x 64
// columns per 64 columns of output): a work unit (image, block of output
// channels, band of output rows) copies the input rows its band reads into
// a zero-padded slab once, so no tap needs a bounds check, and repacks its
// filters as [in channel][tap][out channel]. On ResNet-18's layer-1
// convolution a C prototype of this loop ran at 140-190 GFLOP/s on one core
// where the GEMM form ran at 93-100. The sums are transposed through a small
// buffer into vectors of pixels for the epilogue (bias, residual, ReLU).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;
using namespace kiln;

// A 1x1 window at stride 1 without padding reads the input as a matrix
// [channel][pixel]: the pointwise case, whose pixels run along the whole
// plane (no slab, no rows).
static bool isPointwise(Conv2dOp conv) {
  ArrayRef<int64_t> w = cast<RankedTensorType>(conv.getFilter().getType()).getShape();
  return w[2] == 1 && w[3] == 1 && llvm::all_equal({conv.getStrides()[0], conv.getStrides()[1],
                                                    int64_t(1)}) &&
         conv.getPadding()[0] == 0 && conv.getPadding()[1] == 0;
}

// Below this many input channels a pointwise convolution stays with the
// GEMM form: its vectors along the pixels need no transpose for the
// epilogue, which short sums cannot pay for (MobileNetV2's expansions from
// 16 and 24 channels).
static constexpr int64_t kMinPointwiseChannels = 32;

// A program compiled ahead of time marks a kernel whose filter is a weight
// it may store packed (`kiln.weight_filter`); the JIT's filters arrive as
// the user wrote them.
static bool hasWeightFilter(Operation *root) {
  auto kernel = root->getParentOfType<KernelOp>();
  return kernel && kernel->hasAttr(kWeightFilterAttr);
}

bool kiln::fitsCpuDirectConv(Operation *root, const CpuDirectConvConfig &config) {
  auto conv = dyn_cast_or_null<Conv2dOp>(root);
  if (!conv || conv.getGroupsAttr().getInt() != 1 ||
      (config.packedFilter && !hasWeightFilter(root)))
    return false;
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> x = shapeOf(conv.getInput()), w = shapeOf(conv.getFilter()),
                    y = shapeOf(conv.getResult());
  auto isF32 = [](Value v) { return getElementTypeOrSelf(v.getType()).isF32(); };
  // The input is a kernel input, or (pointwise) a concat of them along the
  // channels (a SqueezeNet fire module's output): each channel range is
  // read from its own input.
  std::optional<SmallVector<ConvSource, 2>> sources = convSources(conv.getInput());
  // Rows under `pixels` (ResNet's 7x7 stage at 8) stay with the GEMM form:
  // each unit would repack a 512-channel filter block for only 7 x 7
  // outputs (94 GFLOP/s against the GEMM's 100).
  bool windowed = w[2] * w[3] >= 2 && w[2] * w[3] <= 49 && y[3] >= config.pixels;
  bool pointwise = isPointwise(conv) && x[1] >= kMinPointwiseChannels &&
                   y[2] * y[3] >= config.pixels;
  // A last block of fewer output channels (1000 classes) only where the
  // filter is packed: its block is stored [C][tap][rest] and read with
  // masked loads; a repacked one would read past the filter.
  bool ragged = y[1] % config.blockChannels() != 0;
  return sources && (sources->size() == 1 || pointwise) && isa<BlockArgument>(conv.getFilter()) &&
         isF32(conv.getInput()) && isF32(conv.getFilter()) && isF32(conv.getResult()) &&
         (windowed || pointwise) && (!ragged || (pointwise && config.packedFilter)) &&
         y[2] > 0 && x[1] > 0;
}

std::optional<CpuDirectConvConfig> kiln::defaultCpuDirectConv(Operation *root) {
  auto conv = dyn_cast_or_null<Conv2dOp>(root);
  if (!conv)
    return std::nullopt;
  CpuDirectConvConfig config = CpuDirectConvConfig::defaultForHost();
  config.packedFilter = hasWeightFilter(root);
  // Each unit repacks its block's filters, once per inference: on a plane
  // under 8 x 8 that costs as much as the FMAs (ResNet-18's 3x3/2 into
  // 7 x 7, 256 -> 512 channels: 1.18M filter values for 49 outputs each),
  // and the GEMM form reads the filters in place. Filters packed when the
  // program was compiled cost nothing per inference.
  ArrayRef<int64_t> outShape = conv.getResult().getType().getShape();
  if (outShape[2] * outShape[3] < 64 && !config.packedFilter)
    return std::nullopt;
  // Pointwise by default only where it measured faster than the GEMM form
  // (MobileNetV2, one thread): a projection to at most a third of the
  // channels on a plane of 8 x 8 or more (14 x 14, 384 -> 64: 117 -> 63 us),
  // whose GEMM packs much input for few rows and pads 196 columns to 256.
  // Outputs of one vector of channels take it too (MobileNetV2's 32 -> 16
  // at 112 x 112, whose GEMM packs every input panel for two blocks of 8
  // rows: 151 -> 110-117 us alone, 211-299 -> 126-129 inside the network).
  // Expansions on 8 x 8 or more stay with the GEMM form (no faster in the
  // direct form, 14 x 14 and 28 x 28); with packed filters on a plane of
  // 7 x 7, where the GEMM form's 64-column blocks hold 49 pixels, the
  // direct form is faster (160 -> 960: 112-122 -> 99-104 us). So is a
  // packed filter of a megabyte or more, which comes from memory in a
  // network and which the direct form prefetches (SqueezeNet's classifier,
  // 512 -> 1000 on 13 x 13: 1585 -> 1354 us inside the network).
  // Blocks of 7 pixels where they tile the plane (14 x 14: a block of 8
  // would recompute pixels), with AVX-512 (AVX2's 16 registers do not hold
  // 7 x 2 accumulators, the filters and a broadcast).
  if (isPointwise(conv)) {
    ArrayRef<int64_t> x = conv.getInput().getType().getShape();
    ArrayRef<int64_t> y = outShape;
    const bool streamed = config.packedFilter && x[1] * y[1] * 4 >= (1 << 20);
    const bool wholeBlocksOf48 = config.packedFilter && config.lanes == 16 && y[1] % 48 == 0;
    if (x[1] < 3 * y[1] && !(config.packedFilter && y[2] * y[3] < 64) && !streamed &&
        !wholeBlocksOf48 && y[1] > 16)
      return std::nullopt;
    if (config.lanes == 16 && (y[2] * y[3]) % 7 == 0 && (y[2] * y[3]) % config.pixels != 0)
      config.pixels = 7;
    // On a plane of 8 x 8 or more, blocks of 3 vectors (48 channels) with
    // AVX-512 where 48 divides the outputs (MobileNetV2's 576 -> 96 on
    // 14 x 14: 170 -> 159 us in the network; its expansions to 192, 384
    // and 576 channels, packed, take this form rather than the GEMM's:
    // 89 -> 79, 85 -> 82, 176 -> 167 us), or the filter streams, with a
    // narrower last block (the classifier: 1360-1400 -> 1250 us); on 7 x 7
    // planes 3 vectors were 1.35x slower than 2.
    if ((streamed || y[1] % 48 == 0) && config.lanes == 16 && y[2] * y[3] >= 64) {
      CpuDirectConvConfig wide = config;
      wide.vectors = 3;
      if (fitsCpuDirectConv(root, wide))
        return wide;
    }
  }
  // Strided, no input value is shared between taps, and blocks of 4 pixels
  // x 4 vectors measured faster with AVX-512 on ResNet's 3x3/2
  // convolutions (1.16x and 1.06x at one thread; the 3-channel stem was
  // not faster).
  if (config.lanes == 16 && (conv.getStrides()[0] > 1 || conv.getStrides()[1] > 1) &&
      conv.getInput().getType().getShape()[1] >= 16 &&
      (outShape[3] % 4 == 0 || outShape[3] % 7 != 0)) {
    CpuDirectConvConfig wide = config;
    wide.pixels = 4;
    wide.vectors = 4;
    if (fitsCpuDirectConv(root, wide))
      return wide;
  }
  // Rows in blocks of 7, 8 or 9 pixels, whichever recomputes the fewest
  // (a row's last block overlaps the one before it): rows of 7, 14 and 28
  // (ResNet's 3x3 stages) and 13 (SqueezeNet's last stages) in blocks of 7,
  // 27 in blocks of 9; blocks of 8 recomputed 2 of every 16 pixels at
  // 14 x 14 (256 channels: 1.6-1.7 ms -> 1.46-1.61 at one thread), 3 of 16
  // at 13 and 5 of 32 at 27. With AVX-512 only: AVX2's 16 registers do not
  // hold 7 x 2 accumulators, 2 filter vectors and a broadcast.
  if (config.lanes == 16 && !isPointwise(conv) && outShape[3] % config.pixels != 0) {
    auto computed = [&](int64_t p) { return (outShape[3] + p - 1) / p * p; };
    CpuDirectConvConfig best = config;
    for (int64_t p : {7, 9})
      if (computed(p) < computed(best.pixels))
        best.pixels = p;
    if (best.pixels != config.pixels && fitsCpuDirectConv(root, best))
      return best;
  }
  // Two vectors of output channels where they divide, else one. (A
  // narrower last block only by the streamed-filter rule above: MobileNetV2's
  // projections to 24 channels, one block of 24 in 32 lanes, ran 1.25-1.5x
  // slower than their GEMM form.)
  CpuDirectConvConfig one = config;
  one.vectors = 1;
  for (const CpuDirectConvConfig &c : {config, one})
    if (outShape[1] % c.blockChannels() == 0 && fitsCpuDirectConv(root, c))
      return c;
  return std::nullopt;
}

// `rows[p]` holds pixel p of L channels (L lanes); the result holds, per
// channel, its pixels as one vector<R>, the first P lanes. The rows, padded with zeros to R
// (a power of two, at most L), are interleaved pairwise log2(R) times: each
// round doubles the pixels per channel group in a vector and halves the
// channels, until each vector holds L / R channels of R pixels in a row.
// R x log2(R) two-source shuffles (24 for up to 8 pixels) for L channels,
// instead of P loads per channel through memory (the epilogue of a short
// sum cost as much as its FMAs).
static SmallVector<Value> transposePixels(OpBuilder &b, Location loc, ArrayRef<Value> rows) {
  auto vecType = cast<VectorType>(rows.front().getType());
  const int64_t L = vecType.getNumElements(), P = rows.size();
  int64_t R = 1;
  while (R < P)
    R *= 2;
  assert(R <= L && "more pixels than lanes");
  // groups[c][q]: channel group c (of L / (channels per group)), pixel block q.
  Value zero = arith::ConstantOp::create(b, loc, vecType, b.getZeroAttr(vecType));
  SmallVector<SmallVector<Value>> groups(1);
  for (int64_t p = 0; p < R; ++p)
    groups[0].push_back(p < P ? rows[p] : zero);
  for (int64_t g = 1; g < R; g *= 2) {
    // Each vector: L / g channels of g pixels; pair pixel blocks q and q + 1.
    SmallVector<SmallVector<Value>> next(groups.size() * 2);
    for (size_t c = 0; c < groups.size(); ++c)
      for (size_t q = 0; q < groups[c].size(); q += 2)
        for (int64_t half = 0; half < 2; ++half) {
          SmallVector<int64_t> mask;
          for (int64_t i = 0; i < L / (2 * g); ++i)
            for (int64_t k = 0; k < 2 * g; ++k) {
              int64_t channel = half * L / (2 * g) + i;
              mask.push_back(k < g ? channel * g + k : L + channel * g + (k - g));
            }
          next[2 * c + half].push_back(
              vector::ShuffleOp::create(b, loc, groups[c][q], groups[c][q + 1], mask));
        }
    groups = std::move(next);
  }
  SmallVector<Value> columns;
  for (auto &group : groups)
    for (int64_t i = 0; i < L / R; ++i)
      columns.push_back(vector::ExtractStridedSliceOp::create(
          b, loc, group.front(), ArrayRef<int64_t>{i * R}, ArrayRef<int64_t>{R},
          ArrayRef<int64_t>{1}));
  return columns;
}

FailureOr<func::FuncOp> kiln::buildCpuDirectConvFunction(KernelOp kernel, Operation *root,
                                                         OpBuilder &builder, StringRef name,
                                                         const CpuDirectConvConfig &config) {
  if (std::string problem = config.check(); !problem.empty())
    return root->emitOpError("cpu direct convolution configuration: ") << problem, failure();
  if (!fitsCpuDirectConv(root, config))
    return root->emitOpError("does not fit the cpu direct convolution form with ")
               << KernelConfig{KernelConfig::Form::CpuDirectConv, {}, {}, {}, {}, config}.str(),
           failure();
  auto conv = cast<Conv2dOp>(root);
  SmallVector<ConvSource, 2> sources = *convSources(conv.getInput());
  auto filter = cast<BlockArgument>(conv.getFilter());
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> x = shapeOf(conv.getInput()), w = shapeOf(conv.getFilter()),
                    y = shapeOf(conv.getResult());
  const int64_t VL = config.lanes, P = config.pixels;
  const int64_t images = x[0], C = x[1], H = x[2], W = x[3];
  const int64_t CO = y[1], OH = y[2], OW = y[3], KH = w[2], KW = w[3];
  const int64_t sh = conv.getStrides()[0], sw = conv.getStrides()[1];
  const int64_t ph = conv.getPadding()[0], pw = conv.getPadding()[1];
  const int64_t dh = conv.getDilation()[0], dw = conv.getDilation()[1];
  const int64_t V = config.vectors, CB = V * VL;
  // A last block of `lastWidth` < CB channels where CB does not divide CO.
  const int64_t coBlocks = (CO + CB - 1) / CB, lastWidth = CO - (coBlocks - 1) * CB;
  const int64_t taps = KH * KW;
  const bool pointwise = isPointwise(conv);
  // (The last block of a row starts at OW - P, recomputing a few pixels;
  // a pointwise convolution's one row is the whole plane.)
  const int64_t rowPixels = pointwise ? OH * OW : OW;
  const int64_t rowBlocks = (rowPixels + P - 1) / P;
  // Work units of about 16 in all, so both threads of a small image have
  // work. Windowed: bands of output rows, a slab of at most a few hundred
  // KB each. Pointwise: runs of pixel blocks.
  int64_t band = std::min<int64_t>(std::clamp<int64_t>(OH * images * coBlocks / 16, 1, 8), OH);
  if (pointwise) {
    int64_t runs = std::clamp<int64_t>(16 / (images * coBlocks), 1, rowBlocks);
    band = (rowBlocks + runs - 1) / runs;
  }
  const int64_t bands = ((pointwise ? rowBlocks : OH) + band - 1) / band;
  const int64_t slabRows = (band - 1) * sh + (KH - 1) * dh + 1;
  // (The last pixel's last tap reads column (OW - 1) sw + (KW - 1) dw,
  // at most W + 2 pw - 1.)
  const int64_t slabW = W + 2 * pw;
  const int64_t slabSize = pointwise ? 0 : (C * slabRows * slabW + VL - 1) / VL * VL;

  Location loc = kernel.getLoc();
  MLIRContext *ctx = builder.getContext();
  Type f32 = Float32Type::get(ctx);
  const int64_t units = images * coBlocks * bands;
  func::FuncOp func = createFlatKernelFunction(kernel, builder, name,
                                               images * CO * OH * OW * C * taps, units);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };
  auto add = [&](OpBuilder &ab, Value l, Value r) {
    return arith::AddIOp::create(ab, loc, l, r).getResult();
  };
  auto mul = [&](OpBuilder &mb, Value l, int64_t r) {
    return arith::MulIOp::create(mb, loc, l, idx(mb, r)).getResult();
  };
  auto forRange = [&](OpBuilder &lb, Value from, Value to, int64_t step,
                      function_ref<void(OpBuilder &, Value)> body) {
    scf::ForOp::create(lb, loc, from, to, idx(lb, step), ValueRange{},
                       [&](OpBuilder &fb, Location, Value iv, ValueRange) {
                         body(fb, iv);
                         scf::YieldOp::create(fb, loc);
                       });
  };
  VectorType vec = VectorType::get({VL}, f32), pixels = VectorType::get({P}, f32);
  auto heap = [&](int64_t n) {
    return memref::AllocOp::create(b, loc, MemRefType::get({n}, f32), b.getI64IntegerAttr(64))
        .getResult();
  };
  // Filters packed when the program was compiled need no copy here.
  const bool packed = config.packedFilter;
  Value slab = pointwise ? Value() : heap(slabSize),
        packedFilter = packed ? Value() : heap(C * taps * CB);
  Value sums = memref::AllocaOp::create(b, loc, MemRefType::get({P * CB}, f32));
  // Input channels per chunk: a chunk's filters (chunk x taps x CB) in
  // about 32 KB, and a band's sums between chunks.
  const int64_t chunkChannels = std::max<int64_t>(1, 8192 / (taps * CB));
  Value partial = pointwise || C <= chunkChannels ? Value() : heap(band * rowBlocks * P * CB);
  // The block of output channels packedFilter holds (none yet).
  Value packedFor = heldSlot(b, loc, coBlocks);
  // The (image, band) the slab holds (none yet).
  Value slabFor = heldSlot(b, loc, images * bands);
  Value weights = entry->getArgument(filter.getArgNumber());

  // The epilogue sees the result as the GEMM does: [images, CO, OH * OW].
  SmallVector<AffineExpr> dims;
  for (unsigned d = 0; d < 3; ++d)
    dims.push_back(getAffineDimExpr(d, ctx));
  const SmallVector<int64_t> bounds = {images, CO, OH * OW};
  AffineExpr resultIndex = linearizeExpr(bounds, dims, ctx);
  const bool vectorEpilogue = vectorizableGemmEpilogue(kernel, root, bounds, resultIndex);
  bool failed = false;

  // The filters of this block of output channels, [c][tap][o]: repacked
  // only when the block changes (a thread's units run band after band of
  // one block; repacking per band cost 10-15% of a 56x56 convolution),
  // each [c][tap] row of 32 written whole.
  auto repack = [&](OpBuilder &ub, Value coBlock) {
    if (packed)
      return;
    OpBuilder rb = whenHeldChanges(ub, loc, packedFor, coBlock);
    Value firstFilter = mul(rb, mul(rb, coBlock, CB), C * taps);
    forRange(rb, idx(rb, 0), idx(rb, C * taps), 1, [&](OpBuilder &ob, Value ct) {
      Value row = add(ob, firstFilter, ct), to = mul(ob, ct, CB);
      for (int64_t o = 0; o < CB; ++o)
        memref::StoreOp::create(
            ob, loc,
            memref::LoadOp::create(ob, loc, weights, ValueRange{add(ob, row, idx(ob, o * C * taps))}),
            packedFilter, ValueRange{add(ob, to, idx(ob, o))});
    });
  };
  // P x V accumulators over the input channels [cFrom, cTo) and taps for
  // a block of `width` output channels (CB, or the last block's lastWidth:
  // its last vector read with a mask, zero past the filter); `xAt(fb, c,
  // tap, p)` is where pixel p reads input channel c at the tap. The block's
  // filters, [c][tap][o], start at `filterBase` of `filters`.
  Value filters = packed ? weights : packedFilter;
  // With packed filters, pass `pass` of `passes` over the channels [from,
  // to) also fetches its share of the filters read after them into L2, a
  // few cache lines per channel (they follow in memory: the next chunk, or
  // the next block of output channels), so that the stream from memory runs
  // under the FMAs. Without it a network's late convolutions, whose
  // weights come from memory, ran 1.3-1.5x their time alone.
  struct Prefetch {
    Value pass;
    int64_t passes;
    Value from, to;
  };
  auto vectorsOf = [&](int64_t width) { return (width + VL - 1) / VL; };
  auto accumulate = [&](OpBuilder &pb, int64_t width, Value filterBase, Value cFrom, Value cTo,
                        ValueRange init,
                        function_ref<Value(OpBuilder &, Value, int64_t, int64_t)> xAt,
                        std::optional<Prefetch> prefetch) {
    const int64_t vectors = vectorsOf(width);
    return scf::ForOp::create(
        pb, loc, cFrom, cTo, idx(pb, 1), init,
        [&](OpBuilder &fb, Location, Value c, ValueRange a) {
          if (prefetch && packed) {
            const int64_t lines =
                std::max<int64_t>(1, (taps * width / kCacheLineFloats + prefetch->passes - 1) /
                                         prefetch->passes);
            prefetchShare(fb, loc, weights, add(fb, filterBase, mul(fb, prefetch->to, taps * width)),
                          idx(fb, CO * C * taps - 1), prefetch->pass,
                          arith::SubIOp::create(fb, loc, prefetch->to, prefetch->from),
                          arith::SubIOp::create(fb, loc, c, prefetch->from), lines);
          }
          SmallVector<Value> next(a.begin(), a.end());
          Value filterRow = add(fb, filterBase, mul(fb, c, taps * width));
          for (int64_t tap = 0; tap < taps; ++tap) {
            SmallVector<Value> wv;
            for (int64_t v = 0; v < vectors; ++v) {
              Value at = add(fb, filterRow, idx(fb, tap * width + v * VL));
              if ((v + 1) * VL <= width) {
                wv.push_back(vector::LoadOp::create(fb, loc, vec, filters, ValueRange{at}));
                continue;
              }
              Value mask = vector::CreateMaskOp::create(
                  fb, loc, VectorType::get({VL}, fb.getI1Type()),
                  ValueRange{idx(fb, width - v * VL)});
              wv.push_back(vector::MaskedLoadOp::create(fb, loc, vec, filters, ValueRange{at},
                                                        mask, floatConstant(fb, loc, vec, 0.0)));
            }
            for (int64_t p = 0; p < P; ++p) {
              Value xv = vector::BroadcastOp::create(fb, loc, vec, xAt(fb, c, tap, p));
              for (int64_t v = 0; v < vectors; ++v)
                next[p * vectors + v] =
                    vector::FMAOp::create(fb, loc, xv, wv[v], next[p * vectors + v]);
            }
          }
          scf::YieldOp::create(fb, loc, next);
        });
  };
  // A block's P x V accumulators stored at `at` of `buffer`, [p][o]; and
  // read back.
  auto storeSums = [&](OpBuilder &pb, ValueRange acc, Value buffer, Value at,
                       int64_t vectors) {
    for (int64_t p = 0; p < P; ++p)
      for (int64_t v = 0; v < vectors; ++v)
        vector::StoreOp::create(pb, loc, acc[p * vectors + v], buffer,
                                ValueRange{add(pb, at, idx(pb, p * CB + v * VL))});
  };
  auto loadSums = [&](OpBuilder &pb, Value buffer, Value at) {
    SmallVector<Value> acc;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t v = 0; v < V; ++v)
        acc.push_back(vector::LoadOp::create(pb, loc, vec, buffer,
                                             ValueRange{add(pb, at, idx(pb, p * CB + v * VL))}));
    return acc;
  };
  // The block's sums (`acc`, P x V vectors of channels), per output
  // channel its P pixels (flat position j onwards) as one vector, through
  // the epilogue. A vector epilogue gets them transposed in registers
  // (transposePixels); a scalar one element by element through `sums`.
  // (More pixels than lanes, a tuning candidate of 12 or 14 pixels with
  // 8 lanes, go through `sums`.)
  int64_t paddedPixels = 1;
  while (paddedPixels < P)
    paddedPixels *= 2;
  const bool transposeInRegisters = vectorEpilogue && paddedPixels <= VL;
  // (A last block of `width` < CB channels stores only those.)
  auto finish = [&](OpBuilder &pb, ValueRange acc, Value image, Value coBlock, Value j,
                    int64_t width) {
    const int64_t vectors = vectorsOf(width);
    if (transposeInRegisters) {
      for (int64_t v = 0; v < vectors; ++v) {
        SmallVector<Value> rows;
        for (int64_t p = 0; p < P; ++p)
          rows.push_back(acc[p * vectors + v]);
        SmallVector<Value> columns = transposePixels(pb, loc, rows);
        for (int64_t o = 0; o < std::min(VL, width - v * VL); ++o)
          emitGemmEpilogueVector(pb, loc, kernel, root, entry, columns[o],
                                 ValueRange{image, add(pb, mul(pb, coBlock, CB), idx(pb, v * VL + o)), j},
                                 bounds, resultIndex, failed, nullptr, {}, P);
      }
      return;
    }
    storeSums(pb, acc, sums, idx(pb, 0), vectors);
    Value buffer = sums, at = idx(pb, 0);
    forRange(pb, idx(pb, 0), idx(pb, width), 1, [&](OpBuilder &eb, Value o) {
      Value co = add(eb, mul(eb, coBlock, CB), o);
      SmallVector<Value> column;
      for (int64_t p = 0; p < P; ++p)
        column.push_back(memref::LoadOp::create(
            eb, loc, buffer, ValueRange{add(eb, add(eb, at, idx(eb, p * CB)), o)}));
      if (vectorEpilogue) {
        emitGemmEpilogueVector(eb, loc, kernel, root, entry,
                               vector::FromElementsOp::create(eb, loc, pixels, column),
                               ValueRange{image, co, j}, bounds, resultIndex, failed);
        return;
      }
      for (int64_t p = 0; p < P; ++p)
        emitGemmEpilogueAt(eb, loc, kernel, root, entry, column[p],
                           ValueRange{image, co, add(eb, j, idx(eb, p))}, bounds, resultIndex,
                           failed);
    });
  };

  forRange(b, idx(b, 0), idx(b, units), 1, [&](OpBuilder &ub, Value unit) {
    // Units run band after band of one block of output channels, so a
    // thread repacks a block's filters once; with the filters packed
    // already, block after block of one band, so it copies a band's slab
    // once (a 7 x 7 plane of 512 channels is one band for 16 blocks).
    Value image = arith::DivUIOp::create(ub, loc, unit, idx(ub, coBlocks * bands));
    Value rest = arith::RemUIOp::create(ub, loc, unit, idx(ub, coBlocks * bands));
    Value coBlock = packed ? arith::RemUIOp::create(ub, loc, rest, idx(ub, coBlocks)).getResult()
                           : arith::DivUIOp::create(ub, loc, rest, idx(ub, bands)).getResult();
    Value bandIndex = packed
                          ? arith::DivUIOp::create(ub, loc, rest, idx(ub, coBlocks)).getResult()
                          : arith::RemUIOp::create(ub, loc, rest, idx(ub, bands)).getResult();
    repack(ub, coBlock);
    Value filterBase = packed ? mul(ub, coBlock, CB * C * taps) : idx(ub, 0);
    if (pointwise) {
      // The unit's run of blocks over the plane, read straight from the
      // input (channel c of pixel q at (image * C + c) * OH * OW + q; with
      // a concat, channels [first, first + channels) from that part).
      Value first = mul(ub, bandIndex, band);
      Value last = arith::MinUIOp::create(ub, loc, add(ub, first, idx(ub, band)),
                                          idx(ub, rowBlocks));
      auto run = [&](OpBuilder &rb, int64_t width) {
        forRange(rb, first, last, 1, [&](OpBuilder &pb, Value block) {
          Value j = arith::MinUIOp::create(pb, loc, mul(pb, block, P), idx(pb, rowPixels - P));
          Prefetch prefetch{arith::SubIOp::create(pb, loc, block, first), band, idx(pb, 0),
                            idx(pb, C)};
          SmallVector<Value> acc(P * vectorsOf(width), floatConstant(pb, loc, vec, 0.0));
          for (const ConvSource &source : sources) {
            Value in = entry->getArgument(source.arg);
            Value origin = add(pb, mul(pb, image, source.channels * rowPixels), j);
            Value local = add(pb, origin, idx(pb, -source.firstChannel * rowPixels));
            auto sums = accumulate(
                pb, width, filterBase, idx(pb, source.firstChannel),
                idx(pb, source.firstChannel + source.channels), acc,
                [&](OpBuilder &fb, Value c, int64_t, int64_t p) {
                  return memref::LoadOp::create(
                             fb, loc, in,
                             ValueRange{add(fb, add(fb, mul(fb, c, rowPixels), local), idx(fb, p))})
                      .getResult();
                },
                prefetch);
            acc.assign(sums.getResults().begin(), sums.getResults().end());
          }
          finish(pb, acc, image, coBlock, j, width);
        });
      };
      if (lastWidth == CB) {
        run(ub, CB);
        return;
      }
      Value isLast = arith::CmpIOp::create(ub, loc, arith::CmpIPredicate::eq, coBlock,
                                           idx(ub, coBlocks - 1));
      auto choice = scf::IfOp::create(ub, loc, TypeRange{}, isLast, /*withElseRegion=*/true);
      OpBuilder lb = OpBuilder::atBlockBegin(&choice.getThenRegion().front());
      run(lb, lastWidth);
      OpBuilder fb = OpBuilder::atBlockBegin(&choice.getElseRegion().front());
      run(fb, CB);
      return;
    }
    Value in = entry->getArgument(sources.front().arg);
    Value firstRow = mul(ub, bandIndex, band);
    Value rows = arith::MinUIOp::create(ub, loc, idx(ub, band),
                                        arith::SubIOp::create(ub, loc, idx(ub, OH), firstRow));
    // The input rows the band reads, zero-padded: slab row r of channel c
    // is input row firstRow * sh - ph + r, its column q input column
    // q - pw. Copied when the slab holds another band.
    OpBuilder sb = whenHeldChanges(ub, loc, slabFor, add(ub, mul(ub, image, bands), bandIndex));
    forRange(sb, idx(sb, 0), idx(sb, slabSize), VL, [&](OpBuilder &zb, Value at) {
      vector::StoreOp::create(zb, loc, floatConstant(zb, loc, vec, 0.0), slab, ValueRange{at});
    });
    Value top = arith::SubIOp::create(sb, loc, mul(sb, firstRow, sh), idx(sb, ph));
    forRange(sb, idx(sb, 0), idx(sb, C * slabRows), 1, [&](OpBuilder &rb, Value cr) {
      Value c = arith::DivUIOp::create(rb, loc, cr, idx(rb, slabRows));
      Value h = add(rb, top, arith::RemUIOp::create(rb, loc, cr, idx(rb, slabRows)));
      Value inside = arith::AndIOp::create(
          rb, loc, arith::CmpIOp::create(rb, loc, arith::CmpIPredicate::sge, h, idx(rb, 0)),
          arith::CmpIOp::create(rb, loc, arith::CmpIPredicate::slt, h, idx(rb, H)));
      auto copy = scf::IfOp::create(rb, loc, inside, /*withElseRegion=*/false);
      OpBuilder cb = OpBuilder::atBlockBegin(&copy.getThenRegion().front());
      Value src = mul(cb, add(cb, mul(cb, add(cb, mul(cb, image, C), c), H), h), W);
      Value dst = add(cb, mul(cb, cr, slabW), idx(cb, pw));
      forRange(cb, idx(cb, 0), idx(cb, W), 1, [&](OpBuilder &eb, Value q) {
        memref::StoreOp::create(eb, loc,
                                memref::LoadOp::create(eb, loc, in, ValueRange{add(eb, src, q)}),
                                slab, ValueRange{add(eb, dst, q)});
      });
    });
    // Blocks of P pixels of each output row.
    // Input channels in chunks whose filters stay in the L1 cache while
    // every block of the band reads them (a 7 x 7 plane of 512 channels
    // streamed a block's 590 KB of filters from L2 per row); each block's
    // sums wait in `partial` between chunks, in the same order of adds.
    // One chunk (at most chunkChannels inputs) keeps them in registers.
    Value blocks = mul(ub, rows, rowBlocks);
    auto eachBlock = [&](OpBuilder &ob,
                         function_ref<void(OpBuilder &, Value, Value, Value, Value)> body) {
      forRange(ob, idx(ob, 0), blocks, 1, [&](OpBuilder &pb, Value block) {
        Value r = arith::DivUIOp::create(pb, loc, block, idx(pb, rowBlocks));
        Value wo = arith::MinUIOp::create(
            pb, loc, mul(pb, arith::RemUIOp::create(pb, loc, block, idx(pb, rowBlocks)), P),
            idx(pb, OW - P));
        body(pb, r, wo, block, mul(pb, block, P * CB));
      });
    };
    // Block `pass` of the band, at (r, wo), over channels [cFrom, cTo).
    auto accumulateBlock = [&](OpBuilder &pb, Value r, Value wo, Value pass, Value cFrom,
                               Value cTo, ValueRange init) {
      // Slab position of pixel 0's window at tap (0, 0).
      Value origin = add(pb, mul(pb, mul(pb, r, sh), slabW), mul(pb, wo, sw));
      return accumulate(pb, CB, filterBase, cFrom, cTo, init,
                        [&](OpBuilder &fb, Value c, int64_t tap, int64_t p) {
                          int64_t kh = tap / KW, kw = tap % KW;
                          Value at = add(fb, add(fb, mul(fb, c, slabRows * slabW), origin),
                                         idx(fb, kh * dh * slabW + kw * dw + p * sw));
                          return memref::LoadOp::create(fb, loc, slab, ValueRange{at}).getResult();
                        },
                        Prefetch{pass, band * rowBlocks, cFrom, cTo});
    };
    auto outputAt = [&](OpBuilder &pb, Value r, Value wo) {
      return add(pb, mul(pb, add(pb, firstRow, r), OW), wo);
    };
    if (C <= chunkChannels) {
      eachBlock(ub, [&](OpBuilder &pb, Value r, Value wo, Value block, Value) {
        SmallVector<Value> zeros(P * V, floatConstant(pb, loc, vec, 0.0));
        auto acc = accumulateBlock(pb, r, wo, block, idx(pb, 0), idx(pb, C), zeros);
        finish(pb, acc.getResults(), image, coBlock, outputAt(pb, r, wo), CB);
      });
      return;
    }
    forRange(ub, idx(ub, 0), mul(ub, blocks, P * CB), VL, [&](OpBuilder &zb, Value at) {
      vector::StoreOp::create(zb, loc, floatConstant(zb, loc, vec, 0.0), partial, ValueRange{at});
    });
    forRange(ub, idx(ub, 0), idx(ub, C), chunkChannels, [&](OpBuilder &kb, Value cFrom) {
      Value cTo = arith::MinUIOp::create(kb, loc, add(kb, cFrom, idx(kb, chunkChannels)),
                                         idx(kb, C));
      eachBlock(kb, [&](OpBuilder &pb, Value r, Value wo, Value pass, Value at) {
        auto acc = accumulateBlock(pb, r, wo, pass, cFrom, cTo, loadSums(pb, partial, at));
        storeSums(pb, acc.getResults(), partial, at, V);
      });
    });
    eachBlock(ub, [&](OpBuilder &pb, Value r, Value wo, Value, Value at) {
      finish(pb, loadSums(pb, partial, at), image, coBlock, outputAt(pb, r, wo), CB);
    });
  });
  if (slab)
    memref::DeallocOp::create(b, loc, slab);
  if (partial)
    memref::DeallocOp::create(b, loc, partial);
  if (packedFilter)
    memref::DeallocOp::create(b, loc, packedFilter);
  func::ReturnOp::create(b, loc);
  if (failed) {
    func.erase();
    return failure();
  }
  return func;
}
