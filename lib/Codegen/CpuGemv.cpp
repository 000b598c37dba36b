//===- CpuGemv.cpp - a one-row product against a transposed weight --------===//
//
// A linear layer at batch 1 (`x [1, K] x W^T`, W stored [N, K]) is a
// matrix-vector product. The GEMM form would pack W's columns, striding K
// floats per element. Here each outer iteration takes 4 rows of W and
// reads them contiguously: per step of `lanes` k, one vector of x and one
// of each row, one FMA each; a horizontal sum per row at the end, the k
// tail scalar, then the epilogue (bias, activation) per output.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kiln;

namespace {
constexpr int64_t kRows = 4;
} // namespace

FailureOr<func::FuncOp> kiln::buildCpuGemvFunction(KernelOp kernel, Operation *root,
                                                   const Gemm &gemm, OpBuilder &builder,
                                                   StringRef name, int64_t lanes) {
  if (!isa<MatmulOp>(root) || gemm.batch != 1 || gemm.m != 1 || !gemm.aAccess ||
      !gemm.bAccess || gemm.k < lanes)
    return func::FuncOp();
  MLIRContext *ctx = builder.getContext();
  AffineExpr d1 = getAffineDimExpr(1, ctx), d2 = getAffineDimExpr(2, ctx);
  // A[0, k] at k (row 0 of a row-major A); B[k, j] at j * K + k (W's rows),
  // over the ranges of (b, row, col) each reader is called with.
  auto same = [](AffineExpr a, AffineExpr b, ArrayRef<int64_t> bounds) {
    return simplifyWithBounds(a, bounds) == simplifyAffineExpr(b, 3, 0);
  };
  auto arg = [&](unsigned n) { return kernel.getBody().front().getArgument(n); };
  // (The batch and A's row are 0: one each.)
  AffineExpr d0 = getAffineDimExpr(0, ctx), zero = getAffineConstantExpr(0, ctx);
  if (!same(gemm.aAccess->second.replace(d0, zero).replace(d1, zero), d2, {1, 1, gemm.k}) ||
      !same(gemm.bAccess->second.replace(d0, zero), d2 * gemm.k + d1, {1, gemm.k, gemm.n}) ||
      !getElementTypeOrSelf(arg(gemm.aAccess->first).getType()).isF32() ||
      !getElementTypeOrSelf(arg(gemm.bAccess->first).getType()).isF32())
    return func::FuncOp();

  Location loc = kernel.getLoc();
  Type f32 = Float32Type::get(ctx);
  VectorType vec = VectorType::get({lanes}, f32);
  const int64_t K = gemm.k, N = gemm.n;
  const int64_t units = (N + kRows - 1) / kRows, whole = K / lanes * lanes;
  func::FuncOp func = createFlatKernelFunction(kernel, builder, name, N * K, units);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };
  Value x = entry->getArgument(gemm.aAccess->first);
  Value w = entry->getArgument(gemm.bAccess->first);
  bool failed = false;
  scf::ForOp::create(b, loc, idx(b, 0), idx(b, units), idx(b, 1), ValueRange{},
      [&](OpBuilder &ub, Location, Value unit, ValueRange) {
        Value j0 = arith::MulIOp::create(ub, loc, unit, idx(ub, kRows));
        // Rows past N read row N - 1 and are never stored.
        SmallVector<Value> rowStart;
        for (int64_t r = 0; r < kRows; ++r) {
          Value j = arith::MinUIOp::create(
              ub, loc, arith::AddIOp::create(ub, loc, j0, idx(ub, r)), idx(ub, N - 1));
          rowStart.push_back(arith::MulIOp::create(ub, loc, j, idx(ub, K)));
        }
        SmallVector<Value> zeros(kRows, floatConstant(ub, loc, vec, 0.0));
        auto sweep = scf::ForOp::create(ub, loc, idx(ub, 0), idx(ub, whole), idx(ub, lanes), zeros,
            [&](OpBuilder &kb, Location, Value k, ValueRange acc) {
              Value xv = vector::LoadOp::create(kb, loc, vec, x, ValueRange{k});
              SmallVector<Value> next;
              for (int64_t r = 0; r < kRows; ++r) {
                Value wv = vector::LoadOp::create(
                    kb, loc, vec, w, ValueRange{arith::AddIOp::create(kb, loc, rowStart[r], k)});
                next.push_back(vector::FMAOp::create(kb, loc, wv, xv, acc[r]));
              }
              scf::YieldOp::create(kb, loc, next);
            });
        SmallVector<Value> sums;
        for (int64_t r = 0; r < kRows; ++r)
          sums.push_back(vector::ReductionOp::create(ub, loc, vector::CombiningKind::ADD,
                                                     sweep.getResult(r)));
        if (whole < K) {
          auto tail = scf::ForOp::create(ub, loc, idx(ub, whole), idx(ub, K), idx(ub, 1), sums,
              [&](OpBuilder &kb, Location, Value k, ValueRange acc) {
                Value xs = memref::LoadOp::create(kb, loc, x, ValueRange{k});
                SmallVector<Value> next;
                for (int64_t r = 0; r < kRows; ++r) {
                  Value ws = memref::LoadOp::create(
                      kb, loc, w, ValueRange{arith::AddIOp::create(kb, loc, rowStart[r], k)});
                  next.push_back(math::FmaOp::create(kb, loc, ws, xs, acc[r]));
                }
                scf::YieldOp::create(kb, loc, next);
              });
          sums.assign(tail.getResults().begin(), tail.getResults().end());
        }
        for (int64_t r = 0; r < kRows; ++r) {
          Value j = arith::AddIOp::create(ub, loc, j0, idx(ub, r));
          Value inside =
              arith::CmpIOp::create(ub, loc, arith::CmpIPredicate::ult, j, idx(ub, N));
          auto store = scf::IfOp::create(ub, loc, inside, /*withElseRegion=*/false);
          OpBuilder sb = OpBuilder::atBlockBegin(&store.getThenRegion().front());
          emitGemmEpilogueAt(sb, loc, kernel, root, entry, sums[r],
                             ValueRange{idx(sb, 0), idx(sb, 0), j}, {1, 1, N}, gemm.resultIndex,
                             failed);
        }
        scf::YieldOp::create(ub, loc);
      });
  func::ReturnOp::create(b, loc);
  if (failed) {
    func.erase();
    return failure();
  }
  return func;
}
