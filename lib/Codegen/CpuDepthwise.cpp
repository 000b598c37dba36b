//===- CpuDepthwise.cpp - depthwise convolution on the CPU ----------------===//
//
// A depthwise conv2d has one input channel per group: as a GEMM its rows
// are single filters, so the GEMM form would pack a panel for every few
// FMAs. Here each outer iteration is one output plane (image, channel).
// Its KH x KW weights are loaded once. Each output row is swept in
// vectors of 8 (or 4) outputs: every vector accumulates all taps in a
// register, one (strided: loaded wide and shuffled) input vector per tap.
// Rows of the window above or below the image are clamped and their
// weights zeroed, so the sweep has no branch. The columns whose window
// crosses the left or right edge take a scalar loop with per-tap checks;
// a last vector overlapping the one before covers the interior's tail. The epilogue (bias,
// activation, residual) runs on each vector's sums where it allows (f32,
// every read contiguous or constant along the row), else per element.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;
using namespace kiln;

namespace {
/// More taps than this stay untiled (their weights would not fit registers).
constexpr int64_t kMaxTaps = 49;

/// ceil(a / b) for b > 0 and any a.
int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
/// floor(a / b) for b > 0 and any a.
int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
} // namespace

FailureOr<func::FuncOp> kiln::buildCpuDepthwiseFunction(KernelOp kernel, Operation *root,
                                                        OpBuilder &builder, StringRef name) {
  auto conv = dyn_cast<Conv2dOp>(root);
  if (!conv)
    return func::FuncOp();
  auto input = dyn_cast<BlockArgument>(conv.getInput());
  auto filter = dyn_cast<BlockArgument>(conv.getFilter());
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> x = shapeOf(conv.getInput()), w = shapeOf(conv.getFilter()),
                    y = shapeOf(conv.getResult());
  const int64_t groups = conv.getGroupsAttr().getInt();
  if (!input || !filter || w[1] != 1 || groups != x[1] || w[0] % groups != 0 ||
      !getElementTypeOrSelf(input.getType()).isF32() || w[2] * w[3] > kMaxTaps ||
      y[2] * y[3] == 0)
    return func::FuncOp();
  const int64_t images = x[0], channels = x[1], H = x[2], W = x[3];
  const int64_t outChannels = y[1], OH = y[2], OW = y[3], KH = w[2], KW = w[3];
  const int64_t perGroup = w[0] / groups; // output channels per input channel
  const int64_t sh = conv.getStrides()[0], sw = conv.getStrides()[1];
  const int64_t ph = conv.getPadding()[0], pw = conv.getPadding()[1];
  const int64_t dh = conv.getDilation()[0], dw = conv.getDilation()[1];
  // The columns whose whole window lies inside the image, for every tap:
  // ow * sw - pw >= 0 and ow * sw - pw + (KW - 1) * dw <= W - 1; strided, a
  // vector's wide load reaches sw - 1 further, which must stay in the row.
  const int64_t interiorBegin = std::clamp<int64_t>(ceilDiv(pw, sw), 0, OW);
  const int64_t interiorEnd = std::clamp<int64_t>(
      floorDiv(W - 1 - (sw - 1) + pw - (KW - 1) * dw, sw) + 1, interiorBegin, OW);
  // 8 lanes, or 4 for rows of fewer interior columns (7x7 planes).
  const int64_t lanes = interiorEnd - interiorBegin >= 8 ? 8 : 4;
  const int64_t vectors = (interiorEnd - interiorBegin) / lanes;
  const int64_t vectorEnd = interiorBegin + vectors * lanes;

  Location loc = kernel.getLoc();
  MLIRContext *ctx = builder.getContext();
  Type f32 = Float32Type::get(ctx);
  VectorType vec = VectorType::get({lanes}, f32);
  VectorType wide = VectorType::get({lanes * sw}, f32);
  SmallVector<int64_t> pick; // every sw-th lane of a wide load
  for (int64_t l = 0; l < lanes; ++l)
    pick.push_back(l * sw);
  const int64_t planes = images * outChannels;
  func::FuncOp func =
      createFlatKernelFunction(kernel, builder, name, planes * OH * OW * KH * KW, planes);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };
  auto widen = [&](OpBuilder &wb, Value v) {
    return v.getType() == f32 ? v : arith::ExtFOp::create(wb, loc, f32, v).getResult();
  };
  Value in = entry->getArgument(input.getArgNumber());
  Value weights = entry->getArgument(filter.getArgNumber());
  Value block = memref::AllocaOp::create(b, loc, MemRefType::get({lanes}, f32));
  Value zero = floatConstant(b, loc, f32, 0.0);
  SmallVector<AffineExpr> dims;
  for (unsigned d = 0; d < 4; ++d)
    dims.push_back(getAffineDimExpr(d, ctx));
  AffineExpr resultIndex = linearizeExpr(y, dims, ctx);
  const bool vectorEpilogue = vectorizableGemmEpilogue(kernel, root, y, resultIndex);
  bool failed = false;

  scf::ForOp::create(b, loc, idx(b, 0), idx(b, planes), idx(b, 1), ValueRange{},
      [&](OpBuilder &pb, Location, Value plane, ValueRange) {
        Value image = arith::DivUIOp::create(pb, loc, plane, idx(pb, outChannels));
        Value channel = arith::DivUIOp::create(
            pb, loc, arith::RemUIOp::create(pb, loc, plane, idx(pb, outChannels)),
            idx(pb, perGroup));
        Value inBase = arith::MulIOp::create(
            pb, loc,
            arith::AddIOp::create(pb, loc, arith::MulIOp::create(pb, loc, image, idx(pb, channels)),
                                  channel),
            idx(pb, H * W));
        Value outChannel = arith::RemUIOp::create(pb, loc, plane, idx(pb, outChannels));
        Value filterBase = arith::MulIOp::create(pb, loc, outChannel, idx(pb, KH * KW));
        SmallVector<Value> taps;
        for (int64_t t = 0; t < KH * KW; ++t)
          taps.push_back(widen(pb, memref::LoadOp::create(
                                       pb, loc, weights,
                                       ValueRange{arith::AddIOp::create(pb, loc, filterBase,
                                                                        idx(pb, t))})));
        scf::ForOp::create(pb, loc, idx(pb, 0), idx(pb, OH), idx(pb, 1), ValueRange{},
            [&](OpBuilder &rb, Location, Value oh, ValueRange) {
              // Per window row: its input row's offset (clamped into the
              // image) and the taps' weights, zero for a row outside.
              SmallVector<Value> rowOffset, rowTaps;
              Value top = arith::SubIOp::create(
                  rb, loc, arith::MulIOp::create(rb, loc, oh, idx(rb, sh)), idx(rb, ph));
              for (int64_t kh = 0; kh < KH; ++kh) {
                Value ih = arith::AddIOp::create(rb, loc, top, idx(rb, kh * dh));
                Value inside = arith::AndIOp::create(
                    rb, loc,
                    arith::CmpIOp::create(rb, loc, arith::CmpIPredicate::sge, ih, idx(rb, 0)),
                    arith::CmpIOp::create(rb, loc, arith::CmpIPredicate::slt, ih, idx(rb, H)));
                Value clamped = arith::MinSIOp::create(
                    rb, loc, arith::MaxSIOp::create(rb, loc, ih, idx(rb, 0)), idx(rb, H - 1));
                rowOffset.push_back(arith::AddIOp::create(
                    rb, loc, inBase, arith::MulIOp::create(rb, loc, clamped, idx(rb, W))));
                for (int64_t kw = 0; kw < KW; ++kw)
                  rowTaps.push_back(
                      arith::SelectOp::create(rb, loc, inside, taps[kh * KW + kw], zero));
              }
              auto epilogue = [&](OpBuilder &eb, Value sum, Value ow) {
                emitGemmEpilogueAt(eb, loc, kernel, root, entry, sum,
                                   ValueRange{image, outChannel, oh, ow}, y, resultIndex, failed);
              };
              // Whole vectors of interior columns; a last vector overlaps the
              // one before it rather than leave a tail (its outputs are
              // written twice, with the same values).
              auto vectorAt = [&](OpBuilder &vb, Value ow, ArrayRef<Value> splats) {
                Value left = arith::SubIOp::create(
                    vb, loc, arith::MulIOp::create(vb, loc, ow, idx(vb, sw)), idx(vb, pw));
                Value acc = floatConstant(vb, loc, vec, 0.0);
                for (int64_t kh = 0; kh < KH; ++kh)
                  for (int64_t kw = 0; kw < KW; ++kw) {
                    Value at = arith::AddIOp::create(
                        vb, loc, rowOffset[kh],
                        arith::AddIOp::create(vb, loc, left, idx(vb, kw * dw)));
                    Value v;
                    if (sw == 1) {
                      v = vector::LoadOp::create(vb, loc, vec, in, ValueRange{at});
                    } else {
                      Value all = vector::LoadOp::create(vb, loc, wide, in, ValueRange{at});
                      v = vector::ShuffleOp::create(vb, loc, all, all, pick);
                    }
                    acc = vector::FMAOp::create(vb, loc, splats[kh * KW + kw], v, acc);
                  }
                if (vectorEpilogue) {
                  emitGemmEpilogueVector(vb, loc, kernel, root, entry, acc,
                                         ValueRange{image, outChannel, oh, ow}, y, resultIndex,
                                         failed);
                  return;
                }
                vector::StoreOp::create(vb, loc, acc, block, ValueRange{idx(vb, 0)});
                scf::ForOp::create(vb, loc, idx(vb, 0), idx(vb, lanes), idx(vb, 1), ValueRange{},
                    [&](OpBuilder &lb, Location, Value l, ValueRange) {
                      epilogue(lb, memref::LoadOp::create(lb, loc, block, ValueRange{l}),
                               arith::AddIOp::create(lb, loc, ow, l));
                      scf::YieldOp::create(lb, loc);
                    });
              };
              if (vectors > 0) {
                SmallVector<Value> splats;
                for (Value t : rowTaps)
                  splats.push_back(vector::BroadcastOp::create(rb, loc, vec, t));
                scf::ForOp::create(rb, loc, idx(rb, interiorBegin), idx(rb, vectorEnd),
                                   idx(rb, lanes), ValueRange{},
                    [&](OpBuilder &vb, Location, Value ow, ValueRange) {
                      vectorAt(vb, ow, splats);
                      scf::YieldOp::create(vb, loc);
                    });
                if (vectorEnd < interiorEnd)
                  vectorAt(rb, idx(rb, interiorEnd - lanes), splats);
              }
              // The edge columns and the tail: every tap checked.
              auto scalarColumns = [&](int64_t begin, int64_t end) {
                if (begin >= end)
                  return;
                scf::ForOp::create(rb, loc, idx(rb, begin), idx(rb, end), idx(rb, 1), ValueRange{},
                    [&](OpBuilder &sb, Location, Value ow, ValueRange) {
                      Value left = arith::SubIOp::create(
                          sb, loc, arith::MulIOp::create(sb, loc, ow, idx(sb, sw)), idx(sb, pw));
                      Value sum = zero;
                      for (int64_t kw = 0; kw < KW; ++kw) {
                        Value iw = arith::AddIOp::create(sb, loc, left, idx(sb, kw * dw));
                        Value inside = arith::AndIOp::create(
                            sb, loc,
                            arith::CmpIOp::create(sb, loc, arith::CmpIPredicate::sge, iw,
                                                  idx(sb, 0)),
                            arith::CmpIOp::create(sb, loc, arith::CmpIPredicate::slt, iw,
                                                  idx(sb, W)));
                        Value col = arith::MinSIOp::create(
                            sb, loc, arith::MaxSIOp::create(sb, loc, iw, idx(sb, 0)),
                            idx(sb, W - 1));
                        for (int64_t kh = 0; kh < KH; ++kh) {
                          Value v = memref::LoadOp::create(
                              sb, loc, in,
                              ValueRange{arith::AddIOp::create(sb, loc, rowOffset[kh], col)});
                          Value t = arith::SelectOp::create(sb, loc, inside, rowTaps[kh * KW + kw],
                                                            zero);
                          sum = math::FmaOp::create(sb, loc, t, v, sum);
                        }
                      }
                      epilogue(sb, sum, ow);
                      scf::YieldOp::create(sb, loc);
                    });
              };
              scalarColumns(0, interiorBegin);
              scalarColumns(vectors > 0 ? interiorEnd : interiorBegin, OW);
              scf::YieldOp::create(rb, loc);
            });
        scf::YieldOp::create(pb, loc);
      });
  func::ReturnOp::create(b, loc);
  if (failed) {
    func.erase();
    return failure();
  }
  return func;
}
