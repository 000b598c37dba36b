//===- CpuAttention.cpp - fused scaled dot-product attention on the CPU ---===//
//
// A kernel holding a kiln.attention: one work unit per query row (batch x
// L of them, split across threads). Each unit keeps its row of q, a block
// of scores and its output row in stack buffers, and sweeps the keys in
// blocks of 64 with an online softmax: the block's scores and their max,
// the running sum and output rescaled by exp(old max - new max), then each
// key's exp(score - max) times its row of v added in. No L x S matrix is
// written, so memory stays O(S) per thread for any sequence length. q, k,
// v and the mask are read through their views (a head split is a plain
// address); rows contiguous in memory are read as vectors.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace kiln;

namespace {
/// Keys per block (4 vectors of kLanes scores), query rows per work unit
/// (they share each packed block of k^T), rows whose scores are computed
/// together (kGroup x 4 accumulators).
constexpr int64_t kKeyBlock = 64, kLanes = 16, kMaxRows = 64, kGroup = 4;

/// The widest of 16, 8 and 4 lanes that divides `n` where `index` steps by
/// one along d2 (the row's elements lie side by side); else 1.
int64_t lanesFor(AffineExpr index, int64_t n) {
  AffineExpr col = getAffineDimExpr(2, index.getContext());
  AffineExpr step = simplifyAffineExpr(index.replace(col, col + 1) - index, 3, 0);
  auto unit = dyn_cast<AffineConstantExpr>(step);
  if (!unit || unit.getValue() != 1)
    return 1;
  for (int64_t lanes : {16, 8, 4})
    if (n % lanes == 0)
      return lanes;
  return 1;
}
} // namespace

FailureOr<func::FuncOp> kiln::buildCpuAttentionFunction(KernelOp kernel, AttentionOp attention,
                                                        OpBuilder &builder, StringRef name) {
  Location loc = attention.getLoc();
  MLIRContext *ctx = builder.getContext();
  Operation *yield = kernel.getBody().front().getTerminator();
  if (yield->getNumOperands() != 1 || yield->getOperand(0) != attention.getResult()) {
    attention.emitOpError("must be its kernel's only result (fusion gives it a kernel of its own)");
    return failure();
  }
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> y = shapeOf(attention.getResult());
  ArrayRef<int64_t> batchShape = y.drop_back(2);
  int64_t batch = 1;
  for (int64_t d : batchShape)
    batch *= d;
  const int64_t L = y[y.size() - 2], Ev = y.back(), E = shapeOf(attention.getQuery()).back();
  const int64_t S = shapeOf(attention.getKey())[shapeOf(attention.getKey()).size() - 2];
  if (E > 256 || Ev > 256) {
    attention.emitOpError("has a head size over 256, which the CPU kernel does not take: run "
                          "kiln-decompose-attention first");
    return failure();
  }
  auto access = [&](Value v, int64_t rows, int64_t cols, bool allowBool = false)
      -> std::optional<std::pair<unsigned, AffineExpr>> {
    auto found = operandAccess(kernel, v, batchShape, allowBool);
    if (found)
      found->second = simplifyWithBounds(found->second, {batch, rows, cols});
    return found;
  };
  auto q = access(attention.getQuery(), L, E), k = access(attention.getKey(), S, E),
       v = access(attention.getValue(), S, Ev);
  std::optional<std::pair<unsigned, AffineExpr>> mask;
  if (attention.getMask())
    mask = access(attention.getMask(), L, S, /*allowBool=*/true);
  if (!q || !k || !v || (attention.getMask() && !mask)) {
    attention.emitOpError("reads its operands through views only (fusion puts nothing else in "
                          "front)");
    return failure();
  }
  // One vector width for q and k (they meet in the dot product), one for v.
  const int64_t qkLanes = std::min(lanesFor(q->second, E), lanesFor(k->second, E));
  const int64_t vLanes = lanesFor(v->second, Ev);
  // Rows shared evenly by ceil(L / kMaxRows) units, in whole groups (100
  // rows: two units of 52, not 64 and 36 of 64).
  const int64_t perBatch = (L + kMaxRows - 1) / kMaxRows;
  const int64_t kRows = ((L + perBatch - 1) / perBatch + kGroup - 1) / kGroup * kGroup;
  const int64_t units = batch * ((L + kRows - 1) / kRows);
  func::FuncOp func =
      createFlatKernelFunction(kernel, builder, name, batch * L * S * (E + Ev), units);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  Type f32 = Float32Type::get(ctx);
  auto idx = [&](OpBuilder &ib, int64_t n) { return constantIndex(ib, loc, n); };
  auto fconst = [&](OpBuilder &cb, Type t, double x) { return floatConstant(cb, loc, t, x); };
  auto vecType = [&](int64_t lanes) { return VectorType::get({lanes}, f32); };
  // `lanes` elements of an operand from (b, row, col), widened to f32.
  auto loadRow = [&](OpBuilder &lb, const std::pair<unsigned, AffineExpr> &operand, Value bv,
                     Value row, Value col, int64_t lanes) -> Value {
    Value buffer = entry->getArgument(operand.first);
    Value at = applyExpr(lb, loc, operand.second, ValueRange{bv, row, col});
    Type element = cast<MemRefType>(buffer.getType()).getElementType();
    return widenToF32(lb, loc,
                      vector::LoadOp::create(lb, loc, VectorType::get({lanes}, element), buffer,
                                             ValueRange{at}));
  };
  auto forLoop = [&](OpBuilder &lb, Value from, Value to, int64_t step, ValueRange inits,
                     function_ref<SmallVector<Value>(OpBuilder &, Value, ValueRange)> body) {
    return scf::ForOp::create(lb, loc, from, to, idx(lb, step), inits,
                              [&](OpBuilder &fb, Location, Value iv, ValueRange args) {
                                scf::YieldOp::create(fb, loc, body(fb, iv, args));
                              })
        .getResults();
  };

  // Per unit: QB query rows, their output rows and softmax state, and one
  // packed block of keys (k^T, KB keys wide) shared by all of them.
  // The row-sized buffers on the heap (64-byte aligned): at E = 4096 they
  // would take 3 MB of a worker thread's stack.
  auto heap = [&](int64_t n) {
    return memref::AllocOp::create(b, loc, MemRefType::get({n}, f32), b.getI64IntegerAttr(64))
        .getResult();
  };
  Value qBlock = heap(kRows * E), keysT = heap(E * kKeyBlock), outRows = heap(kRows * Ev);
  Value scores = memref::AllocaOp::create(b, loc, MemRefType::get({kGroup * kKeyBlock}, f32));
  Value maxes = memref::AllocaOp::create(b, loc, MemRefType::get({kRows}, f32));
  Value sums = memref::AllocaOp::create(b, loc, MemRefType::get({kRows}, f32));
  Value output = entry->getArgument(kernel.getInputs().size());
  Type stored = cast<MemRefType>(output.getType()).getElementType();
  const double scale = attention.getScale().convertToDouble();
  const double minusInf = -std::numeric_limits<double>::infinity();
  const int64_t chunks = kKeyBlock / kLanes;
  VectorType keyVec = vecType(kLanes);
  auto i32Vec = VectorType::get({kLanes}, b.getI32Type());
  SmallVector<int32_t> lane(kLanes);
  for (int64_t i = 0; i < kLanes; ++i)
    lane[size_t(i)] = int32_t(i);
  Value laneIndex = arith::ConstantOp::create(b, loc, DenseElementsAttr::get(i32Vec, ArrayRef(lane)));
  auto asI32 = [&](OpBuilder &cb, Value index) {
    return arith::IndexCastOp::create(cb, loc, cb.getI32Type(), index).getResult();
  };
  const int64_t blocksPerBatch = (L + kRows - 1) / kRows;

  forLoop(b, idx(b, 0), idx(b, batch * blocksPerBatch), 1, {},
          [&](OpBuilder &ub, Value unit, ValueRange) -> SmallVector<Value> {
    Value bv = arith::DivUIOp::create(ub, loc, unit, idx(ub, blocksPerBatch));
    Value firstRow = arith::MulIOp::create(
        ub, loc, arith::RemUIOp::create(ub, loc, unit, idx(ub, blocksPerBatch)), idx(ub, kRows));
    // Rows past L read row L - 1 and are never stored.
    auto rowAt = [&](OpBuilder &rb, Value r) {
      return arith::MinUIOp::create(rb, loc, arith::AddIOp::create(rb, loc, firstRow, r),
                                    idx(rb, L - 1))
          .getResult();
    };
    forLoop(ub, idx(ub, 0), idx(ub, kRows), 1, {}, [&](OpBuilder &rb, Value r, ValueRange) {
      Value row = rowAt(rb, r);
      for (int64_t c = 0; c < E; ++c)
        memref::StoreOp::create(
            rb, loc, vector::ExtractOp::create(rb, loc, loadRow(rb, *q, bv, row, idx(rb, c), 1), 0),
            qBlock, ValueRange{arith::AddIOp::create(rb, loc, arith::MulIOp::create(rb, loc, r, idx(rb, E)), idx(rb, c))});
      memref::StoreOp::create(rb, loc, fconst(rb, f32, minusInf), maxes, ValueRange{r});
      memref::StoreOp::create(rb, loc, fconst(rb, f32, 0.0), sums, ValueRange{r});
      Value base = arith::MulIOp::create(rb, loc, r, idx(rb, Ev));
      for (int64_t c = 0; c < Ev; c += vLanes)
        vector::StoreOp::create(rb, loc, fconst(rb, vecType(vLanes), 0.0), outRows,
                                ValueRange{arith::AddIOp::create(rb, loc, base, idx(rb, c))});
      return SmallVector<Value>{};
    });
    // Causal: no row of the block sees past its last row.
    Value end = idx(ub, S);
    if (attention.getCausal())
      end = arith::MinUIOp::create(
          ub, loc, end, arith::AddIOp::create(ub, loc, firstRow, idx(ub, kRows)));
    forLoop(ub, idx(ub, 0), end, kKeyBlock, {}, [&](OpBuilder &jb, Value j0, ValueRange) {
      Value count = arith::MinUIOp::create(jb, loc, idx(jb, kKeyBlock),
                                           arith::SubIOp::create(jb, loc, end, j0));
      // k^T of the block: keysT[e][jj] = k[j0 + jj][e] (keys past the end
      // repeat the last one; their scores are masked).
      forLoop(jb, idx(jb, 0), idx(jb, kKeyBlock), 1, {}, [&](OpBuilder &pb, Value jj, ValueRange) {
        Value key = arith::MinUIOp::create(pb, loc, arith::AddIOp::create(pb, loc, j0, jj),
                                           idx(pb, S - 1));
        for (int64_t c = 0; c < E; c += qkLanes) {
          Value chunk = loadRow(pb, *k, bv, key, idx(pb, c), qkLanes);
          for (int64_t t = 0; t < qkLanes; ++t)
            memref::StoreOp::create(
                pb, loc, vector::ExtractOp::create(pb, loc, chunk, t), keysT,
                ValueRange{arith::AddIOp::create(pb, loc, idx(pb, (c + t) * kKeyBlock), jj)});
        }
        return SmallVector<Value>{};
      });
      Value countVec = vector::BroadcastOp::create(jb, loc, i32Vec, asI32(jb, count));
      forLoop(jb, idx(jb, 0), idx(jb, kRows), kGroup, {}, [&](OpBuilder &gb, Value r0, ValueRange) {
        // Scores of kGroup rows x the block: kGroup x chunks accumulators,
        // each k^T row loaded once for the group.
        SmallVector<Value> init(kGroup * chunks, fconst(gb, keyVec, 0.0));
        ValueRange acc = forLoop(
            gb, idx(gb, 0), idx(gb, E), 1, init,
            [&](OpBuilder &eb, Value e, ValueRange a) -> SmallVector<Value> {
              SmallVector<Value> kt;
              Value ktRow = arith::MulIOp::create(eb, loc, e, idx(eb, kKeyBlock));
              for (int64_t c = 0; c < chunks; ++c)
                kt.push_back(vector::LoadOp::create(
                    eb, loc, keyVec, keysT,
                    ValueRange{arith::AddIOp::create(eb, loc, ktRow, idx(eb, c * kLanes))}));
              SmallVector<Value> next;
              for (int64_t g = 0; g < kGroup; ++g) {
                Value qAt = arith::AddIOp::create(
                    eb, loc,
                    arith::MulIOp::create(eb, loc, arith::AddIOp::create(eb, loc, r0, idx(eb, g)),
                                          idx(eb, E)),
                    e);
                Value qv = vector::BroadcastOp::create(
                    eb, loc, keyVec, memref::LoadOp::create(eb, loc, qBlock, ValueRange{qAt}));
                for (int64_t c = 0; c < chunks; ++c)
                  next.push_back(vector::FMAOp::create(eb, loc, qv, kt[size_t(c)],
                                                       a[size_t(g * chunks + c)]));
              }
              return next;
            });
        Value scaleVec = fconst(gb, keyVec, scale);
        Value minusInfVec = fconst(gb, keyVec, minusInf);
        for (int64_t g = 0; g < kGroup; ++g) {
          Value r = arith::AddIOp::create(gb, loc, r0, idx(gb, g));
          Value row = rowAt(gb, r);
          Value rowVec = vector::BroadcastOp::create(gb, loc, i32Vec, asI32(gb, row));
          Value rowMax = fconst(gb, f32, minusInf);
          SmallVector<Value> s;
          for (int64_t c = 0; c < chunks; ++c) {
            Value x = arith::MulFOp::create(gb, loc, acc[size_t(g * chunks + c)], scaleVec);
            Value local = arith::AddIOp::create(
                gb, loc, laneIndex,
                vector::BroadcastOp::create(gb, loc, i32Vec,
                                            arith::ConstantIntOp::create(gb, loc, gb.getI32Type(), c * kLanes)));
            Value keep = arith::CmpIOp::create(gb, loc, arith::CmpIPredicate::slt, local, countVec);
            if (attention.getCausal()) {
              Value key = arith::AddIOp::create(
                  gb, loc, local, vector::BroadcastOp::create(gb, loc, i32Vec, asI32(gb, j0)));
              keep = arith::AndIOp::create(
                  gb, loc, keep,
                  arith::CmpIOp::create(gb, loc, arith::CmpIPredicate::sle, key, rowVec));
            }
            x = arith::SelectOp::create(gb, loc, keep, x, minusInfVec);
            s.push_back(x);
          }
          if (mask) {
            // The mask, key by key: through the scores buffer.
            // (Row g's own part of the buffer: the rows before it hold
            // their weights there already.)
            for (int64_t c = 0; c < chunks; ++c)
              vector::StoreOp::create(gb, loc, s[size_t(c)], scores,
                                      ValueRange{idx(gb, g * kKeyBlock + c * kLanes)});
            forLoop(gb, idx(gb, 0), count, 1, {}, [&](OpBuilder &mb, Value jj, ValueRange) {
              Value key = arith::AddIOp::create(mb, loc, j0, jj);
              Value m = memref::LoadOp::create(
                  mb, loc, entry->getArgument(mask->first),
                  ValueRange{applyExpr(mb, loc, mask->second, ValueRange{bv, row, key})});
              Value at = arith::AddIOp::create(mb, loc, idx(mb, g * kKeyBlock), jj);
              Value x = memref::LoadOp::create(mb, loc, scores, ValueRange{at});
              if (isa<FloatType>(m.getType())) {
                x = arith::AddFOp::create(mb, loc, x, widenToF32(mb, loc, m));
              } else { // booleans are i8 in memory: nonzero keeps the score
                Value keepIt = arith::CmpIOp::create(
                    mb, loc, arith::CmpIPredicate::ne, m,
                    arith::ConstantIntOp::create(mb, loc, m.getType(), 0));
                x = arith::SelectOp::create(mb, loc, keepIt, x, fconst(mb, f32, minusInf));
              }
              memref::StoreOp::create(mb, loc, x, scores, ValueRange{at});
              return SmallVector<Value>{};
            });
            for (int64_t c = 0; c < chunks; ++c)
              s[size_t(c)] = vector::LoadOp::create(
                  gb, loc, keyVec, scores, ValueRange{idx(gb, g * kKeyBlock + c * kLanes)});
          }
          for (int64_t c = 0; c < chunks; ++c)
            rowMax = arith::MaximumFOp::create(
                gb, loc, rowMax,
                vector::ReductionOp::create(gb, loc, vector::CombiningKind::MAXIMUMF, s[size_t(c)]));
          Value oldMax = memref::LoadOp::create(gb, loc, maxes, ValueRange{r});
          Value newMax = arith::MaximumFOp::create(gb, loc, oldMax, rowMax);
          // Nothing seen but -inf (masked keys): exponents against 0, so
          // the weights are 0 and not NaN; a row masked throughout ends as
          // 0 / 0, NaN, as PyTorch's.
          Value noneYet = arith::CmpFOp::create(gb, loc, arith::CmpFPredicate::OEQ, newMax,
                                                fconst(gb, f32, minusInf));
          Value base = arith::SelectOp::create(gb, loc, noneYet, fconst(gb, f32, 0.0), newMax);
          Value rescale = math::ExpOp::create(gb, loc, arith::SubFOp::create(gb, loc, oldMax, base));
          Value baseVec = vector::BroadcastOp::create(gb, loc, keyVec, base);
          Value blockSum = fconst(gb, keyVec, 0.0);
          for (int64_t c = 0; c < chunks; ++c) {
            Value p = math::ExpOp::create(gb, loc, arith::SubFOp::create(gb, loc, s[size_t(c)], baseVec));
            blockSum = arith::AddFOp::create(gb, loc, blockSum, p);
            vector::StoreOp::create(gb, loc, p, scores,
                                    ValueRange{idx(gb, g * kKeyBlock + c * kLanes)});
          }
          Value sum = arith::AddFOp::create(
              gb, loc,
              arith::MulFOp::create(gb, loc, memref::LoadOp::create(gb, loc, sums, ValueRange{r}),
                                    rescale),
              vector::ReductionOp::create(gb, loc, vector::CombiningKind::ADD, blockSum));
          memref::StoreOp::create(gb, loc, sum, sums, ValueRange{r});
          memref::StoreOp::create(gb, loc, newMax, maxes, ValueRange{r});
          // Rescale the row's output before this block's weights go in.
          Value rescaleVec = vector::BroadcastOp::create(gb, loc, vecType(vLanes), rescale);
          Value outBase = arith::MulIOp::create(gb, loc, r, idx(gb, Ev));
          for (int64_t c = 0; c < Ev; c += vLanes) {
            Value at = arith::AddIOp::create(gb, loc, outBase, idx(gb, c));
            Value o = vector::LoadOp::create(gb, loc, vecType(vLanes), outRows, ValueRange{at});
            vector::StoreOp::create(gb, loc, arith::MulFOp::create(gb, loc, o, rescaleVec), outRows,
                                    ValueRange{at});
          }
        }
        // out[g] += p[g][jj] v[jj]: the group's output rows in registers,
        // each row of v loaded once for the group.
        const int64_t vChunks = Ev / vLanes;
        SmallVector<Value> outInit;
        for (int64_t g = 0; g < kGroup; ++g)
          for (int64_t c = 0; c < vChunks; ++c)
            outInit.push_back(vector::LoadOp::create(
                gb, loc, vecType(vLanes), outRows,
                ValueRange{arith::AddIOp::create(
                    gb, loc,
                    arith::MulIOp::create(gb, loc, arith::AddIOp::create(gb, loc, r0, idx(gb, g)),
                                          idx(gb, Ev)),
                    idx(gb, c * vLanes))}));
        ValueRange outAcc = forLoop(
            gb, idx(gb, 0), count, 1, outInit,
            [&](OpBuilder &vb, Value jj, ValueRange o) -> SmallVector<Value> {
              Value key = arith::AddIOp::create(vb, loc, j0, jj);
              SmallVector<Value> vRow;
              for (int64_t c = 0; c < vChunks; ++c)
                vRow.push_back(loadRow(vb, *v, bv, key, idx(vb, c * vLanes), vLanes));
              SmallVector<Value> next;
              for (int64_t g = 0; g < kGroup; ++g) {
                Value p = memref::LoadOp::create(
                    vb, loc, scores,
                    ValueRange{arith::AddIOp::create(vb, loc, idx(vb, g * kKeyBlock), jj)});
                Value pv = vector::BroadcastOp::create(vb, loc, vecType(vLanes), p);
                for (int64_t c = 0; c < vChunks; ++c)
                  next.push_back(vector::FMAOp::create(vb, loc, pv, vRow[size_t(c)],
                                                       o[size_t(g * vChunks + c)]));
              }
              return next;
            });
        for (int64_t g = 0; g < kGroup; ++g)
          for (int64_t c = 0; c < vChunks; ++c)
            vector::StoreOp::create(
                gb, loc, outAcc[size_t(g * vChunks + c)], outRows,
                ValueRange{arith::AddIOp::create(
                    gb, loc,
                    arith::MulIOp::create(gb, loc, arith::AddIOp::create(gb, loc, r0, idx(gb, g)),
                                          idx(gb, Ev)),
                    idx(gb, c * vLanes))});
        return SmallVector<Value>{};
      });
      return SmallVector<Value>{};
    });
    // The block's rows of results, out / l; rows past L are not stored.
    Value rows = arith::MinUIOp::create(ub, loc, idx(ub, kRows),
                                        arith::SubIOp::create(ub, loc, idx(ub, L), firstRow));
    forLoop(ub, idx(ub, 0), rows, 1, {}, [&](OpBuilder &rb, Value r, ValueRange) {
      Value inverse = arith::DivFOp::create(rb, loc, fconst(rb, f32, 1.0),
                                            memref::LoadOp::create(rb, loc, sums, ValueRange{r}));
      Value inverseVec = vector::BroadcastOp::create(rb, loc, vecType(vLanes), inverse);
      Value outBase = arith::MulIOp::create(rb, loc, r, idx(rb, Ev));
      Value resultBase = arith::MulIOp::create(
          rb, loc,
          arith::AddIOp::create(rb, loc, arith::MulIOp::create(rb, loc, bv, idx(rb, L)),
                                arith::AddIOp::create(rb, loc, firstRow, r)),
          idx(rb, Ev));
      for (int64_t c = 0; c < Ev; c += vLanes) {
        Value o = vector::LoadOp::create(rb, loc, vecType(vLanes), outRows,
                                         ValueRange{arith::AddIOp::create(rb, loc, outBase, idx(rb, c))});
        o = arith::MulFOp::create(rb, loc, o, inverseVec);
        if (stored != f32)
          o = arith::TruncFOp::create(rb, loc, VectorType::get({vLanes}, stored), o);
        vector::StoreOp::create(rb, loc, o, output,
                                ValueRange{arith::AddIOp::create(rb, loc, resultBase, idx(rb, c))});
      }
      return SmallVector<Value>{};
    });
    return SmallVector<Value>{};
  });
  for (Value buffer : {qBlock, keysT, outRows})
    memref::DeallocOp::create(b, loc, buffer);
  func::ReturnOp::create(b, loc);
  return func;
}
