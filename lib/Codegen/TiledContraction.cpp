//===- TiledContraction.cpp - shared-memory tiled matmul and convolution --===//
//
// A GPU kernel for a contraction and its epilogue, as a GEMM
// C[b, i, j] = sum_k A[b, i, k] B[b, k, j]:
// - matmul: A and B are the operands, read through their views; b runs over
//   the (broadcast) batch dimensions;
// - conv2d as an implicit GEMM: b is the group, A the filter [Cout/g, K],
//   B the input gathered on the fly (im2col without the copy):
//   k = (ci, kh, kw), j = (n, ho, wo), zero outside the image.
// Each workgroup computes a tileM x tileN block of C. Per tileK slice of k
// its work items stage both tiles in workgroup memory (coalesced loads,
// zero past the edges), then each accumulates threadM x threadN results in
// registers, in groups of 4 rows and 4 columns read from the tiles as
// 16-byte vectors; the groups are spread (ty + g * tileM / threadM) so
// neighbouring work items read neighbouring vectors. The global reads of
// the next slice are issued before the current one's FMAs (register
// prefetch); bounds checks exist only where a tile overhangs a dimension.
// With two stages the tiles are double-buffered: slice k + 1 is stored into
// one buffer while slice k's FMAs read the other, one barrier per slice.
// The epilogue is evaluated per result in registers before the one store.
// With k split (splitK groups of work items per workgroup, each with its own
// tiles, taking every splitK-th slice), the groups' sums meet in workgroup
// memory and the first group adds them in a fixed order: a small problem
// fills the GPU without a second kernel or float atomics, and the result is
// the same from run to run. Sizes come from MatmulConfig.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "kiln/Codegen/KernelToLinalg.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kiln;

namespace {
Value apply(OpBuilder &b, Location loc, AffineExpr e, ValueRange dims) {
  return applyExpr(b, loc, e, dims);
}

void buildTiledGemm(OpBuilder &b, KernelOp kernel, Operation *root, Block *entry,
                    const Gemm &gemm, const MatmulConfig &config, bool &failed) {
  Location loc = kernel.getLoc();
  MLIRContext *ctx = b.getContext();
  Type f32 = Float32Type::get(ctx);
  const int64_t TM = config.tileM, TN = config.tileN, TK = config.tileK;
  const int64_t RM = config.threadM, RN = config.threadN, S = config.splitK;
  const int64_t threadsN = TN / RN, threadsM = TM / RM, threads = threadsM * threadsN;
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };

  auto launch = gpu::LaunchOp::create(
      b, loc, idx(b, (gemm.n + TN - 1) / TN), idx(b, (gemm.m + TM - 1) / TM), idx(b, gemm.batch),
      idx(b, threads * S), idx(b, 1), idx(b, 1));
  OpBuilder lb = OpBuilder::atBlockBegin(&launch.getBody().front());
  // With k split, work item `tid` of k group `group`: the groups are
  // consecutive runs of `threads` work items, each with its own tiles.
  Value tid = launch.getThreadIds().x, group;
  if (S > 1) {
    group = arith::DivUIOp::create(lb, loc, tid, idx(lb, threads));
    tid = arith::RemUIOp::create(lb, loc, tid, idx(lb, threads));
  }
  Value batch = launch.getBlockIds().z;
  Value rowBase = arith::MulIOp::create(lb, loc, launch.getBlockIds().y, idx(lb, TM));
  Value colBase = arith::MulIOp::create(lb, loc, launch.getBlockIds().x, idx(lb, TN));
  Value tx = arith::RemUIOp::create(lb, loc, tid, idx(lb, threadsN));
  Value ty = arith::DivUIOp::create(lb, loc, tid, idx(lb, threadsN));
  auto space = lb.getI64IntegerAttr(3);
  // k-major tiles of 4-wide vectors: As[kk][i / 4], Bs[kk][j / 4]. A work
  // item reads its 4-row and 4-column groups with one 16-byte load each.
  VectorType v4 = VectorType::get({4}, f32);
  // Per group, `stages` buffers of each tile: [group][stage][...].
  const int64_t P = config.stages, sizeA = TK * TM / 4, sizeB = TK * TN / 4;
  Value tileA = memref::AllocOp::create(lb, loc, MemRefType::get({S * P * sizeA}, v4, AffineMap(), space));
  Value tileB = memref::AllocOp::create(lb, loc, MemRefType::get({S * P * sizeB}, v4, AffineMap(), space));
  // Where this group's tiles start (none: at 0).
  Value groupA, groupB;
  if (S > 1) {
    groupA = arith::MulIOp::create(lb, loc, group, idx(lb, P * sizeA));
    groupB = arith::MulIOp::create(lb, loc, group, idx(lb, P * sizeB));
  }
  auto inGroup = [&](OpBuilder &gb, Value base, Value at) -> Value {
    return base ? arith::AddIOp::create(gb, loc, base, at).getResult() : at;
  };
  // The tiles of the buffer slice `kt` is staged in (every other buffer
  // with two stages).
  auto stageBases = [&](OpBuilder &gb, Value kt) -> std::pair<Value, Value> {
    if (P == 1)
      return {groupA, groupB};
    Value stage = arith::RemUIOp::create(gb, loc, kt, idx(gb, 2));
    return {inGroup(gb, groupA, arith::MulIOp::create(gb, loc, stage, idx(gb, sizeA))),
            inGroup(gb, groupB, arith::MulIOp::create(gb, loc, stage, idx(gb, sizeB)))};
  };

  bool ragged[3] = {gemm.m % TM != 0, gemm.n % TN != 0, gemm.k % TK != 0};
  // Work item tid's vectors of each staged tile, as (kk, i / 4) and
  // (kk, j / 4). For A, neighbouring work items take neighbouring kk: each
  // of the 4 row reads is coalesced along A's rows (k is innermost).
  // With A read as 4-vectors along k, its tile is i-major instead, As[i][kk
  // / 4], and the slots are (i, kk / 4).
  bool aVec = gemm.aVectorArg.has_value();
  SmallVector<std::pair<Value, Value>> aSlots, bSlots;
  for (int64_t e = 0; e < TM * TK / 4 / threads; ++e) {
    Value flat = arith::AddIOp::create(lb, loc, tid, idx(lb, e * threads));
    if (aVec)
      aSlots.push_back({arith::DivUIOp::create(lb, loc, flat, idx(lb, TK / 4)),
                        arith::RemUIOp::create(lb, loc, flat, idx(lb, TK / 4))});
    else
      aSlots.push_back({arith::RemUIOp::create(lb, loc, flat, idx(lb, TK)),
                        arith::DivUIOp::create(lb, loc, flat, idx(lb, TK))});
  }
  for (int64_t e = 0; e < TK * TN / 4 / threads; ++e) {
    Value flat = arith::AddIOp::create(lb, loc, tid, idx(lb, e * threads));
    bSlots.push_back({arith::DivUIOp::create(lb, loc, flat, idx(lb, TN / 4)),
                      arith::RemUIOp::create(lb, loc, flat, idx(lb, TN / 4))});
  }
  // A read at (row, col), clamped into [0, rowBound) x [0, colBound) and
  // zero outside (an unset bound: the tile divides that dimension, no
  // check). `read` gives an f32 or a 4-vector of f32.
  auto guardedRead = [&](OpBuilder &fb, Value row, Value col, std::optional<int64_t> rowBound,
                         std::optional<int64_t> colBound,
                         function_ref<Value(Value, Value)> read) -> Value {
    Value inside;
    auto clampAndCheck = [&](Value v, int64_t bound) {
      Value ok = arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::ult, v, idx(fb, bound));
      inside = inside ? arith::AndIOp::create(fb, loc, inside, ok).getResult() : ok;
      return arith::MinUIOp::create(fb, loc, v, idx(fb, bound - 1)).getResult();
    };
    if (rowBound)
      row = clampAndCheck(row, *rowBound);
    if (colBound)
      col = clampAndCheck(col, *colBound);
    Value v = read(row, col);
    if (!inside)
      return v;
    if (v.getType() == f32)
      return arith::SelectOp::create(fb, loc, inside, v, floatConstant(fb, loc, f32, 0.0));
    // (A lane-wise condition: SPIR-V selects vectors by vectors.)
    return arith::SelectOp::create(
        fb, loc, vector::BroadcastOp::create(fb, loc, VectorType::get({4}, fb.getI1Type()), inside),
        v, arith::ConstantOp::create(fb, loc, DenseElementsAttr::get(v4, fb.getF32FloatAttr(0))));
  };
  // A work item's register n (of a row or column block) is tile row or
  // column 4 (id + (n / 4) spread) + n % 4: groups of 4, spread so that
  // neighbouring work items hold neighbouring groups.
  auto inTile = [&](OpBuilder &tb, Value id, int64_t spread, int64_t n) -> Value {
    return arith::AddIOp::create(
        tb, loc,
        arith::MulIOp::create(tb, loc, arith::AddIOp::create(tb, loc, id, idx(tb, (n / 4) * spread)),
                              idx(tb, 4)),
        idx(tb, n % 4));
  };
  auto bound = [](bool checked, int64_t size) {
    return checked ? std::optional<int64_t>(size) : std::nullopt;
  };
  // One 16-byte read of operand `arg` at (b, row, col4).
  auto vectorRead = [&](OpBuilder &fb, unsigned arg, AffineExpr index, Value row, Value col4,
                        std::optional<int64_t> rowBound, std::optional<int64_t> colBound) {
    return guardedRead(fb, row, col4, rowBound, colBound, [&](Value r, Value c) -> Value {
      return memref::LoadOp::create(fb, loc, entry->getArgument(arg),
                                    ValueRange{apply(fb, loc, index, ValueRange{batch, r, c})});
    });
  };
  // A 4-vector of scalar reads, lane q at index base + 4 group + q of the
  // varying coordinate (through `read`).
  auto fromLanes = [&](OpBuilder &fb, Value base, Value group,
                       function_ref<Value(Value)> read) -> Value {
    SmallVector<Value> lanes;
    for (int64_t q = 0; q < 4; ++q)
      lanes.push_back(read(arith::AddIOp::create(
          fb, loc, base,
          arith::AddIOp::create(fb, loc, arith::MulIOp::create(fb, loc, group, idx(fb, 4)),
                                idx(fb, q)))));
    return vector::FromElementsOp::create(fb, loc, v4, lanes);
  };
  // One scalar of A or B through its reader, widened to f32.
  auto scalarRead = [&](OpBuilder &fb, const OperandReader &reader, Value row, Value col,
                        std::optional<int64_t> rowBound, std::optional<int64_t> colBound) {
    return guardedRead(fb, row, col, rowBound, colBound, [&](Value r, Value c) -> Value {
      Value v = reader(fb, loc, batch, r, c);
      return v.getType() == f32 ? v : arith::ExtFOp::create(fb, loc, f32, v).getResult();
    });
  };

  // A convolution's B columns are the same in every k slice: each slot's
  // output position (top-left input row and column of its window) is
  // decomposed once here. Per slice only k's (channel, window row, window
  // column) remain, once per 4 lanes. Where rows are a whole number of
  // 4-column groups, a slot's lanes share a row and only its first lane
  // is kept (registers live across the k loop cost occupancy).
  struct ConvLane {
    Value top, left;
  };
  SmallVector<SmallVector<ConvLane, 4>> convLanes;
  // Per source, the plane row of (image, group)'s channel 0 of k's
  // numbering: source channel c's rows start at this plus c * H.
  SmallVector<Value> convChannels;
  const ConvGeometry *cg = gemm.conv ? &*gemm.conv : nullptr;
  if (cg) {
    Value image = arith::DivUIOp::create(lb, loc, batch, idx(lb, cg->groups));
    Value grp = arith::RemUIOp::create(lb, loc, batch, idx(lb, cg->groups));
    for (const ConvSource &s : cg->sources)
      convChannels.push_back(arith::MulIOp::create(
          lb, loc,
          arith::AddIOp::create(
              lb, loc, arith::MulIOp::create(lb, loc, image, idx(lb, s.channels)),
              arith::SubIOp::create(lb, loc,
                                    arith::MulIOp::create(lb, loc, grp, idx(lb, cg->groupChannels)),
                                    idx(lb, s.firstChannel))),
          idx(lb, cg->height)));
    const bool sharedRow = cg->outWidth % 4 == 0;
    for (auto [kk, j4] : bSlots) {
      (void)kk;
      SmallVector<ConvLane, 4> lanes;
      for (int64_t q = 0; q < (sharedRow ? 1 : 4); ++q) {
        Value j = arith::AddIOp::create(
            lb, loc, colBase,
            arith::AddIOp::create(lb, loc, arith::MulIOp::create(lb, loc, j4, idx(lb, 4)),
                                  idx(lb, q)));
        // Past N (a tile overhanging it): a real column's input, for
        // results that are never stored.
        ConvLane lane;
        if (ragged[1])
          j = arith::MinUIOp::create(lb, loc, j, idx(lb, gemm.n - (sharedRow ? 4 : 1)));
        Value ho = arith::DivUIOp::create(lb, loc, j, idx(lb, cg->outWidth));
        Value wo = arith::RemUIOp::create(lb, loc, j, idx(lb, cg->outWidth));
        lane.top = arith::SubIOp::create(lb, loc, arith::MulIOp::create(lb, loc, ho, idx(lb, cg->strideH)),
                                         idx(lb, cg->padH));
        lane.left = arith::SubIOp::create(lb, loc, arith::MulIOp::create(lb, loc, wo, idx(lb, cg->strideW)),
                                          idx(lb, cg->padW));
        lanes.push_back(lane);
      }
      convLanes.push_back(lanes);
    }
  }
  // One slot's 4 lanes of a convolution's B at k.
  auto convRead = [&](OpBuilder &fb, Value k, ArrayRef<ConvLane> slot) -> Value {
    SmallVector<ConvLane, 4> lanes(slot);
    for (int64_t q = 1; lanes.size() < 4; ++q)
      lanes.push_back({slot[0].top, arith::AddIOp::create(fb, loc, slot[0].left,
                                                           idx(fb, q * cg->strideW))});
    // Past K, zeros: A's zeros there would turn an inf of B into NaN.
    Value kValid;
    if (ragged[2]) {
      kValid = arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::ult, k, idx(fb, gemm.k));
      k = arith::MinUIOp::create(fb, loc, k, idx(fb, gemm.k - 1));
    }
    const int64_t taps = cg->kernelH * cg->kernelW;
    Value channel = arith::DivUIOp::create(fb, loc, k, idx(fb, taps));
    Value tap = arith::RemUIOp::create(fb, loc, k, idx(fb, taps));
    Value dh = arith::MulIOp::create(
        fb, loc, arith::DivUIOp::create(fb, loc, tap, idx(fb, cg->kernelW)), idx(fb, cg->dilationH));
    Value dw = arith::MulIOp::create(
        fb, loc, arith::RemUIOp::create(fb, loc, tap, idx(fb, cg->kernelW)), idx(fb, cg->dilationW));
    Value channelRow = arith::MulIOp::create(fb, loc, channel, idx(fb, cg->height));
    auto readSource = [&](OpBuilder &fb, size_t source) -> Value {
      Value planeRow = arith::AddIOp::create(fb, loc, convChannels[source], channelRow);
      Value input = entry->getArgument(cg->sources[source].arg);
      SmallVector<Value> values;
      for (const ConvLane &lane : lanes) {
        Value h = arith::AddIOp::create(fb, loc, lane.top, dh);
        Value w = arith::AddIOp::create(fb, loc, lane.left, dw);
        Value inside = insidePlane(fb, loc, h, w, *cg);
        if (kValid)
          inside = arith::AndIOp::create(fb, loc, inside, kValid);
        Value at = arith::AddIOp::create(
            fb, loc, arith::MulIOp::create(fb, loc, arith::AddIOp::create(fb, loc, planeRow, h),
                                           idx(fb, cg->width)),
            w);
        at = arith::SelectOp::create(fb, loc, inside, at, idx(fb, 0)); // never read outside
        Value v = memref::LoadOp::create(fb, loc, input, ValueRange{at});
        if (v.getType() != f32)
          v = arith::ExtFOp::create(fb, loc, f32, v);
        values.push_back(arith::SelectOp::create(fb, loc, inside, v, floatConstant(fb, loc, f32, 0.0)));
      }
      return vector::FromElementsOp::create(fb, loc, v4, values).getResult();
    };
    // A folded concat: the source holding k's channel, by a chain of
    // branches (uniform but at the sources' boundaries).
    std::function<Value(OpBuilder &, size_t)> chain = [&](OpBuilder &sb, size_t source) -> Value {
      if (source + 1 == cg->sources.size())
        return readSource(sb, source);
      Value here = arith::CmpIOp::create(sb, loc, arith::CmpIPredicate::ult, channel,
                                         idx(sb, cg->sources[source + 1].firstChannel));
      auto choice = scf::IfOp::create(sb, loc, TypeRange{v4}, here, /*withElseRegion=*/true);
      OpBuilder tb = OpBuilder::atBlockBegin(&choice.getThenRegion().front());
      scf::YieldOp::create(tb, loc, readSource(tb, source));
      OpBuilder eb = OpBuilder::atBlockBegin(&choice.getElseRegion().front());
      scf::YieldOp::create(eb, loc, chain(eb, source + 1));
      return choice.getResult(0);
    };
    return chain(fb, 0);
  };

  // The global reads of k slice `kt`, as the vectors to stage (A's then
  // B's), kept in registers: issued a slice ahead, their latency hides
  // behind the FMAs.
  auto fetch = [&](OpBuilder &fb, Value kt) {
    Value kBase = arith::MulIOp::create(fb, loc, kt, idx(fb, TK));
    Value kBase4 = arith::DivUIOp::create(fb, loc, kBase, idx(fb, 4));
    SmallVector<Value> values;
    for (auto [first, second] : aSlots) {
      if (aVec) { // slot (i, kk / 4)
        values.push_back(vectorRead(fb, *gemm.aVectorArg, gemm.aVectorIndex,
                                    arith::AddIOp::create(fb, loc, rowBase, first),
                                    arith::AddIOp::create(fb, loc, kBase4, second),
                                    bound(ragged[0], gemm.m), bound(ragged[2], gemm.k / 4)));
        continue;
      }
      Value k = arith::AddIOp::create(fb, loc, kBase, first); // slot (kk, i / 4)
      values.push_back(fromLanes(fb, rowBase, second, [&](Value i) {
        return scalarRead(fb, gemm.readA, i, k, bound(ragged[0], gemm.m), bound(ragged[2], gemm.k));
      }));
    }
    Value colBase4 = arith::DivUIOp::create(fb, loc, colBase, idx(fb, 4));
    for (auto [slot, kj] : llvm::enumerate(bSlots)) {
      auto [kk, j4] = kj;
      Value k = arith::AddIOp::create(fb, loc, kBase, kk);
      if (cg) {
        values.push_back(convRead(fb, k, convLanes[slot]));
        continue;
      }
      if (gemm.bVectorArg) {
        values.push_back(vectorRead(fb, *gemm.bVectorArg, gemm.bVectorIndex, k,
                                    arith::AddIOp::create(fb, loc, colBase4, j4),
                                    bound(ragged[2], gemm.k), bound(ragged[1], gemm.n / 4)));
        continue;
      }
      values.push_back(fromLanes(fb, colBase, j4, [&](Value j) {
        return scalarRead(fb, gemm.readB, k, j, bound(ragged[2], gemm.k), bound(ragged[1], gemm.n));
      }));
    }
    return values;
  };

  int64_t kTiles = (gemm.k + TK - 1) / TK;
  // Group g takes k slices g, g + S, g + 2S, ...: every group runs the same
  // number of iterations (the barriers are the whole workgroup's); a slice
  // past the end, when S does not divide the slices, stages zeros.
  int64_t iterations = (kTiles + S - 1) / S;
  auto fetchSlice = [&](OpBuilder &fb, Value it) {
    if (S == 1)
      return fetch(fb, it);
    Value kt = arith::AddIOp::create(fb, loc, arith::MulIOp::create(fb, loc, it, idx(fb, S)), group);
    SmallVector<Value> values =
        fetch(fb, arith::MinUIOp::create(fb, loc, kt, idx(fb, kTiles - 1)));
    if (kTiles % S == 0)
      return values;
    Value valid = arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::ult, kt, idx(fb, kTiles));
    Value zero = arith::ConstantOp::create(fb, loc, DenseElementsAttr::get(v4, fb.getF32FloatAttr(0)));
    Value lanes = vector::BroadcastOp::create(fb, loc, VectorType::get({4}, fb.getI1Type()), valid);
    for (Value &v : values)
      v = arith::SelectOp::create(fb, loc, lanes, v, zero);
    return values;
  };
  auto slotIndex = [&](OpBuilder &fb, std::pair<Value, Value> slot, int64_t width) -> Value {
    return arith::AddIOp::create(fb, loc, arith::MulIOp::create(fb, loc, slot.first, idx(fb, width / 4)),
                                 slot.second);
  };
  // A slice's fetched vectors into the tiles at (baseA, baseB).
  auto stage = [&](OpBuilder &fb, ValueRange staged, std::pair<Value, Value> bases) {
    for (auto [e, slot] : llvm::enumerate(aSlots))
      memref::StoreOp::create(
          fb, loc, staged[e], tileA,
          ValueRange{inGroup(fb, bases.first, aVec ? slotIndex(fb, slot, TK) : slotIndex(fb, slot, TM))});
    for (auto [e, slot] : llvm::enumerate(bSlots))
      memref::StoreOp::create(fb, loc, staged[aSlots.size() + e], tileB,
                              ValueRange{inGroup(fb, bases.second, slotIndex(fb, slot, TN))});
  };
  // The FMAs of one staged slice into `sums`.
  auto multiply = [&](OpBuilder &fb, SmallVector<Value> &sums, std::pair<Value, Value> bases) {
    auto [baseA, baseB] = bases;
    // A work item's `count` values at kk of a k-major tile `width` wide:
    // 16-byte groups at id, id + spread, ...
    auto kMajor = [&](Value tile, Value base, int64_t width, Value id, int64_t spread,
                      int64_t count, int64_t kk) {
      SmallVector<Value> values;
      for (int64_t g = 0; g < count / 4; ++g) {
        Value vec = memref::LoadOp::create(
            fb, loc, tile,
            ValueRange{inGroup(fb, base, arith::AddIOp::create(
                                             fb, loc, id, idx(fb, kk * width / 4 + g * spread)))});
        for (int64_t q = 0; q < 4; ++q)
          values.push_back(vector::ExtractOp::create(fb, loc, vec, q));
      }
      return values;
    };
    auto bValues = [&](int64_t kk) { return kMajor(tileB, baseB, TN, tx, threadsN, RN, kk); };
    auto accumulate = [&](ArrayRef<Value> a, ArrayRef<Value> bv) {
      for (int64_t r = 0; r < RM; ++r)
        for (int64_t c = 0; c < RN; ++c)
          sums[r * RN + c] = math::FmaOp::create(fb, loc, a[r], bv[c], sums[r * RN + c]);
    };
    if (aVec) {
      // Each row's 16-byte read holds 4 consecutive kk.
      for (int64_t kq = 0; kq < TK / 4; ++kq) {
        SmallVector<Value> rowVecs;
        for (int64_t r = 0; r < RM; ++r) {
          Value row = inTile(fb, ty, threadsM, r);
          rowVecs.push_back(memref::LoadOp::create(
              fb, loc, tileA,
              ValueRange{inGroup(fb, baseA, arith::AddIOp::create(
                  fb, loc, arith::MulIOp::create(fb, loc, row, idx(fb, TK / 4)), idx(fb, kq)))}));
        }
        for (int64_t q = 0; q < 4; ++q) {
          SmallVector<Value> a;
          for (Value vec : rowVecs)
            a.push_back(vector::ExtractOp::create(fb, loc, vec, q));
          accumulate(a, bValues(kq * 4 + q));
        }
      }
    } else {
      for (int64_t kk = 0; kk < TK; ++kk)
        accumulate(kMajor(tileA, baseA, TM, ty, threadsM, RM, kk), bValues(kk));
    }
  };
  // Slice `ahead` slices past kt, clamped to the last (on the last
  // iterations its reads stay in bounds and are not used).
  auto fetchAhead = [&](OpBuilder &fb, Value kt, int64_t ahead) {
    return fetchSlice(fb, arith::MinUIOp::create(fb, loc, arith::AddIOp::create(fb, loc, kt, idx(fb, ahead)),
                                                 idx(fb, iterations - 1)));
  };
  SmallVector<Value> inits(RM * RN, floatConstant(lb, loc, f32, 0.0));
  size_t numAccumulators = inits.size();
  if (P == 2) {
    // Slice 0 staged before the loop, slice 1 in registers.
    stage(lb, fetchSlice(lb, idx(lb, 0)), stageBases(lb, idx(lb, 0)));
    llvm::append_range(inits, fetchAhead(lb, idx(lb, 0), 1));
    gpu::BarrierOp::create(lb, loc);
  } else {
    llvm::append_range(inits, fetchSlice(lb, idx(lb, 0)));
  }
  auto loop = scf::ForOp::create(
      lb, loc, idx(lb, 0), idx(lb, iterations), idx(lb, 1), inits,
      [&](OpBuilder &fb, Location, Value kt, ValueRange carried) {
        ValueRange staged = carried.drop_front(numAccumulators);
        SmallVector<Value> sums(carried.take_front(numAccumulators)), next;
        if (P == 2) {
          // Slice kt + 1 into the other buffer: its readers (iteration kt -
          // 1) passed the last barrier. Then the global reads of kt + 2, and
          // kt's FMAs; one barrier per slice.
          Value following = arith::AddIOp::create(fb, loc, kt, idx(fb, 1));
          stage(fb, staged, stageBases(fb, following));
          next = fetchAhead(fb, kt, 2);
          multiply(fb, sums, stageBases(fb, kt));
        } else {
          stage(fb, staged, stageBases(fb, kt));
          gpu::BarrierOp::create(fb, loc);
          next = fetchAhead(fb, kt, 1);
          multiply(fb, sums, stageBases(fb, kt));
        }
        // The next slice overwrites these tiles (one stage) or the loop
        // reads the other buffer (two): everyone must be done.
        gpu::BarrierOp::create(fb, loc);
        llvm::append_range(sums, next);
        scf::YieldOp::create(fb, loc, sums);
      });

  SmallVector<Value> sums(loop.getResults().take_front(numAccumulators));
  OpBuilder eb = lb;
  if (S > 1) {
    // Groups 1.. leave their sums in shared memory, as 4-vectors of a row
    // (slot (g - 1, r, c / 4), work items innermost); group 0 adds them in
    // group order, so the result does not depend on scheduling, and runs
    // the epilogue.
    const int64_t perItem = RM * RN / 4;
    Value partials = memref::AllocOp::create(
        lb, loc, MemRefType::get({(S - 1) * perItem * threads}, v4, AffineMap(), space));
    auto slot = [&](OpBuilder &pb, Value g1, int64_t n) -> Value {
      Value first = arith::MulIOp::create(
          pb, loc, arith::AddIOp::create(pb, loc, arith::MulIOp::create(pb, loc, g1, idx(pb, perItem)),
                                         idx(pb, n)),
          idx(pb, threads));
      return arith::AddIOp::create(pb, loc, first, tid);
    };
    Value isFirst = arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::eq, group, idx(lb, 0));
    auto leave = scf::IfOp::create(lb, loc, isFirst, /*withElseRegion=*/true);
    OpBuilder pb = OpBuilder::atBlockBegin(&leave.getElseRegion().front());
    Value g1 = arith::SubIOp::create(pb, loc, group, idx(pb, 1));
    for (int64_t n = 0; n < perItem; ++n) {
      SmallVector<Value> lanes(sums.begin() + 4 * n, sums.begin() + 4 * n + 4);
      memref::StoreOp::create(pb, loc, vector::FromElementsOp::create(pb, loc, v4, lanes),
                              partials, ValueRange{slot(pb, g1, n)});
    }
    gpu::BarrierOp::create(lb, loc);
    auto first = scf::IfOp::create(lb, loc, isFirst, false);
    eb = OpBuilder::atBlockBegin(&first.getThenRegion().front());
    for (int64_t g = 1; g < S; ++g)
      for (int64_t n = 0; n < perItem; ++n) {
        Value vec = memref::LoadOp::create(eb, loc, partials, ValueRange{slot(eb, idx(eb, g - 1), n)});
        for (int64_t q = 0; q < 4; ++q)
          sums[4 * n + q] = arith::AddFOp::create(eb, loc, sums[4 * n + q],
                                                  vector::ExtractOp::create(eb, loc, vec, q));
      }
  }

  // The epilogue per result, then one store.
  for (int64_t r = 0; r < RM; ++r)
    for (int64_t c = 0; c < RN; ++c) {
      Value i = arith::AddIOp::create(eb, loc, rowBase, inTile(eb, ty, threadsM, r));
      Value j = arith::AddIOp::create(eb, loc, colBase, inTile(eb, tx, threadsN, c));
      emitGpuGemmResult(eb, loc, kernel, root, entry, gemm, batch, i, j, sums[r * RN + c],
                        gemm.m % TM || gemm.n % TN, failed);
      if (failed)
        return;
    }
  gpu::TerminatorOp::create(lb, loc);
}

} // namespace

std::optional<GemmShape> kiln::tiledGemmShape(KernelOp kernel, Operation *root) {
  std::optional<Gemm> gemm = describeGemm(kernel, root, /*minRowsPerGroup=*/16);
  if (!gemm)
    return std::nullopt;
  return GemmShape{gemm->batch, gemm->m, gemm->n, gemm->k};
}

bool kiln::tiledGridFits(const GemmShape &gemm, const MatmulConfig &config,
                         const DeviceLimits &limits) {
  return gemm.batch <= limits.maxWorkgroupCount[2] &&
         (gemm.n + config.tileN - 1) / config.tileN <= limits.maxWorkgroupCount[0] &&
         (gemm.m + config.tileM - 1) / config.tileM <= limits.maxWorkgroupCount[1];
}

FailureOr<func::FuncOp> kiln::buildTiledContractionFunction(KernelOp kernel, Operation *root,
                                                             OpBuilder &builder, StringRef name,
                                                             const DeviceLimits &limits,
                                                             const MatmulConfig *override) {
  std::optional<Gemm> described = describeGemm(kernel, root, /*minRowsPerGroup=*/16);
  if (!described)
    return func::FuncOp(); // depthwise, narrow groups, operands behind more than views
  const Gemm &gemm = *described;
  MatmulConfig config = override ? *override
                                 : MatmulConfig::defaultFor(limits, gemm.m, gemm.n, gemm.k, gemm.batch);
  if (std::string problem = config.check(limits); !problem.empty())
    return root->emitOpError("matmul configuration: ") << problem, failure();
  if (!tiledGridFits({gemm.batch, gemm.m, gemm.n, gemm.k}, config, limits))
    return func::FuncOp(); // the untiled form, one grid dimension over the results
  int64_t results = cast<RankedTensorType>(root->getResult(0).getType()).getNumElements();
  func::FuncOp func =
      createFlatKernelFunction(kernel, builder, name, results * gemm.k, std::max<int64_t>(1, results));
  // Operands read as 4-vectors: their buffers declared so (the same bytes).
  SmallVector<Type> args(func.getArgumentTypes());
  for (std::optional<unsigned> arg : {gemm.aVectorArg, gemm.bVectorArg})
    if (arg) {
      auto flat = cast<MemRefType>(args[*arg]);
      args[*arg] = MemRefType::get({flat.getNumElements() / 4},
                                   VectorType::get({4}, flat.getElementType()));
    }
  func.setType(builder.getFunctionType(args, {}));
  Block *entry = func.addEntryBlock();
  *gemm.entry = entry;
  OpBuilder fb = OpBuilder::atBlockBegin(entry);
  bool failedOp = false;
  buildTiledGemm(fb, kernel, root, entry, gemm, config, failedOp);
  func::ReturnOp::create(fb, kernel.getLoc());
  if (failedOp) {
    func.erase();
    return failure();
  }
  return func;
}
