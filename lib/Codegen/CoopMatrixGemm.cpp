//===- CoopMatrixGemm.cpp - f16 matmul on cooperative matrices ------------===//
//
// C[b, i, j] = sum_k A[b, i, k] B[b, k, j] with A and B in f16, on the
// tensor cores through gpu.subgroup_mma_* (SPIR-V's KHR cooperative
// matrices). Each workgroup computes a tileM x tileN block with
// subgroupsM x subgroupsN subgroups; a subgroup holds its share as 16 x 16
// f32 accumulator fragments across the k loop. Per tileK slice the work
// items stage A and B in shared memory (the global reads of the next slice
// issued before this slice's multiplies, zeros past every edge, so ragged
// shapes need no fragment-level checks), then every subgroup loads its A
// and B fragments from the tiles and multiplies. Tile rows are padded by 8
// halves (16 bytes): fragment loads of consecutive rows then start in
// different banks. The epilogue reads the accumulators back through one
// 16 x 16 f32 fragment of shared memory per subgroup, each lane evaluating
// its results as the tiled form does, then one guarded store each.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "kiln/Codegen/KernelToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace kiln;

namespace {
constexpr int64_t kF = CoopMatrixConfig::kFragment;
constexpr int64_t kPad = 8; // halves: 16 bytes

/// Whether element (b, row, col + 1) follows (b, row, col) in memory.
bool contiguousAlongColumns(AffineExpr index) {
  MLIRContext *ctx = index.getContext();
  auto at = [&](int64_t col) {
    AffineExpr e = index.replaceDims({getAffineConstantExpr(0, ctx), getAffineConstantExpr(0, ctx),
                                      getAffineConstantExpr(col, ctx)});
    auto c = dyn_cast<AffineConstantExpr>(simplifyAffineExpr(e, 0, 0));
    return c ? std::optional<int64_t>(c.getValue()) : std::nullopt;
  };
  std::optional<int64_t> first = at(0), second = at(1);
  return first && second && *second - *first == 1;
}


} // namespace

std::optional<GemmShape> kiln::coopGemmShape(KernelOp kernel, Operation *root) {
  auto matmul = dyn_cast_or_null<MatmulOp>(root);
  if (!matmul)
    return std::nullopt;
  for (Value operand : matmul->getOperands())
    if (!cast<RankedTensorType>(operand.getType()).getElementType().isF16())
      return std::nullopt;
  std::optional<Gemm> gemm = describeGemm(kernel, root, /*minRowsPerGroup=*/1);
  if (!gemm || gemm->conv || gemm->k == 0)
    return std::nullopt;
  return GemmShape{gemm->batch, gemm->m, gemm->n, gemm->k};
}

FailureOr<func::FuncOp> kiln::buildCoopGemmFunction(KernelOp kernel, Operation *root,
                                                    OpBuilder &builder, StringRef name,
                                                    const DeviceLimits &limits,
                                                    const CoopMatrixConfig &config) {
  if (!coopGemmShape(kernel, root))
    return root->emitOpError("the coop_gemm form takes a matmul of two f16 operands read "
                             "through views"),
           failure();
  if (std::string problem = config.check(limits); !problem.empty())
    return root->emitOpError("coop_gemm configuration: ") << problem, failure();
  std::optional<Gemm> described = describeGemm(kernel, root, /*minRowsPerGroup=*/1);
  const Gemm &gemm = *described;
  int64_t results = cast<RankedTensorType>(root->getResult(0).getType()).getNumElements();
  func::FuncOp func =
      createFlatKernelFunction(kernel, builder, name, results * gemm.k, std::max<int64_t>(1, results));
  Block *entry = func.addEntryBlock();
  *gemm.entry = entry;
  OpBuilder fb = OpBuilder::atBlockBegin(entry);
  Location loc = kernel.getLoc();
  MLIRContext *ctx = builder.getContext();
  Type f16 = Float16Type::get(ctx), f32 = Float32Type::get(ctx);
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };
  auto add = [&](OpBuilder &ib, Value x, Value y) -> Value {
    return arith::AddIOp::create(ib, loc, x, y);
  };
  auto mul = [&](OpBuilder &ib, Value x, int64_t y) -> Value {
    return arith::MulIOp::create(ib, loc, x, idx(ib, y));
  };

  const int64_t TM = config.tileM, TN = config.tileN, TK = config.tileK;
  const int64_t SM = config.subgroupsM, SN = config.subgroupsN, sg = limits.subgroupSize;
  const int64_t WM = TM / SM, WN = TN / SN, FM = WM / kF, FN = WN / kF;
  const int64_t threads = SM * SN * sg;
  const int64_t ldA = TK + kPad, ldB = TN + kPad;

  auto launch = gpu::LaunchOp::create(fb, loc, idx(fb, (gemm.n + TN - 1) / TN),
                                      idx(fb, (gemm.m + TM - 1) / TM), idx(fb, gemm.batch),
                                      idx(fb, threads), idx(fb, 1), idx(fb, 1));
  func::ReturnOp::create(fb, loc);
  OpBuilder lb = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value batch = launch.getBlockIds().z;
  Value rowBase = mul(lb, launch.getBlockIds().y, TM);
  Value colBase = mul(lb, launch.getBlockIds().x, TN);
  // Subgroups are runs of `sg` consecutive work items (the SubgroupId
  // built-in needs a capability spirv-update-vce drops).
  Value subgroup = arith::DivUIOp::create(lb, loc, tid, idx(lb, sg));
  Value lane = arith::RemUIOp::create(lb, loc, tid, idx(lb, sg));
  Value subRow = mul(lb, arith::DivUIOp::create(lb, loc, subgroup, idx(lb, SN)), WM);
  Value subCol = mul(lb, arith::RemUIOp::create(lb, loc, subgroup, idx(lb, SN)), WN);

  auto space = lb.getI64IntegerAttr(3);
  Value tileA = memref::AllocOp::create(lb, loc, MemRefType::get({TM * ldA}, f16, AffineMap(), space));
  Value tileB = memref::AllocOp::create(lb, loc, MemRefType::get({TK * ldB}, f16, AffineMap(), space));
  Value scratch =
      memref::AllocOp::create(lb, loc, MemRefType::get({SM * SN * kF * kF}, f32, AffineMap(), space));

  // Work item tid's elements of each staged tile, as (row, col) in the
  // tile: consecutive work items take consecutive elements along the
  // operand's contiguous dimension, so the global reads coalesce.
  auto slots = [&](int64_t rows, int64_t cols, bool alongCols) {
    SmallVector<std::pair<Value, Value>> out;
    for (int64_t e = 0; e < rows * cols / threads; ++e) {
      Value flat = add(lb, tid, idx(lb, e * threads));
      if (alongCols)
        out.push_back({arith::DivUIOp::create(lb, loc, flat, idx(lb, cols)),
                       arith::RemUIOp::create(lb, loc, flat, idx(lb, cols))});
      else
        out.push_back({arith::RemUIOp::create(lb, loc, flat, idx(lb, rows)),
                       arith::DivUIOp::create(lb, loc, flat, idx(lb, rows))});
    }
    return out;
  };
  bool aRowMajor = !gemm.aAccess || contiguousAlongColumns(gemm.aAccess->second);
  bool bRowMajor = !gemm.bAccess || contiguousAlongColumns(gemm.bAccess->second);
  SmallVector<std::pair<Value, Value>> aSlots = slots(TM, TK, aRowMajor);
  SmallVector<std::pair<Value, Value>> bSlots = slots(TK, TN, bRowMajor);

  // One element of A or B through its reader, clamped into the operand and
  // zero outside it (past M, N or K), in f16.
  const bool raggedM = gemm.m % TM != 0, raggedN = gemm.n % TN != 0, raggedK = gemm.k % TK != 0;
  auto read = [&](OpBuilder &gb, const OperandReader &reader, Value row, Value col,
                  int64_t rows, bool rowChecked, int64_t cols, bool colChecked) -> Value {
    Value inside;
    auto clamp = [&](Value v, int64_t bound, bool checked) -> Value {
      if (!checked)
        return v;
      Value ok = arith::CmpIOp::create(gb, loc, arith::CmpIPredicate::ult, v, idx(gb, bound));
      inside = inside ? arith::AndIOp::create(gb, loc, inside, ok).getResult() : ok;
      return arith::MinUIOp::create(gb, loc, v, idx(gb, bound - 1));
    };
    row = clamp(row, rows, rowChecked);
    col = clamp(col, cols, colChecked);
    Value v = reader(gb, loc, batch, row, col);
    if (v.getType() != f16)
      v = arith::TruncFOp::create(gb, loc, f16, v);
    if (!inside)
      return v;
    return arith::SelectOp::create(gb, loc, inside, v, floatConstant(gb, loc, f16, 0.0));
  };
  int64_t kTiles = (gemm.k + TK - 1) / TK;
  // The global reads of k slice `kt`: A's elements, then B's.
  auto fetch = [&](OpBuilder &gb, Value kt) {
    Value kBase = mul(gb, kt, TK);
    SmallVector<Value> values;
    for (auto [r, c] : aSlots)
      values.push_back(read(gb, gemm.readA, add(gb, rowBase, r), add(gb, kBase, c), gemm.m, raggedM,
                            gemm.k, raggedK));
    for (auto [r, c] : bSlots)
      values.push_back(read(gb, gemm.readB, add(gb, kBase, r), add(gb, colBase, c), gemm.k, raggedK,
                            gemm.n, raggedN));
    return values;
  };

  auto accType = gpu::MMAMatrixType::get({kF, kF}, f32, "COp");
  auto aType = gpu::MMAMatrixType::get({kF, kF}, f16, "AOp");
  auto bType = gpu::MMAMatrixType::get({kF, kF}, f16, "BOp");
  Value zero = gpu::SubgroupMmaConstantMatrixOp::create(lb, loc, accType,
                                                        floatConstant(lb, loc, f32, 0.0));
  SmallVector<Value> inits(FM * FN, zero);
  const size_t numAcc = inits.size();
  llvm::append_range(inits, fetch(lb, idx(lb, 0)));
  auto loop = scf::ForOp::create(
      lb, loc, idx(lb, 0), idx(lb, kTiles), idx(lb, 1), inits,
      [&](OpBuilder &kb, Location, Value kt, ValueRange carried) {
        ValueRange staged = carried.drop_front(numAcc);
        for (auto [e, slot] : llvm::enumerate(aSlots))
          memref::StoreOp::create(kb, loc, staged[e], tileA,
                                  ValueRange{add(kb, mul(kb, slot.first, ldA), slot.second)});
        for (auto [e, slot] : llvm::enumerate(bSlots))
          memref::StoreOp::create(kb, loc, staged[aSlots.size() + e], tileB,
                                  ValueRange{add(kb, mul(kb, slot.first, ldB), slot.second)});
        gpu::BarrierOp::create(kb, loc);
        // The next slice's reads (the last again at the end: in bounds,
        // unused) before this slice's multiplies.
        SmallVector<Value> next = fetch(
            kb, arith::MinUIOp::create(kb, loc, add(kb, kt, idx(kb, 1)), idx(kb, kTiles - 1)));
        SmallVector<Value> acc(carried.take_front(numAcc));
        for (int64_t kk = 0; kk < TK; kk += kF) {
          SmallVector<Value> aFrags, bFrags;
          for (int64_t fm = 0; fm < FM; ++fm) {
            Value at = add(kb, mul(kb, add(kb, subRow, idx(kb, fm * kF)), ldA), idx(kb, kk));
            aFrags.push_back(gpu::SubgroupMmaLoadMatrixOp::create(
                kb, loc, aType, tileA, ValueRange{at}, kb.getIndexAttr(ldA), UnitAttr()));
          }
          for (int64_t fn = 0; fn < FN; ++fn) {
            Value at = add(kb, idx(kb, kk * ldB), add(kb, subCol, idx(kb, fn * kF)));
            bFrags.push_back(gpu::SubgroupMmaLoadMatrixOp::create(
                kb, loc, bType, tileB, ValueRange{at}, kb.getIndexAttr(ldB), UnitAttr()));
          }
          for (int64_t fm = 0; fm < FM; ++fm)
            for (int64_t fn = 0; fn < FN; ++fn)
              acc[fm * FN + fn] = gpu::SubgroupMmaComputeOp::create(
                  kb, loc, accType, aFrags[fm], bFrags[fn], acc[fm * FN + fn], UnitAttr(),
                  UnitAttr());
        }
        // The next slice overwrites the tiles: everyone must be done.
        gpu::BarrierOp::create(kb, loc);
        llvm::append_range(acc, next);
        scf::YieldOp::create(kb, loc, acc);
      });

  // The epilogue, one fragment at a time: the subgroup stores it to its
  // scratch fragment, each lane takes 16 * 16 / sg of its results.
  Value scratchBase = mul(lb, subgroup, kF * kF);
  bool failedOp = false;
  for (int64_t fm = 0; fm < FM && !failedOp; ++fm)
    for (int64_t fn = 0; fn < FN && !failedOp; ++fn) {
      gpu::SubgroupMmaStoreMatrixOp::create(lb, loc, loop.getResult(fm * FN + fn), scratch,
                                            ValueRange{scratchBase}, lb.getIndexAttr(kF),
                                            UnitAttr());
      gpu::BarrierOp::create(lb, loc);
      for (int64_t e = 0; e < kF * kF / sg; ++e) {
        Value flat = add(lb, lane, idx(lb, e * sg));
        Value r = arith::DivUIOp::create(lb, loc, flat, idx(lb, kF));
        Value c = arith::RemUIOp::create(lb, loc, flat, idx(lb, kF));
        Value i = add(lb, add(lb, rowBase, subRow), add(lb, r, idx(lb, fm * kF)));
        Value j = add(lb, add(lb, colBase, subCol), add(lb, c, idx(lb, fn * kF)));
        Value sum = memref::LoadOp::create(lb, loc, scratch, ValueRange{add(lb, scratchBase, flat)});
        OpBuilder sb = lb;
        if (raggedM || raggedN) {
          Value inside = arith::AndIOp::create(
              lb, loc, arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, i, idx(lb, gemm.m)),
              arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, j, idx(lb, gemm.n)));
          auto guard = scf::IfOp::create(lb, loc, inside, false);
          sb = OpBuilder::atBlockBegin(&guard.getThenRegion().front());
        }
        Value at = applyExpr(sb, loc, gemm.resultIndex, ValueRange{batch, i, j});
        emitGemmEpilogue(sb, loc, kernel, root, entry, sum, at, failedOp);
        if (failedOp)
          break;
      }
      // The next fragment overwrites the scratch.
      gpu::BarrierOp::create(lb, loc);
    }
  gpu::TerminatorOp::create(lb, loc);
  if (failedOp) {
    func.erase();
    return failure();
  }
  return func;
}
