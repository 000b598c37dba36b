//===- CpuDepthwise.cpp - depthwise convolution on the CPU ----------------===//
//
// A depthwise conv2d has one input channel per group: as a GEMM its rows
// are single filters, so the GEMM form would pack a panel for every few
// FMAs. Here each outer iteration is one output plane (image, channel).
// Its KH x KW weights are loaded once. Each output row is swept in
// vectors of 8 (or 4) outputs: every vector accumulates all taps in a
// register, one (strided: loaded wide and shuffled) input vector per tap.
// Rows of the window above or below the image are clamped and their
// weights zeroed, so the sweep has no branch. A vector whose window crosses
// the left or right edge loads the span of the row it reads and shuffles
// each tap's lanes out of it, zeros past the edge; a last vector
// overlapping the one before covers the row's tail. No output is scalar
// (but in rows under 4 wide). Planes at stride 1 that keep their size are
// swept flat instead, 16 outputs of the plane per vector across rows, each
// tap a load with its lanes outside the image zeroed. Strided planes with
// rows under 16 are first split into one small zero-padded plane per window
// row parity and column, then swept flat with plain loads; where two output
// rows fit a vector and an input row fits one, each tap is instead a
// two-source shuffle of two input rows. Taps accumulate per
// window row, so no FMA waits on more than KW others. The epilogue (bias,
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
#include <optional>

using namespace mlir;
using namespace kiln;

namespace {

/// ceil(a / b) for b > 0 and any a.
int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
/// floor(a / b) for b > 0 and any a.
int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// The sum of per-window-row accumulators, pairwise. One accumulator per
/// window row keeps each FMA chain KW long: a single one chained all KH x
/// KW taps, whose latency (4 cycles each) then bounded the loop at a
/// quarter of the FMA throughput or less.
Value sumOf(OpBuilder &b, Location loc, SmallVector<Value> parts) {
  while (parts.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2)
      next.push_back(arith::AddFOp::create(b, loc, parts[i], parts[i + 1]));
    if (parts.size() % 2)
      next.push_back(parts.back());
    parts = std::move(next);
  }
  return parts.front();
}
} // namespace

FailureOr<func::FuncOp> kiln::buildCpuDepthwiseFunction(KernelOp kernel, Operation *root,
                                                        OpBuilder &builder, StringRef name) {
  std::optional<Depthwise> d = describeDepthwise(root);
  if (!d || !d->element.isF32())
    return func::FuncOp();
  const ConvGeometry &g = d->g;
  const int64_t images = g.images, channels = g.channels, H = g.height, W = g.width;
  const int64_t outChannels = d->outChannels, OH = g.outHeight, OW = g.outWidth;
  const int64_t KH = g.kernelH, KW = g.kernelW;
  const int64_t perGroup = d->perGroup; // output channels per input channel
  const int64_t sh = g.strideH, sw = g.strideW, ph = g.padH, pw = g.padW;
  const int64_t dh = g.dilationH, dw = g.dilationW;
  const SmallVector<int64_t> y = {images, outChannels, OH, OW};
  // The columns whose whole window lies inside the image, for every tap:
  // ow * sw - pw >= 0 and ow * sw - pw + (KW - 1) * dw <= W - 1; strided, a
  // vector's wide load reaches sw - 1 further, which must stay in the row.
  const int64_t interiorBegin = std::clamp<int64_t>(ceilDiv(pw, sw), 0, OW);
  const int64_t interiorEnd = std::clamp<int64_t>(
      floorDiv(W - 1 - (sw - 1) + pw - (KW - 1) * dw, sw) + 1, interiorBegin, OW);
  // 8 lanes, or 4 for rows shorter than 8 (7x7 planes). The row is covered
  // by vectors at 0, L, 2L, ... and, when L does not divide it, one more
  // ending at the row's end, overlapping the one before (its outputs are
  // written twice, with the same values). Rows under 4 go scalar.
  const int64_t lanes = OW >= 16 ? 16 : OW >= 8 ? 8 : 4;
  const bool scalarRows = OW < 4;
  auto interior = [&](int64_t p) { return p >= interiorBegin && p + lanes <= interiorEnd; };
  SmallVector<int64_t> positions;
  for (int64_t p = 0; !scalarRows && p + lanes <= OW; p += lanes)
    positions.push_back(p);
  if (!scalarRows && OW % lanes)
    positions.push_back(OW - lanes);

  // Planes at stride 1 that keep their size ("same" padding, every
  // stride-1 layer of MobileNet): swept as one flat run of 16-lane vectors
  // (the last overlapping the one before) rather than row by row, where a
  // row's vectors are mostly edge vectors or idle lanes. Output q's tap
  // reads input q + (kh - ph) W + (kw - pw) where that row and column lie
  // inside. Near the plane's ends the lanes inside are known here (a
  // constant select, or a shuffle where the load would leave the plane); in
  // between a loop selects by each lane's column, carried from vector to
  // vector. (Against the row sweep at one thread: 28x28 45 vs 88 us, 56x56
  // 120 vs 157 us, 112x112 even.)
  const int64_t flatLanes = 16, planeSize = H * W, outPlane = OH * OW;
  const bool flat = sh == 1 && sw == 1 && dh == 1 && dw == 1 && OH == H && OW == W &&
                    planeSize >= flatLanes;
  // Strided planes with short rows (MobileNet's 14x14 and 7x7 stride-2
  // layers): every vector of a row sweep would cross an edge and take the
  // span-and-shuffle path. Instead each input plane is first split into
  // sh x KW small planes, one per window row parity and window column:
  // part (a, kw) row i, column j holds padded input (sh i + a, sw j + kw dw),
  // zero outside the image, rows OW apart. Tap (kh, kw) of output
  // q = oh OW + ow is then part (kh % sh, kw) at q + (kh / sh) OW: the
  // output plane is swept flat in 16-lane vectors with one plain load per
  // tap and no edge left. Building the parts costs a masked row load, and a
  // shuffle and a store per part row.
  const int64_t partRows = OH + (KH - 1) / sh;
  const int64_t rowLoad = W <= 16 ? 16 : W <= 32 ? 32 : 64;
  // (Rows of 28, MobileNet's 56 -> 28 layer, measured no faster split than
  // swept by rows.)
  // Strided planes whose two output rows fit one vector and whose input
  // rows fit one with a lane to spare (MobileNet's 14x14 -> 7x7): no parts.
  // A vector holds output rows oh and oh + 1; each input row is loaded
  // once (lanes past W zero), and each tap is one two-source shuffle of the
  // two input rows it reads, a column outside the row taking the zero lane
  // 15. The sums go to a plane-sized buffer (a vector's lanes past the two
  // rows land where the next pair overwrites them), swept flat by the
  // epilogue.
  const bool pairRows = !flat && (sh > 1 || sw > 1) && dh == 1 && dw == 1 && 2 * OW <= 16 &&
                        OH >= 2 && W < 16 && OH * OW >= 16;
  const bool splitPlanes = !flat && !pairRows && (sh > 1 || sw > 1) && dh == 1 && OW < 16 &&
                           outPlane >= flatLanes && W <= 64;
  // A part row is stored as one 16-lane vector, its tail overwritten by the
  // next row; each part is padded by one vector.
  const int64_t partSize = partRows * OW + flatLanes, parts = sh * KW;

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
  auto widen = [&](OpBuilder &wb, Value v) { return widenToF32(wb, loc, v); };
  Value in = entry->getArgument(g.inputArg);
  Value weights = entry->getArgument(d->filterArg);
  // One vector of sums on its way to a per-element epilogue (the flat sweep
  // or the row sweep's).
  const bool flatSweep = flat || splitPlanes || pairRows;
  Value block =
      memref::AllocaOp::create(b, loc, MemRefType::get({flatSweep ? flatLanes : lanes}, f32));
  Value partBuffer =
      splitPlanes
          ? memref::AllocaOp::create(b, loc, MemRefType::get({parts * partSize}, f32)).getResult()
      : pairRows ? memref::AllocaOp::create(b, loc, MemRefType::get({outPlane + flatLanes}, f32))
                       .getResult()
                 : Value();
  Value zero = floatConstant(b, loc, f32, 0.0);
  SmallVector<AffineExpr> dims;
  for (unsigned d = 0; d < 4; ++d)
    dims.push_back(getAffineDimExpr(d, ctx));
  AffineExpr resultIndex = linearizeExpr(y, dims, ctx);
  const bool vectorEpilogue = vectorizableGemmEpilogue(kernel, root, y, resultIndex);
  // The flat sweep sees the result as [images, channels, plane].
  const SmallVector<int64_t> flatBounds = {images, outChannels, outPlane};
  AffineExpr flatIndex = linearizeExpr(flatBounds, ArrayRef(dims).take_front(3), ctx);
  const bool flatVectorEpilogue =
      flatSweep && vectorizableGemmEpilogue(kernel, root, flatBounds, flatIndex);
  bool failed = false;

  VectorType fvec = VectorType::get({flatLanes}, f32);
  // A flat sweep's sums through the epilogue, at output plane position `p`.
  auto flatFinish = [&](OpBuilder &eb, Value image, Value outChannel, Value acc, Value p) {
    if (flatVectorEpilogue) {
      emitGemmEpilogueVector(eb, loc, kernel, root, entry, acc, ValueRange{image, outChannel, p},
                             flatBounds, flatIndex, failed);
      return;
    }
    vector::StoreOp::create(eb, loc, acc, block, ValueRange{idx(eb, 0)});
    scf::ForOp::create(eb, loc, idx(eb, 0), idx(eb, flatLanes), idx(eb, 1), ValueRange{},
        [&](OpBuilder &lb, Location, Value l, ValueRange) {
          emitGemmEpilogueAt(lb, loc, kernel, root, entry,
                             memref::LoadOp::create(lb, loc, block, ValueRange{l}),
                             ValueRange{image, outChannel, arith::AddIOp::create(lb, loc, l, p)},
                             flatBounds, flatIndex, failed);
          scf::YieldOp::create(lb, loc);
        });
  };

  // The mask of a masked load of one input row into `count` lanes.
  auto rowMaskOf = [&](OpBuilder &mb, int64_t count) -> Value {
    SmallVector<bool> inside;
    for (int64_t l = 0; l < count; ++l)
      inside.push_back(l < W);
    return arith::ConstantOp::create(
        mb, loc, DenseElementsAttr::get(VectorType::get({count}, mb.getI1Type()), ArrayRef<bool>(inside)));
  };

  // The strided plane through its parts (see `splitPlanes`).
  auto splitPlane = [&](OpBuilder &sb, Value image, Value outChannel, Value inBase,
                        ArrayRef<Value> taps) {
    VectorType rowType = VectorType::get({rowLoad}, f32);
    Value rowMask = rowMaskOf(sb, rowLoad);
    Value rowZeros = floatConstant(sb, loc, rowType, 0.0);
    Value zeros = floatConstant(sb, loc, fvec, 0.0);
    // Per column of the window, the row's lanes that land in a part row.
    SmallVector<SmallVector<int64_t>> columnsOf(KW);
    for (int64_t kw = 0; kw < KW; ++kw)
      for (int64_t j = 0; j < flatLanes; ++j) {
        int64_t iw = j * sw + kw * dw - pw;
        columnsOf[kw].push_back(j < OW && iw >= 0 && iw < W ? iw : rowLoad);
      }
    // Row parity a serves the taps kh = a, a + sh, ...: the rows they read.
    for (int64_t a = 0; a < std::min(sh, KH); ++a)
      for (int64_t i = 0; i < OH + (KH - 1 - a) / sh; ++i) {
        const int64_t ih = sh * i + a - ph;
        Value row;
        if (ih >= 0 && ih < H)
          row = vector::MaskedLoadOp::create(
              sb, loc, rowType, in,
              ValueRange{arith::AddIOp::create(sb, loc, inBase, idx(sb, ih * W))}, rowMask,
              rowZeros);
        for (int64_t kw = 0; kw < KW; ++kw) {
          Value partRow =
              row ? vector::ShuffleOp::create(sb, loc, row, rowZeros, columnsOf[kw]).getResult()
                  : zeros;
          vector::StoreOp::create(sb, loc, partRow, partBuffer,
                                  ValueRange{idx(sb, (a * KW + kw) * partSize + i * OW)});
        }
      }
    SmallVector<Value> splats;
    for (Value t : taps)
      splats.push_back(vector::BroadcastOp::create(sb, loc, fvec, t));
    auto vectorAt = [&](OpBuilder &vb, Value q) {
      SmallVector<Value> accs(KH, zeros);
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t from = ((kh % sh) * KW + kw) * partSize + (kh / sh) * OW;
          Value v = vector::LoadOp::create(vb, loc, fvec, partBuffer,
                                           ValueRange{arith::AddIOp::create(vb, loc, q, idx(vb, from))});
          accs[kh] = vector::FMAOp::create(vb, loc, splats[kh * KW + kw], v, accs[kh]);
        }
      flatFinish(vb, image, outChannel, sumOf(vb, loc, accs), q);
    };
    const int64_t whole = outPlane / flatLanes;
    scf::ForOp::create(sb, loc, idx(sb, 0), idx(sb, whole * flatLanes), idx(sb, flatLanes),
                       ValueRange{}, [&](OpBuilder &vb, Location, Value q, ValueRange) {
                         vectorAt(vb, q);
                         scf::YieldOp::create(vb, loc);
                       });
    if (outPlane % flatLanes)
      vectorAt(sb, idx(sb, outPlane - flatLanes)); // overlapping the one before
  };

  // The strided plane two output rows per vector (see `pairRows`).
  auto pairPlane = [&](OpBuilder &sb, Value image, Value outChannel, Value inBase,
                       ArrayRef<Value> taps) {
    Value rowMask = rowMaskOf(sb, flatLanes);
    Value zeros = floatConstant(sb, loc, fvec, 0.0);
    SmallVector<Value> rows(H); // loaded at first use; all in this block
    auto rowAt = [&](int64_t ih) -> Value {
      if (ih < 0 || ih >= H)
        return Value();
      if (!rows[ih])
        rows[ih] = vector::MaskedLoadOp::create(
            sb, loc, fvec, in, ValueRange{arith::AddIOp::create(sb, loc, inBase, idx(sb, ih * W))},
            rowMask, zeros);
      return rows[ih];
    };
    SmallVector<Value> splats;
    for (Value t : taps)
      splats.push_back(vector::BroadcastOp::create(sb, loc, fvec, t));
    SmallVector<int64_t> starts;
    for (int64_t oh = 0; oh + 2 <= OH; oh += 2)
      starts.push_back(oh);
    if (OH % 2)
      starts.push_back(OH - 2); // overlapping the pair before: the same values again
    for (int64_t oh0 : starts) {
      SmallVector<Value> accs(KH, zeros);
      for (int64_t kh = 0; kh < KH; ++kh) {
        Value upper = rowAt(oh0 * sh + kh - ph), lower = rowAt((oh0 + 1) * sh + kh - ph);
        if (!upper && !lower)
          continue; // both rows in the padding
        for (int64_t kw = 0; kw < KW; ++kw) {
          SmallVector<int64_t> from;
          for (int64_t l = 0; l < flatLanes; ++l) {
            int64_t half = l / OW, c = (l % OW) * sw + kw - pw;
            int64_t lane = c >= 0 && c < W ? c : flatLanes - 1; // lane 15 is zero
            from.push_back(half == 1 ? flatLanes + lane : lane);
          }
          Value v = vector::ShuffleOp::create(sb, loc, upper ? upper : zeros,
                                              lower ? lower : zeros, from);
          accs[kh] = vector::FMAOp::create(sb, loc, splats[kh * KW + kw], v, accs[kh]);
        }
      }
      vector::StoreOp::create(sb, loc, sumOf(sb, loc, accs), partBuffer,
                              ValueRange{idx(sb, oh0 * OW)});
    }
    SmallVector<int64_t> sweep;
    for (int64_t q = 0; q + flatLanes <= outPlane; q += flatLanes)
      sweep.push_back(q);
    if (outPlane % flatLanes)
      sweep.push_back(outPlane - flatLanes); // overlapping the one before
    for (int64_t q : sweep)
      flatFinish(sb, image, outChannel,
                 vector::LoadOp::create(sb, loc, fvec, partBuffer, ValueRange{idx(sb, q)}),
                 idx(sb, q));
  };

  auto flatPlane = [&](OpBuilder &fb, Value image, Value outChannel, Value inBase,
                       ArrayRef<Value> taps) {
    VectorType fmask = VectorType::get({flatLanes}, fb.getI1Type());
    SmallVector<Value> splats;
    for (Value t : taps)
      splats.push_back(vector::BroadcastOp::create(fb, loc, fvec, t));
    Value zeros = floatConstant(fb, loc, fvec, 0.0);
    auto finish = [&](OpBuilder &eb, Value acc, Value p) {
      flatFinish(eb, image, outChannel, acc, p);
    };
    // A vector at a known position: each tap's lanes inside the image known
    // here, a constant select (or a shuffle where the load would leave the
    // plane).
    auto fixedVector = [&](OpBuilder &vb, int64_t p) {
      SmallVector<Value> accs(KH, zeros);
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t offset = (kh - ph) * W + (kw - pw);
          SmallVector<bool> valid;
          for (int64_t l = 0; l < flatLanes; ++l) {
            int64_t ih = (p + l) / W + kh - ph, iw = (p + l) % W + kw - pw;
            valid.push_back(ih >= 0 && ih < H && iw >= 0 && iw < W);
          }
          if (!llvm::is_contained(valid, true))
            continue; // this tap reads only padding here
          const int64_t base = p + offset;
          Value v;
          if (base >= 0 && base + flatLanes <= planeSize) {
            v = vector::LoadOp::create(
                vb, loc, fvec, in, ValueRange{arith::AddIOp::create(vb, loc, inBase, idx(vb, base))});
            if (llvm::is_contained(valid, false))
              v = arith::SelectOp::create(
                  vb, loc,
                  arith::ConstantOp::create(vb, loc, DenseElementsAttr::get(fmask, ArrayRef<bool>(valid))),
                  v, zeros);
          } else {
            // Load the plane's nearest 16 and move each lane into place.
            const int64_t from = std::clamp<int64_t>(base, 0, planeSize - flatLanes);
            Value raw = vector::LoadOp::create(
                vb, loc, fvec, in, ValueRange{arith::AddIOp::create(vb, loc, inBase, idx(vb, from))});
            SmallVector<int64_t> lanesFrom;
            for (int64_t l = 0; l < flatLanes; ++l)
              lanesFrom.push_back(valid[l] ? base + l - from : flatLanes);
            v = vector::ShuffleOp::create(vb, loc, raw, zeros, lanesFrom);
          }
          accs[kh] = vector::FMAOp::create(vb, loc, splats[kh * KW + kw], v, accs[kh]);
        }
      finish(vb, sumOf(vb, loc, accs), idx(vb, p));
    };
    // Positions whose every tap's load stays inside the plane: there a
    // lane's input row is inside the image exactly when its column is, so
    // only the columns are checked, on a vector of each lane's column.
    const int64_t lowest = -ph * W - pw, highest = (KH - 1 - ph) * W + (KW - 1 - pw);
    auto inside = [&](int64_t p) {
      return p + lowest >= 0 && p + flatLanes - 1 + highest < planeSize;
    };
    SmallVector<int64_t> starts;
    for (int64_t p = 0; p + flatLanes <= planeSize; p += flatLanes)
      starts.push_back(p);
    size_t first = 0;
    while (first < starts.size() && !inside(starts[first]))
      ++first;
    size_t last = first;
    while (last < starts.size() && inside(starts[last]))
      ++last;
    for (size_t k = 0; k < first; ++k)
      fixedVector(fb, starts[k]);
    if (last > first) {
      VectorType ivec = VectorType::get({flatLanes}, fb.getI32Type());
      auto splat = [&](OpBuilder &cb, int64_t v) -> Value {
        return arith::ConstantOp::create(cb, loc, DenseElementsAttr::get(ivec, int32_t(v)));
      };
      // Each lane's column, carried from vector to vector: the first
      // vector's is known here; each next one adds 16 mod W and wraps once.
      SmallVector<int32_t> firstColumns;
      for (int64_t l = 0; l < flatLanes; ++l)
        firstColumns.push_back(int32_t((starts[first] + l) % W));
      Value firstCol = arith::ConstantOp::create(
          fb, loc, DenseElementsAttr::get(ivec, ArrayRef<int32_t>(firstColumns)));
      scf::ForOp::create(fb, loc, idx(fb, starts[first]), idx(fb, starts[last - 1] + flatLanes),
                         idx(fb, flatLanes), ValueRange{firstCol},
          [&](OpBuilder &vb, Location, Value p, ValueRange carried) {
            Value col = carried[0];
            Value stepped = arith::AddIOp::create(vb, loc, col, splat(vb, flatLanes % W));
            Value wrapped = arith::SelectOp::create(
                vb, loc,
                arith::CmpIOp::create(vb, loc, arith::CmpIPredicate::uge, stepped, splat(vb, W)),
                arith::SubIOp::create(vb, loc, stepped, splat(vb, W)), stepped);
            // Per column offset of the window: the lanes whose column stays in the row.
            SmallVector<Value> columnOk(KW);
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t shift = kw - pw;
              if (shift == 0)
                continue;
              Value shifted = arith::AddIOp::create(
                  vb, loc, col, splat(vb, shift));
              columnOk[kw] = arith::CmpIOp::create(vb, loc, arith::CmpIPredicate::ult, shifted,
                                                   splat(vb, W));
            }
            SmallVector<Value> accs(KH, zeros);
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                Value at = arith::AddIOp::create(
                    vb, loc, inBase,
                    arith::AddIOp::create(vb, loc, p, idx(vb, (kh - ph) * W + (kw - pw))));
                Value v = vector::LoadOp::create(vb, loc, fvec, in, ValueRange{at});
                if (columnOk[kw])
                  v = arith::SelectOp::create(vb, loc, columnOk[kw], v, zeros);
                accs[kh] = vector::FMAOp::create(vb, loc, splats[kh * KW + kw], v, accs[kh]);
              }
            finish(vb, sumOf(vb, loc, accs), p);
            scf::YieldOp::create(vb, loc, wrapped);
          });
    }
    for (size_t k = last; k < starts.size(); ++k)
      fixedVector(fb, starts[k]);
    if (planeSize % flatLanes)
      fixedVector(fb, planeSize - flatLanes); // overlapping the one before
  };

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
        if (flat || splitPlanes || pairRows) {
          if (flat)
            flatPlane(pb, image, outChannel, inBase, taps);
          else if (pairRows)
            pairPlane(pb, image, outChannel, inBase, taps);
          else
            splitPlane(pb, image, outChannel, inBase, taps);
          scf::YieldOp::create(pb, loc);
          return;
        }
        scf::ForOp::create(pb, loc, idx(pb, 0), idx(pb, OH), idx(pb, 1), ValueRange{},
            [&](OpBuilder &rb, Location, Value oh, ValueRange) {
              // Per window row: its input row's offset (clamped into the
              // image) and the taps' weights, zero for a row outside.
              SmallVector<Value> rowOffset, rowTaps;
              Value top = arith::SubIOp::create(
                  rb, loc, arith::MulIOp::create(rb, loc, oh, idx(rb, sh)), idx(rb, ph));
              for (int64_t kh = 0; kh < KH; ++kh) {
                auto [inside, clamped] =
                    clampedIndex(rb, loc, arith::AddIOp::create(rb, loc, top, idx(rb, kh * dh)), H);
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
              // `fixed`: a vector at a known column that may reach past the
              // row's edges. Per window row it loads the span of the row its
              // taps read, and each tap shuffles its lanes out of it, zero
              // where a lane's column lies outside the row.
              auto vectorAt = [&](OpBuilder &vb, Value ow, ArrayRef<Value> splats,
                                  std::optional<int64_t> fixed = std::nullopt) {
                Value left = arith::SubIOp::create(
                    vb, loc, arith::MulIOp::create(vb, loc, ow, idx(vb, sw)), idx(vb, pw));
                SmallVector<Value> accs(KH, floatConstant(vb, loc, vec, 0.0));
                bool edge = fixed && !interior(*fixed);
                int64_t base = W, top = -1;
                if (edge)
                  for (int64_t l = 0; l < lanes; ++l)
                    for (int64_t kw = 0; kw < KW; ++kw) {
                      int64_t iw = (*fixed + l) * sw - pw + kw * dw;
                      if (iw >= 0 && iw < W) {
                        base = std::min(base, iw);
                        top = std::max(top, iw);
                      }
                    }
                for (int64_t kh = 0; kh < KH; ++kh) {
                  Value span, none;
                  if (edge && top >= base && W < lanes * sw) {
                    VectorType spanType = VectorType::get({top - base + 1}, f32);
                    span = vector::LoadOp::create(
                        vb, loc, spanType, in,
                        ValueRange{arith::AddIOp::create(vb, loc, rowOffset[kh], idx(vb, base))});
                    none = floatConstant(vb, loc, spanType, 0.0);
                  }
                  for (int64_t kw = 0; kw < KW; ++kw) {
                    Value v;
                    if (edge && W >= lanes * sw) {
                      // The tap's own wide load, moved inside the row; each
                      // lane picks its column from it, zero outside the row.
                      // (One span per window row had odd widths, such as
                      // 33 lanes, that LLVM shuffles slowly.)
                      const int64_t first = *fixed * sw - pw + kw * dw;
                      const int64_t start = std::clamp<int64_t>(first, 0, W - lanes * sw);
                      SmallVector<int64_t> lanesFrom;
                      bool any = false;
                      for (int64_t l = 0; l < lanes; ++l) {
                        int64_t iw = first + l * sw;
                        bool inside = iw >= 0 && iw < W;
                        any |= inside;
                        lanesFrom.push_back(inside ? iw - start : lanes * sw);
                      }
                      if (!any)
                        continue;
                      Value all = vector::LoadOp::create(
                          vb, loc, wide, in,
                          ValueRange{arith::AddIOp::create(vb, loc, rowOffset[kh], idx(vb, start))});
                      v = vector::ShuffleOp::create(vb, loc, all,
                                                    floatConstant(vb, loc, wide, 0.0), lanesFrom);
                    } else if (edge) {
                      if (!span)
                        continue; // every column outside the row
                      SmallVector<int64_t> lanesFrom;
                      for (int64_t l = 0; l < lanes; ++l) {
                        int64_t iw = (*fixed + l) * sw - pw + kw * dw;
                        lanesFrom.push_back(iw >= 0 && iw < W ? iw - base : top - base + 1);
                      }
                      v = vector::ShuffleOp::create(vb, loc, span, none, lanesFrom);
                    } else {
                      Value at = arith::AddIOp::create(
                          vb, loc, rowOffset[kh],
                          arith::AddIOp::create(vb, loc, left, idx(vb, kw * dw)));
                      if (sw == 1) {
                        v = vector::LoadOp::create(vb, loc, vec, in, ValueRange{at});
                      } else {
                        Value all = vector::LoadOp::create(vb, loc, wide, in, ValueRange{at});
                        v = vector::ShuffleOp::create(vb, loc, all, all, pick);
                      }
                    }
                    accs[kh] = vector::FMAOp::create(vb, loc, splats[kh * KW + kw], v, accs[kh]);
                  }
                }
                Value acc = sumOf(vb, loc, accs);
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
              if (!positions.empty()) {
                SmallVector<Value> splats;
                for (Value t : rowTaps)
                  splats.push_back(vector::BroadcastOp::create(rb, loc, vec, t));
                // The regular interior positions in a loop, the rest (edges
                // and the overlapping last one) one by one.
                size_t first = 0;
                while (first < positions.size() && !interior(positions[first]))
                  ++first;
                size_t last = first;
                while (last < positions.size() && interior(positions[last]) &&
                       positions[last] == positions[first] + int64_t(last - first) * lanes)
                  ++last;
                for (size_t k = 0; k < first; ++k)
                  vectorAt(rb, idx(rb, positions[k]), splats, positions[k]);
                if (last > first)
                  scf::ForOp::create(rb, loc, idx(rb, positions[first]),
                                     idx(rb, positions[last - 1] + lanes), idx(rb, lanes),
                                     ValueRange{},
                      [&](OpBuilder &vb, Location, Value ow, ValueRange) {
                        vectorAt(vb, ow, splats);
                        scf::YieldOp::create(vb, loc);
                      });
                for (size_t k = last; k < positions.size(); ++k)
                  vectorAt(rb, idx(rb, positions[k]), splats, positions[k]);
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
                        auto [inside, col] = clampedIndex(
                            sb, loc, arith::AddIOp::create(sb, loc, left, idx(sb, kw * dw)), W);
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
              if (scalarRows)
                scalarColumns(0, OW);
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
