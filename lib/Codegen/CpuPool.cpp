//===- CpuPool.cpp - max and average pooling on the CPU -------------------===//
//
// The pooling form of CpuDepthwise.cpp: each outer iteration is one output
// plane (image, channel); each output row is swept in vectors of 16, 8 or
// 4 outputs (the widest the row's interior fills). Each window row is
// reduced over its taps on wide loads first and the strided lanes picked
// once per vector (ResNet-18's 3x3/2 pool: three loads and two max per row,
// one shuffle in all instead of one per tap; that pool alone 217 -> 191
// us). The
// pool's prologue (the bias and ReLU of the convolution before it) is
// evaluated on those vectors: every read it makes must be contiguous or
// constant along the row. Window
// rows outside the image read a clamped row and take the padding value;
// the edge columns take a scalar loop with per-tap checks. Average pooling
// counts the padding, as kiln.pool2d defines it.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>
#include <functional>
#include <limits>

using namespace mlir;
using namespace kiln;

namespace {
int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// The pool's input at `coords` (image, channel, row, column), as `lanes`
/// consecutive columns (a scalar for 1), through the kernel's prologue.
Value inputAt(OpBuilder &b, Location loc, KernelOp kernel, Block *entry, Value input,
              ArrayRef<int64_t> shape, ValueRange coords, int64_t lanes, bool &failed) {
  MLIRContext *ctx = kernel.getContext();
  SmallVector<AffineExpr> dims;
  for (unsigned d = 0; d < 4; ++d)
    dims.push_back(getAffineDimExpr(d, ctx));
  AffineExpr index = linearizeExpr(shape, dims, ctx);
  // A fresh evaluator per point: it caches the values it emitted by index.
  FlatEvaluator evaluator(kernel, 4);
  evaluator.collect(input, index);
  SmallVector<Value> loads;
  for (auto [arg, expr] : evaluator.getAccesses()) {
    AffineExpr simple = simplifyWithBounds(expr, shape);
    Value buffer = entry->getArgument(arg);
    Value at = applyExpr(b, loc, simple, coords);
    if (lanes == 1) {
      loads.push_back(memref::LoadOp::create(b, loc, buffer, ValueRange{at}));
      continue;
    }
    auto vec = VectorType::get({lanes}, Float32Type::get(ctx));
    AffineExpr column = dims[3];
    bool constant = simplifyAffineExpr(simple.replace(column, column + 1) - simple, 4, 0) ==
                    getAffineConstantExpr(0, ctx);
    if (constant)
      loads.push_back(vector::BroadcastOp::create(
          b, loc, vec, memref::LoadOp::create(b, loc, buffer, ValueRange{at})));
    else
      loads.push_back(vector::LoadOp::create(b, loc, vec, buffer, ValueRange{at}));
  }
  return evaluator.emit(b, input, index, loads, failed, coords, {}, lanes);
}

/// Whether the prologue reads only f32 inputs, each contiguous or constant
/// along the row, with nothing guarded but the concat the parts come from.
bool vectorizablePrologue(KernelOp kernel, const ChannelPart &part, Operation *concat) {
  MLIRContext *ctx = kernel.getContext();
  for (Operation &op : kernel.getBody().front().without_terminator())
    if (op.hasTrait<GuardedView>() && &op != concat)
      return false;
  SmallVector<AffineExpr> dims;
  for (unsigned d = 0; d < 4; ++d)
    dims.push_back(getAffineDimExpr(d, ctx));
  ArrayRef<int64_t> shape = cast<RankedTensorType>(part.value.getType()).getShape();
  FlatEvaluator evaluator(kernel, 4);
  evaluator.collect(part.value, linearizeExpr(shape, dims, ctx));
  for (auto [arg, expr] : evaluator.getAccesses()) {
    if (!getElementTypeOrSelf(kernel.getBody().front().getArgument(arg).getType()).isF32())
      return false;
    AffineExpr simple = simplifyWithBounds(expr, shape);
    auto step = dyn_cast<AffineConstantExpr>(
        simplifyAffineExpr(simple.replace(dims[3], dims[3] + 1) - simple, 4, 0));
    if (!step || (step.getValue() != 0 && step.getValue() != 1))
      return false;
  }
  return true;
}
} // namespace

FailureOr<func::FuncOp> kiln::buildCpuPoolFunction(KernelOp kernel, Operation *root,
                                                   OpBuilder &builder, StringRef name) {
  auto pool = dyn_cast<Pool2dOp>(root);
  if (!pool || (pool.getKind() != ReduceKind::max && pool.getKind() != ReduceKind::mean))
    return func::FuncOp();
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> x = shapeOf(pool.getInput()), y = shapeOf(pool.getResult());
  Operation *yield = kernel.getBody().front().getTerminator();
  // A concat along the channels in front (a SqueezeNet fire module's
  // output, pooled): each plane reads the input holding its channel.
  SmallVector<ChannelPart, 2> parts = channelParts(pool.getInput());
  Operation *concat = parts.size() == 1 && parts[0].value == pool.getInput()
                          ? nullptr
                          : pool.getInput().getDefiningOp();
  if (!getElementTypeOrSelf(pool.getInput().getType()).isF32() ||
      !getElementTypeOrSelf(pool.getResult().getType()).isF32() || yield->getNumOperands() != 1 ||
      yield->getOperand(0) != pool.getResult() || y[2] * y[3] == 0 || parts.empty() ||
      llvm::any_of(parts, [&](const ChannelPart &part) {
        return !vectorizablePrologue(kernel, part, concat);
      }))
    return func::FuncOp();
  const int64_t channels = x[1], H = x[2], W = x[3], OH = y[2], OW = y[3];
  const int64_t KH = pool.getKernel()[0], KW = pool.getKernel()[1];
  const int64_t sh = pool.getStrides()[0], sw = pool.getStrides()[1];
  const int64_t ph = pool.getPadding()[0], pw = pool.getPadding()[1];
  const bool isMax = pool.getKind() == ReduceKind::max;
  // Interior columns: every tap of every lane inside the row, the wide
  // load of a strided vector included.
  const int64_t interiorBegin = std::clamp<int64_t>(ceilDiv(pw, sw), 0, OW);
  const int64_t interiorEnd = std::clamp<int64_t>(
      floorDiv(W - 1 - (sw - 1) + pw - (KW - 1), sw) + 1, interiorBegin, OW);
  // The widest vector the interior fills (16 lanes with AVX-512).
  int64_t lanes = 4;
  while (lanes < cpuDefaultLanes() && interiorEnd - interiorBegin >= 2 * lanes)
    lanes *= 2;
  const int64_t vectors = (interiorEnd - interiorBegin) / lanes;
  const int64_t vectorEnd = interiorBegin + vectors * lanes;

  Location loc = kernel.getLoc();
  MLIRContext *ctx = builder.getContext();
  Type f32 = Float32Type::get(ctx);
  VectorType wideVec = VectorType::get({lanes * sw}, f32);
  SmallVector<int64_t> pick;
  for (int64_t l = 0; l < lanes; ++l)
    pick.push_back(l * sw);
  const int64_t planes = x[0] * channels;
  func::FuncOp func =
      createFlatKernelFunction(kernel, builder, name, planes * OH * OW * KH * KW, planes);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };
  Value output = entry->getArgument(kernel.getInputs().size());
  const double padding = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
  const double scale = 1.0 / double(KH * KW);
  bool failed = false;

  scf::ForOp::create(b, loc, idx(b, 0), idx(b, planes), idx(b, 1), ValueRange{},
      [&](OpBuilder &pb, Location, Value plane, ValueRange) {
        Value image = arith::DivUIOp::create(pb, loc, plane, idx(pb, channels));
        Value channel = arith::RemUIOp::create(pb, loc, plane, idx(pb, channels));
        // The plane's rows, read from `part` (its channel `local`).
        auto sweep = [&](OpBuilder &pb, const ChannelPart &part, Value local) {
          ArrayRef<int64_t> px = shapeOf(part.value);
          scf::ForOp::create(pb, loc, idx(pb, 0), idx(pb, OH), idx(pb, 1), ValueRange{},
              [&](OpBuilder &rb, Location, Value oh, ValueRange) {
                SmallVector<Value> rows, rowInside;
                Value top = arith::SubIOp::create(
                    rb, loc, arith::MulIOp::create(rb, loc, oh, idx(rb, sh)), idx(rb, ph));
                for (int64_t kh = 0; kh < KH; ++kh) {
                  auto [inside, row] =
                      clampedIndex(rb, loc, arith::AddIOp::create(rb, loc, top, idx(rb, kh)), H);
                  rowInside.push_back(inside);
                  rows.push_back(row);
                }
                auto finish = [&](OpBuilder &fb, Value acc) {
                  return isMax ? acc
                               : arith::MulFOp::create(fb, loc, acc,
                                                       floatConstant(fb, loc, acc.getType(), scale))
                                     .getResult();
                };
                auto resultAt = [&](OpBuilder &sb, Value ow) {
                  return applyExpr(
                      sb, loc,
                      linearizeExpr(y, {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx),
                                        getAffineDimExpr(2, ctx), getAffineDimExpr(3, ctx)},
                                    ctx),
                      ValueRange{image, channel, oh, ow});
                };
                // A vector of outputs reduces each window row over its taps
                // on the wide loads first (lane j of the load at tap kw is
                // input column left + kw + j), then over the rows, and picks
                // every sw-th lane once: the pick commutes with max and add.
                auto vectorAt = [&](OpBuilder &vb, Value ow) {
                  Value left = arith::SubIOp::create(
                      vb, loc, arith::MulIOp::create(vb, loc, ow, idx(vb, sw)), idx(vb, pw));
                  Value pad = floatConstant(vb, loc, wideVec, padding);
                  // The rows the output row after next adds, at these
                  // columns, fetched ahead: the input was just written by
                  // the kernel before and comes from L3 (ResNet-18's pool,
                  // 3.2 MB, 285-346 -> 265-287 us in the network).
                  if (auto arg = dyn_cast<BlockArgument>(part.value)) {
                    Value buffer = entry->getArgument(arg.getArgNumber());
                    Value plane = arith::MulIOp::create(
                        vb, loc,
                        arith::AddIOp::create(
                            vb, loc, arith::MulIOp::create(vb, loc, image, idx(vb, px[1])), local),
                        idx(vb, H * W));
                    Value column = arith::MaxSIOp::create(vb, loc, left, idx(vb, 0));
                    for (int64_t r = KH + sh; r < KH + 2 * sh; ++r) {
                      Value row = arith::MinSIOp::create(
                          vb, loc,
                          arith::MaxSIOp::create(vb, loc,
                                                 arith::AddIOp::create(vb, loc, top, idx(vb, r)),
                                                 idx(vb, 0)),
                          idx(vb, H - 1));
                      Value at = arith::AddIOp::create(
                          vb, loc, plane,
                          arith::AddIOp::create(vb, loc,
                                                arith::MulIOp::create(vb, loc, row, idx(vb, W)),
                                                column));
                      // (Clamped: the last plane's last row ends the buffer.)
                      for (int64_t l = 0; l < lanes * sw; l += kCacheLineFloats)
                        memref::PrefetchOp::create(
                            vb, loc, buffer,
                            ValueRange{arith::MinUIOp::create(
                                vb, loc, arith::AddIOp::create(vb, loc, at, idx(vb, l)),
                                idx(vb, x[0] * px[1] * H * W - 1))},
                            /*isWrite=*/false, /*localityHint=*/3, /*isDataCache=*/true);
                    }
                  }
                  Value acc;
                  for (int64_t kh = 0; kh < KH; ++kh) {
                    Value rowAcc;
                    for (int64_t kw = 0; kw < KW; ++kw) {
                      Value iw = arith::AddIOp::create(vb, loc, left, idx(vb, kw));
                      Value v = inputAt(vb, loc, kernel, entry, part.value, px,
                                        ValueRange{image, local, rows[kh], iw}, lanes * sw,
                                        failed);
                      rowAcc = rowAcc ? reductionStep(vb, loc, pool.getKind(), rowAcc, v) : v;
                    }
                    rowAcc = arith::SelectOp::create(vb, loc, rowInside[kh], rowAcc, pad);
                    acc = acc ? reductionStep(vb, loc, pool.getKind(), acc, rowAcc) : rowAcc;
                  }
                  if (sw > 1)
                    acc = vector::ShuffleOp::create(vb, loc, acc, acc, pick);
                  vector::StoreOp::create(vb, loc, finish(vb, acc), output,
                                          ValueRange{resultAt(vb, ow)});
                };
                if (vectors > 0) {
                  scf::ForOp::create(rb, loc, idx(rb, interiorBegin), idx(rb, vectorEnd),
                                     idx(rb, lanes), ValueRange{},
                      [&](OpBuilder &vb, Location, Value ow, ValueRange) {
                        vectorAt(vb, ow);
                        scf::YieldOp::create(vb, loc);
                      });
                  // The interior's tail: a vector overlapping the one before.
                  if (vectorEnd < interiorEnd)
                    vectorAt(rb, idx(rb, interiorEnd - lanes));
                }
                auto scalarColumns = [&](int64_t begin, int64_t end) {
                  if (begin >= end)
                    return;
                  scf::ForOp::create(rb, loc, idx(rb, begin), idx(rb, end), idx(rb, 1), ValueRange{},
                      [&](OpBuilder &sb, Location, Value ow, ValueRange) {
                        Value left = arith::SubIOp::create(
                            sb, loc, arith::MulIOp::create(sb, loc, ow, idx(sb, sw)), idx(sb, pw));
                        Value acc = floatConstant(sb, loc, f32, padding);
                        Value pad = floatConstant(sb, loc, f32, padding);
                        for (int64_t kw = 0; kw < KW; ++kw) {
                          auto [colInside, col] = clampedIndex(
                              sb, loc, arith::AddIOp::create(sb, loc, left, idx(sb, kw)), W);
                          for (int64_t kh = 0; kh < KH; ++kh) {
                            Value v = inputAt(sb, loc, kernel, entry, part.value, px,
                                              ValueRange{image, local, rows[kh], col}, 1, failed);
                            Value inside = arith::AndIOp::create(sb, loc, rowInside[kh], colInside);
                            v = arith::SelectOp::create(sb, loc, inside, v, pad);
                            acc = reductionStep(sb, loc, pool.getKind(), acc, v);
                          }
                        }
                        memref::StoreOp::create(sb, loc, finish(sb, acc), output,
                                                ValueRange{resultAt(sb, ow)});
                        scf::YieldOp::create(sb, loc);
                      });
                };
                scalarColumns(0, interiorBegin);
                scalarColumns(vectors > 0 ? interiorEnd : interiorBegin, OW);
                scf::YieldOp::create(rb, loc);
              });
        };
        // Several parts: a branch per plane to the part holding its channel.
        std::function<void(OpBuilder &, size_t)> choose = [&](OpBuilder &cb, size_t i) {
          Value local = arith::SubIOp::create(cb, loc, channel, idx(cb, parts[i].firstChannel));
          if (i + 1 == parts.size())
            return sweep(cb, parts[i], local);
          Value here = arith::CmpIOp::create(cb, loc, arith::CmpIPredicate::ult, channel,
                                             idx(cb, parts[i + 1].firstChannel));
          auto branch = scf::IfOp::create(cb, loc, TypeRange{}, here, /*withElseRegion=*/true);
          OpBuilder tb = OpBuilder::atBlockBegin(&branch.getThenRegion().front());
          sweep(tb, parts[i], local);
          OpBuilder eb = OpBuilder::atBlockBegin(&branch.getElseRegion().front());
          choose(eb, i + 1);
        };
        choose(pb, 0);
        scf::YieldOp::create(pb, loc);
      });
  func::ReturnOp::create(b, loc);
  if (failed) {
    func.erase();
    return failure();
  }
  return func;
}
