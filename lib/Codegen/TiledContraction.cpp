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
// The epilogue is evaluated per result in registers before the one store.
// Sizes come from MatmulConfig.
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
  const int64_t RM = config.threadM, RN = config.threadN;
  const int64_t threadsN = TN / RN, threadsM = TM / RM, threads = threadsM * threadsN;
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };

  auto launch = gpu::LaunchOp::create(
      b, loc, idx(b, (gemm.n + TN - 1) / TN), idx(b, (gemm.m + TM - 1) / TM), idx(b, gemm.batch),
      idx(b, threads), idx(b, 1), idx(b, 1));
  OpBuilder lb = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value batch = launch.getBlockIds().z;
  Value rowBase = arith::MulIOp::create(lb, loc, launch.getBlockIds().y, idx(lb, TM));
  Value colBase = arith::MulIOp::create(lb, loc, launch.getBlockIds().x, idx(lb, TN));
  Value tx = arith::RemUIOp::create(lb, loc, tid, idx(lb, threadsN));
  Value ty = arith::DivUIOp::create(lb, loc, tid, idx(lb, threadsN));
  auto space = lb.getI64IntegerAttr(3);
  // k-major tiles of 4-wide vectors: As[kk][i / 4], Bs[kk][j / 4]. A work
  // item reads its 4-row and 4-column groups with one 16-byte load each.
  VectorType v4 = VectorType::get({4}, f32);
  Value tileA = memref::AllocOp::create(lb, loc, MemRefType::get({TK * TM / 4}, v4, AffineMap(), space));
  Value tileB = memref::AllocOp::create(lb, loc, MemRefType::get({TK * TN / 4}, v4, AffineMap(), space));

  // One element of a staged tile: zero outside [0, rows) x [0, cols) (no
  // check where the tile divides the dimension).
  auto stage = [&](OpBuilder &sb, const OperandReader &read, Value row, Value col, int64_t rows,
                   int64_t cols, bool checkRows, bool checkCols) -> Value {
    Value inside;
    auto clampAndCheck = [&](Value v, int64_t bound) {
      Value ok = arith::CmpIOp::create(sb, loc, arith::CmpIPredicate::ult, v, idx(sb, bound));
      inside = inside ? arith::AndIOp::create(sb, loc, inside, ok).getResult() : ok;
      return arith::MinUIOp::create(sb, loc, v, idx(sb, bound - 1)).getResult();
    };
    if (checkRows)
      row = clampAndCheck(row, rows);
    if (checkCols)
      col = clampAndCheck(col, cols);
    Value v = read(sb, loc, batch, row, col);
    if (v.getType() != f32)
      v = arith::ExtFOp::create(sb, loc, f32, v);
    if (!inside)
      return v;
    return arith::SelectOp::create(sb, loc, inside, v, floatConstant(sb, loc, f32, 0.0));
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
  // The global reads of k slice `kt`, as the vectors to stage (A's then
  // B's), kept in registers: issued a slice ahead, their latency hides
  // behind the FMAs.
  // One 16-byte read of `arg` at (b, row, col4), zero where a checked
  // coordinate is past its bound.
  auto vectorRead = [&](OpBuilder &fb, unsigned arg, AffineExpr index, Value row, Value col4,
                        std::optional<int64_t> rowBound, std::optional<int64_t> colBound) {
    Value inside;
    auto clampAndCheck = [&](Value v, int64_t bound) {
      Value ok = arith::CmpIOp::create(fb, loc, arith::CmpIPredicate::ult, v, idx(fb, bound));
      inside = inside ? arith::AndIOp::create(fb, loc, inside, ok).getResult() : ok;
      return arith::MinUIOp::create(fb, loc, v, idx(fb, bound - 1)).getResult();
    };
    if (rowBound)
      row = clampAndCheck(row, *rowBound);
    if (colBound)
      col4 = clampAndCheck(col4, *colBound);
    Value v = memref::LoadOp::create(fb, loc, entry->getArgument(arg),
                                     ValueRange{apply(fb, loc, index, ValueRange{batch, row, col4})});
    if (!inside)
      return v;
    // (A lane-wise condition: SPIR-V selects vectors by vectors.)
    return arith::SelectOp::create(
               fb, loc,
               vector::BroadcastOp::create(fb, loc, VectorType::get({4}, fb.getI1Type()), inside),
               v, arith::ConstantOp::create(fb, loc, DenseElementsAttr::get(v4, fb.getF32FloatAttr(0))))
        .getResult();
  };
  auto bound = [](bool checked, int64_t size) {
    return checked ? std::optional<int64_t>(size) : std::nullopt;
  };
  auto fetch = [&](OpBuilder &fb, Value kt) {
    Value kBase = arith::MulIOp::create(fb, loc, kt, idx(fb, TK));
    SmallVector<Value> values;
    if (aVec)
      for (auto [i, k4] : aSlots)
        values.push_back(vectorRead(
            fb, *gemm.aVectorArg, gemm.aVectorIndex, arith::AddIOp::create(fb, loc, rowBase, i),
            arith::AddIOp::create(fb, loc, arith::DivUIOp::create(fb, loc, kBase, idx(fb, 4)), k4),
            bound(ragged[0], gemm.m), bound(ragged[2], gemm.k / 4)));
    for (auto [kk, i4] : aVec ? ArrayRef<std::pair<Value, Value>>() : ArrayRef(aSlots)) {
      Value k = arith::AddIOp::create(fb, loc, kBase, kk);
      SmallVector<Value> lanes;
      for (int64_t q = 0; q < 4; ++q) {
        Value i = arith::AddIOp::create(
            fb, loc, rowBase,
            arith::AddIOp::create(fb, loc, arith::MulIOp::create(fb, loc, i4, idx(fb, 4)),
                                  idx(fb, q)));
        lanes.push_back(stage(fb, gemm.readA, i, k, gemm.m, gemm.k, ragged[0], ragged[2]));
      }
      values.push_back(vector::FromElementsOp::create(fb, loc, v4, lanes));
    }
    for (auto [kk, j4] : bSlots) {
      Value k = arith::AddIOp::create(fb, loc, kBase, kk);
      if (gemm.bVectorArg) {
        values.push_back(vectorRead(
            fb, *gemm.bVectorArg, gemm.bVectorIndex, k,
            arith::AddIOp::create(fb, loc, arith::DivUIOp::create(fb, loc, colBase, idx(fb, 4)), j4),
            bound(ragged[2], gemm.k), bound(ragged[1], gemm.n / 4)));
        continue;
      }
      SmallVector<Value> lanes;
      for (int64_t q = 0; q < 4; ++q) {
        Value j = arith::AddIOp::create(
            fb, loc, colBase,
            arith::AddIOp::create(fb, loc, arith::MulIOp::create(fb, loc, j4, idx(fb, 4)),
                                  idx(fb, q)));
        lanes.push_back(stage(fb, gemm.readB, k, j, gemm.k, gemm.n, ragged[2], ragged[1]));
      }
      values.push_back(vector::FromElementsOp::create(fb, loc, v4, lanes));
    }
    return values;
  };

  // describeGemm guarantees k >= 1: the loop runs at least once (a zero-trip
  // loop with iter_args miscompiles to SPIR-V, TOOLCHAIN.md).
  int64_t kTiles = (gemm.k + TK - 1) / TK;
  SmallVector<Value> inits(RM * RN, floatConstant(lb, loc, f32, 0.0));
  size_t numAccumulators = inits.size();
  llvm::append_range(inits, fetch(lb, idx(lb, 0)));
  auto loop = scf::ForOp::create(
      lb, loc, idx(lb, 0), idx(lb, kTiles), idx(lb, 1), inits,
      [&](OpBuilder &fb, Location, Value kt, ValueRange carried) {
        ValueRange staged = carried.drop_front(numAccumulators);
        auto slotIndex = [&](std::pair<Value, Value> slot, int64_t width) -> Value {
          return arith::AddIOp::create(
              fb, loc, arith::MulIOp::create(fb, loc, slot.first, idx(fb, width / 4)),
              slot.second);
        };
        for (auto [e, slot] : llvm::enumerate(aSlots))
          memref::StoreOp::create(fb, loc, staged[e], tileA,
                                  ValueRange{aVec ? slotIndex(slot, TK) : slotIndex(slot, TM)});
        for (auto [e, slot] : llvm::enumerate(bSlots))
          memref::StoreOp::create(fb, loc, staged[aSlots.size() + e], tileB,
                                  ValueRange{slotIndex(slot, TN)});
        gpu::BarrierOp::create(fb, loc);
        // The next slice (the last one again on the last iteration: its
        // reads stay in bounds and are not used).
        SmallVector<Value> next = fetch(
            fb, arith::MinUIOp::create(fb, loc, arith::AddIOp::create(fb, loc, kt, idx(fb, 1)),
                                       idx(fb, kTiles - 1)));
        SmallVector<Value> sums(carried.take_front(numAccumulators));
        // B's values at kk: RN columns in 16-byte groups.
        auto bValues = [&](int64_t kk) {
          SmallVector<Value> bv;
          for (int64_t c4 = 0; c4 < RN / 4; ++c4) {
            Value vec = memref::LoadOp::create(
                fb, loc, tileB,
                ValueRange{arith::AddIOp::create(fb, loc, tx,
                                                 idx(fb, kk * TN / 4 + c4 * threadsN))});
            for (int64_t q = 0; q < 4; ++q)
              bv.push_back(vector::ExtractOp::create(fb, loc, vec, q));
          }
          return bv;
        };
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
              Value row = arith::AddIOp::create(
                  fb, loc, arith::MulIOp::create(
                               fb, loc, arith::AddIOp::create(fb, loc, ty, idx(fb, (r / 4) * threadsM)),
                               idx(fb, 4)),
                  idx(fb, r % 4));
              rowVecs.push_back(memref::LoadOp::create(
                  fb, loc, tileA,
                  ValueRange{arith::AddIOp::create(
                      fb, loc, arith::MulIOp::create(fb, loc, row, idx(fb, TK / 4)), idx(fb, kq))}));
            }
            for (int64_t q = 0; q < 4; ++q) {
              SmallVector<Value> a;
              for (Value vec : rowVecs)
                a.push_back(vector::ExtractOp::create(fb, loc, vec, q));
              accumulate(a, bValues(kq * 4 + q));
            }
          }
        } else {
          for (int64_t kk = 0; kk < TK; ++kk) {
            SmallVector<Value> a;
            for (int64_t r4 = 0; r4 < RM / 4; ++r4) {
              Value vec = memref::LoadOp::create(
                  fb, loc, tileA,
                  ValueRange{arith::AddIOp::create(fb, loc, ty,
                                                   idx(fb, kk * TM / 4 + r4 * threadsM))});
              for (int64_t q = 0; q < 4; ++q)
                a.push_back(vector::ExtractOp::create(fb, loc, vec, q));
            }
            accumulate(a, bValues(kk));
          }
        }
        // The next slice overwrites the tiles: everyone must be done.
        gpu::BarrierOp::create(fb, loc);
        llvm::append_range(sums, next);
        scf::YieldOp::create(fb, loc, sums);
      });

  // The epilogue per result, then one store.
  for (int64_t r = 0; r < RM; ++r)
    for (int64_t c = 0; c < RN; ++c) {
      // Register r is row 4 (ty + (r / 4) threadsM) + r % 4 of the tile.
      Value i = arith::AddIOp::create(
          lb, loc, rowBase,
          arith::AddIOp::create(
              lb, loc,
              arith::MulIOp::create(
                  lb, loc, arith::AddIOp::create(lb, loc, ty, idx(lb, (r / 4) * threadsM)),
                  idx(lb, 4)),
              idx(lb, r % 4)));
      Value j = arith::AddIOp::create(
          lb, loc, colBase,
          arith::AddIOp::create(
              lb, loc,
              arith::MulIOp::create(
                  lb, loc, arith::AddIOp::create(lb, loc, tx, idx(lb, (c / 4) * threadsN)),
                  idx(lb, 4)),
              idx(lb, c % 4)));
      OpBuilder sb = lb;
      if (gemm.m % TM || gemm.n % TN) {
        Value inside = arith::AndIOp::create(
            lb, loc, arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, i, idx(lb, gemm.m)),
            arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, j, idx(lb, gemm.n)));
        auto guard = scf::IfOp::create(lb, loc, inside, false);
        sb = OpBuilder::atBlockBegin(&guard.getThenRegion().front());
      }
      Value at = apply(sb, loc, gemm.resultIndex, ValueRange{batch, i, j});
      emitGemmEpilogue(sb, loc, kernel, root, entry, loop.getResult(r * RN + c), at, failed);
      if (failed)
        return;
    }
  gpu::TerminatorOp::create(lb, loc);
}

} // namespace

FailureOr<func::FuncOp> kiln::buildTiledContractionFunction(KernelOp kernel, Operation *root,
                                                             OpBuilder &builder, StringRef name,
                                                             const DeviceLimits &limits,
                                                             const MatmulConfig *override) {
  std::optional<Gemm> described = describeGemm(kernel, root, /*minRowsPerGroup=*/16);
  if (!described)
    return func::FuncOp(); // depthwise, narrow groups, operands behind more than views
  const Gemm &gemm = *described;
  MatmulConfig config = override ? *override
                                 : MatmulConfig::defaultFor(limits, gemm.m, gemm.n, gemm.k);
  if (std::string problem = config.check(limits); !problem.empty())
    return root->emitOpError("matmul configuration: ") << problem, failure();
  if (gemm.batch > limits.maxWorkgroupCount[2] ||
      (gemm.n + config.tileN - 1) / config.tileN > limits.maxWorkgroupCount[0] ||
      (gemm.m + config.tileM - 1) / config.tileM > limits.maxWorkgroupCount[1])
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
