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

bool kiln::fitsCpuDirectConv(Operation *root, const CpuDirectConvConfig &config) {
  auto conv = dyn_cast_or_null<Conv2dOp>(root);
  if (!conv || conv.getGroupsAttr().getInt() != 1)
    return false;
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> x = shapeOf(conv.getInput()), w = shapeOf(conv.getFilter()),
                    y = shapeOf(conv.getResult());
  auto isF32 = [](Value v) { return getElementTypeOrSelf(v.getType()).isF32(); };
  // Rows under `pixels` (ResNet's 7x7 stage at 8) stay with the GEMM form:
  // each unit would repack a 512-channel filter block for only 7 x 7
  // outputs (94 GFLOP/s against the GEMM's 100).
  return isa<BlockArgument>(conv.getInput()) && isa<BlockArgument>(conv.getFilter()) &&
         isF32(conv.getInput()) && isF32(conv.getFilter()) && isF32(conv.getResult()) &&
         w[2] * w[3] >= 2 && w[2] * w[3] <= 49 && y[1] % config.blockChannels() == 0 &&
         y[3] >= config.pixels && y[2] > 0 && x[1] > 0;
}

std::optional<CpuDirectConvConfig> kiln::defaultCpuDirectConv(Operation *root) {
  auto conv = dyn_cast_or_null<Conv2dOp>(root);
  if (!conv)
    return std::nullopt;
  CpuDirectConvConfig config = CpuDirectConvConfig::defaultForHost();
  // Strided, no input value is shared between taps, and blocks of 4 pixels
  // x 4 vectors measured faster with AVX-512 on ResNet's 3x3/2
  // convolutions (1.16x and 1.06x at one thread; the 3-channel stem was
  // not faster).
  if (config.lanes == 16 && (conv.getStrides()[0] > 1 || conv.getStrides()[1] > 1) &&
      conv.getInput().getType().getShape()[1] >= 16) {
    CpuDirectConvConfig wide = config;
    wide.pixels = 4;
    wide.vectors = 4;
    if (fitsCpuDirectConv(root, wide))
      return wide;
  }
  // Two vectors of output channels where they divide, else one.
  if (fitsCpuDirectConv(root, config))
    return config;
  config.vectors = 1;
  if (fitsCpuDirectConv(root, config))
    return config;
  return std::nullopt;
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
  auto input = cast<BlockArgument>(conv.getInput());
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
  const int64_t coBlocks = CO / CB;
  // (The last block of a row starts at OW - P, recomputing a few pixels.)
  const int64_t rowBlocks = (OW + P - 1) / P;
  // Bands of output rows: about 16 units in all, so both threads of a
  // small image have work, and a slab of at most a few hundred KB.
  int64_t band = std::clamp<int64_t>(OH * images * coBlocks / 16, 1, 8);
  band = std::min(band, OH);
  const int64_t bands = (OH + band - 1) / band;
  const int64_t slabRows = (band - 1) * sh + (KH - 1) * dh + 1;
  // (The last pixel's last tap reads column (OW - 1) sw + (KW - 1) dw,
  // at most W + 2 pw - 1.)
  const int64_t slabW = W + 2 * pw;
  const int64_t slabSize = (C * slabRows * slabW + VL - 1) / VL * VL;
  const int64_t taps = KH * KW;

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
  Value slab = heap(slabSize), packedFilter = heap(C * taps * CB);
  Value sums = memref::AllocaOp::create(b, loc, MemRefType::get({P * CB}, f32));
  // The block of output channels packedFilter holds (none yet).
  Value packedFor = memref::AllocaOp::create(b, loc, MemRefType::get({1}, b.getIndexType()));
  memref::StoreOp::create(b, loc, idx(b, coBlocks), packedFor, ValueRange{idx(b, 0)});
  Value in = entry->getArgument(input.getArgNumber());
  Value weights = entry->getArgument(filter.getArgNumber());

  // The epilogue sees the result as the GEMM does: [images, CO, OH * OW].
  SmallVector<AffineExpr> dims;
  for (unsigned d = 0; d < 3; ++d)
    dims.push_back(getAffineDimExpr(d, ctx));
  const SmallVector<int64_t> bounds = {images, CO, OH * OW};
  AffineExpr resultIndex = linearizeExpr(bounds, dims, ctx);
  const bool vectorEpilogue = vectorizableGemmEpilogue(kernel, root, bounds, resultIndex);
  bool failed = false;

  forRange(b, idx(b, 0), idx(b, units), 1, [&](OpBuilder &ub, Value unit) {
    Value image = arith::DivUIOp::create(ub, loc, unit, idx(ub, coBlocks * bands));
    Value rest = arith::RemUIOp::create(ub, loc, unit, idx(ub, coBlocks * bands));
    Value coBlock = arith::DivUIOp::create(ub, loc, rest, idx(ub, bands));
    Value firstRow = mul(ub, arith::RemUIOp::create(ub, loc, rest, idx(ub, bands)), band);
    Value rows = arith::MinUIOp::create(ub, loc, idx(ub, band),
                                        arith::SubIOp::create(ub, loc, idx(ub, OH), firstRow));
    // The filters of this block of output channels, [c][tap][o]: repacked
    // only when the block changes (a thread's units run band after band of
    // one block; repacking per band cost 10-15% of a 56x56 convolution),
    // each [c][tap] row of 32 written whole.
    Value stale = arith::CmpIOp::create(
        ub, loc, arith::CmpIPredicate::ne,
        memref::LoadOp::create(ub, loc, packedFor, ValueRange{idx(ub, 0)}), coBlock);
    auto repack = scf::IfOp::create(ub, loc, stale, /*withElseRegion=*/false);
    OpBuilder rb = OpBuilder::atBlockBegin(&repack.getThenRegion().front());
    Value firstFilter = mul(rb, mul(rb, coBlock, CB), C * taps);
    forRange(rb, idx(rb, 0), idx(rb, C * taps), 1, [&](OpBuilder &ob, Value ct) {
      Value row = add(ob, firstFilter, ct), to = mul(ob, ct, CB);
      for (int64_t o = 0; o < CB; ++o)
        memref::StoreOp::create(
            ob, loc,
            memref::LoadOp::create(ob, loc, weights, ValueRange{add(ob, row, idx(ob, o * C * taps))}),
            packedFilter, ValueRange{add(ob, to, idx(ob, o))});
    });
    memref::StoreOp::create(rb, loc, coBlock, packedFor, ValueRange{idx(rb, 0)});
    // The input rows the band reads, zero-padded: slab row r of channel c
    // is input row firstRow * sh - ph + r, its column q input column
    // q - pw.
    forRange(ub, idx(ub, 0), idx(ub, slabSize), VL, [&](OpBuilder &zb, Value at) {
      vector::StoreOp::create(zb, loc, floatConstant(zb, loc, vec, 0.0), slab, ValueRange{at});
    });
    Value top = arith::SubIOp::create(ub, loc, mul(ub, firstRow, sh), idx(ub, ph));
    forRange(ub, idx(ub, 0), idx(ub, C * slabRows), 1, [&](OpBuilder &rb, Value cr) {
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
    forRange(ub, idx(ub, 0), mul(ub, rows, rowBlocks), 1, [&](OpBuilder &pb, Value block) {
      Value r = arith::DivUIOp::create(pb, loc, block, idx(pb, rowBlocks));
      Value wo = arith::MinUIOp::create(
          pb, loc, mul(pb, arith::RemUIOp::create(pb, loc, block, idx(pb, rowBlocks)), P),
          idx(pb, OW - P));
      // Slab position of pixel 0's window at tap (0, 0).
      Value origin = add(pb, mul(pb, mul(pb, r, sh), slabW), mul(pb, wo, sw));
      SmallVector<Value> init(P * V, floatConstant(pb, loc, vec, 0.0));
      auto acc = scf::ForOp::create(
          pb, loc, idx(pb, 0), idx(pb, C), idx(pb, 1), init,
          [&](OpBuilder &fb, Location, Value c, ValueRange a) {
            SmallVector<Value> next(a.begin(), a.end());
            Value plane = add(fb, mul(fb, c, slabRows * slabW), origin);
            Value filterRow = mul(fb, c, taps * CB);
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t tap = kh * KW + kw;
                SmallVector<Value> wv;
                for (int64_t v = 0; v < V; ++v)
                  wv.push_back(vector::LoadOp::create(
                      fb, loc, vec, packedFilter,
                      ValueRange{add(fb, filterRow, idx(fb, tap * CB + v * VL))}));
                Value at = add(fb, plane, idx(fb, kh * dh * slabW + kw * dw));
                for (int64_t p = 0; p < P; ++p) {
                  Value xv = vector::BroadcastOp::create(
                      fb, loc, vec,
                      memref::LoadOp::create(fb, loc, slab, ValueRange{add(fb, at, idx(fb, p * sw))}));
                  for (int64_t v = 0; v < V; ++v)
                    next[p * V + v] = vector::FMAOp::create(fb, loc, xv, wv[v], next[p * V + v]);
                }
              }
            scf::YieldOp::create(fb, loc, next);
          });
      for (int64_t p = 0; p < P; ++p)
        for (int64_t v = 0; v < V; ++v)
          vector::StoreOp::create(pb, loc, acc.getResult(p * V + v), sums,
                                  ValueRange{idx(pb, p * CB + v * VL)});
      // Per output channel, its P pixels as one vector through the epilogue.
      Value j = add(pb, mul(pb, add(pb, firstRow, r), OW), wo);
      forRange(pb, idx(pb, 0), idx(pb, CB), 1, [&](OpBuilder &eb, Value o) {
        Value co = add(eb, mul(eb, coBlock, CB), o);
        SmallVector<Value> column;
        for (int64_t p = 0; p < P; ++p)
          column.push_back(
              memref::LoadOp::create(eb, loc, sums, ValueRange{add(eb, idx(eb, p * CB), o)}));
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
    });
  });
  memref::DeallocOp::create(b, loc, slab);
  memref::DeallocOp::create(b, loc, packedFilter);
  func::ReturnOp::create(b, loc);
  if (failed) {
    func.erase();
    return failure();
  }
  return func;
}
