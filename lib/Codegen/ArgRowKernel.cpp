//===- ArgRowKernel.cpp - argmax / argmin over long rows on a GPU ---------===//
//
// The flat lowering gives each result one work item that walks the whole
// reduced range: slow on a GPU, and on llvmpipe, whose loops stop after
// 65535 iterations, impossible past that length. Here a workgroup takes a
// result: each work item keeps the best (value, position) of its strided
// columns, then a tree in workgroup memory combines them. Positions decide
// ties, so the first occurrence wins as in PyTorch, and NaN beats every
// number.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilding.h"
#include "kiln/Codegen/KernelToLinalg.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;

namespace {
/// Shorter reductions stay one work item's loop (no barriers, no tree).
constexpr int64_t kMinColumns = 2048;
constexpr int64_t kDefaultWorkgroup = 256;

int64_t reducedCount(ArgReduceOp op) {
  ArrayRef<int64_t> in = cast<RankedTensorType>(op.getInput().getType()).getShape();
  int64_t count = 1;
  for (int64_t axis : op.getAxes())
    count *= in[axis];
  return count;
}

/// The workgroup size for `count` columns: a power of two, large enough that
/// each work item's loop fits the device's budget; 0 if none fits.
int64_t workgroupFor(int64_t count, const DeviceLimits &limits) {
  int64_t size = kDefaultWorkgroup;
  if (limits.maxLoopIterations > 0)
    size = std::max<int64_t>(size, int64_t(llvm::PowerOf2Ceil(uint64_t(
                                       llvm::divideCeil(count, limits.maxLoopIterations)))));
  int64_t largest = int64_t(llvm::bit_floor(uint64_t(std::min<int64_t>(
      limits.maxWorkgroupInvocations, limits.sharedMemoryBytes / 8))));
  size = std::min<int64_t>(size, largest);
  if (size < limits.subgroupSize)
    return 0;
  if (limits.maxLoopIterations > 0 &&
      int64_t(llvm::divideCeil(count, size)) > limits.maxLoopIterations)
    return 0;
  return size;
}

/// Whether (b, ib) beats (a, ia) for `kind`: NaN first, then the strictly
/// better value, then on equal values the earlier position. A position at
/// or past `count` marks a work item that saw no column.
Value beats(OpBuilder &b, Location loc, ReduceKind kind, Value a, Value ia, Value bv, Value ib,
            Value count) {
  auto cmpi = [&](arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y).getResult();
  };
  auto cmpf = [&](arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y).getResult();
  };
  auto andi = [&](Value x, Value y) { return arith::AndIOp::create(b, loc, x, y).getResult(); };
  auto ori = [&](Value x, Value y) { return arith::OrIOp::create(b, loc, x, y).getResult(); };
  Value earlier = cmpi(arith::CmpIPredicate::ult, ib, ia);
  Value aNaN = cmpf(arith::CmpFPredicate::UNO, a, a);
  Value bNaN = cmpf(arith::CmpFPredicate::UNO, bv, bv);
  Value aNumber = cmpf(arith::CmpFPredicate::ORD, a, a);
  Value better = cmpf(kind == ReduceKind::max ? arith::CmpFPredicate::OGT
                                              : arith::CmpFPredicate::OLT,
                      bv, a);
  Value equal = cmpf(arith::CmpFPredicate::OEQ, bv, a);
  Value rule = ori(ori(andi(bNaN, ori(aNumber, andi(aNaN, earlier))), better),
                   andi(equal, earlier));
  Value aValid = cmpi(arith::CmpIPredicate::ult, ia, count);
  Value bValid = cmpi(arith::CmpIPredicate::ult, ib, count);
  Value aInvalid = arith::XOrIOp::create(b, loc, aValid,
                                         arith::ConstantIntOp::create(b, loc, 1, 1));
  return andi(bValid, ori(aInvalid, rule));
}
} // namespace

bool kiln::isLongArgReduction(KernelOp kernel, const DeviceLimits &limits) {
  ArgReduceOp arg;
  for (Operation &op : kernel.getBody().front()) {
    if (op.hasTrait<GuardedView>() || op.hasTrait<Contraction>() || isa<ReduceOp, Pool2dOp>(op))
      return false;
    if (auto a = dyn_cast<ArgReduceOp>(op)) {
      if (arg)
        return false;
      arg = a;
    }
  }
  if (!arg)
    return false;
  int64_t count = reducedCount(arg);
  bool overBudget = limits.maxLoopIterations > 0 && count > limits.maxLoopIterations;
  return (count >= kMinColumns || overBudget) && workgroupFor(count, limits) > 0;
}

FailureOr<func::FuncOp> kiln::buildArgRowKernelFunction(KernelOp kernel, OpBuilder &builder,
                                                         StringRef name,
                                                         const DeviceLimits &limits) {
  ArgReduceOp root;
  kernel.getBody().front().walk([&](ArgReduceOp op) { root = op; });
  MLIRContext *ctx = builder.getContext();
  Location loc = kernel.getLoc();
  ArrayRef<int64_t> in = cast<RankedTensorType>(root.getInput().getType()).getShape();
  int64_t count = reducedCount(root);
  int64_t results = std::max<int64_t>(1, root.getType().getNumElements());
  int64_t size = workgroupFor(count, limits);
  int64_t chunks = int64_t(llvm::divideCeil(count, size));
  AffineExpr d0 = getAffineDimExpr(0, ctx);

  AffineExpr inputIndex = reductionInputIndex(in, root.getAxes(), ctx);
  FlatEvaluator epilogue(kernel, 1);
  epilogue.bind(root.getResult());
  for (Value result : kernel.getBody().front().getTerminator()->getOperands())
    epilogue.collect(result, d0);

  func::FuncOp func = createFlatKernelFunction(kernel, builder, name, results * count, results);
  if (epilogue.misusedBinding()) {
    func.erase();
    return root.emitOpError("is read by its epilogue away from the iteration point"), failure();
  }
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  auto index = [&](OpBuilder &ib, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(ib, loc, v);
  };
  int64_t gridX = std::min<int64_t>(results, limits.maxWorkgroupCount[0]);
  int64_t gridY = int64_t(llvm::divideCeil(results, gridX));
  auto launch = gpu::LaunchOp::create(b, loc, index(b, gridX), index(b, gridY), index(b, 1),
                                      index(b, size), index(b, 1), index(b, 1));
  OpBuilder lb = OpBuilder::atBlockBegin(&launch.getBody().front());
  Type type = getElementTypeOrSelf(root.getInput().getType());
  if (type.isF16())
    type = Float32Type::get(ctx); // compared exactly either way; one tree type
  Type i32 = lb.getI32Type();
  auto shared = [&](Type element) {
    return memref::AllocOp::create(
        lb, loc, MemRefType::get({size}, element, AffineMap(), lb.getI64IntegerAttr(3)));
  };
  Value values = shared(type), positions = shared(i32);
  Value tid = launch.getThreadIds().x;
  Value row = launch.getBlockIds().x;
  if (gridY > 1)
    row = arith::AddIOp::create(
        lb, loc, row, arith::MulIOp::create(lb, loc, launch.getBlockIds().y, index(lb, gridX)));
  OpBuilder body = lb;
  if (gridX * gridY != results) { // uniform per workgroup: barriers stay legal
    auto guard = scf::IfOp::create(
        lb, loc, arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, row,
                                       index(lb, results)),
        /*withElseRegion=*/false);
    body = OpBuilder::atBlockBegin(&guard.getThenRegion().front());
  }

  bool failedOp = false;
  // The input at column `column` (clamped into the row) of this row. An
  // evaluator caches what it emitted: a fresh one per place it is built.
  auto element = [&](OpBuilder &eb, Value column) -> Value {
    Value clamped = arith::MinUIOp::create(eb, loc, column, index(eb, count - 1));
    FlatEvaluator inner(kernel, 2);
    inner.collect(root.getInput(), inputIndex);
    SmallVector<Value> loads;
    for (auto [argument, expr] : inner.getAccesses()) {
      Value at = affine::AffineApplyOp::create(eb, loc, AffineMap::get(2, 0, expr),
                                               ValueRange{row, clamped});
      loads.push_back(memref::LoadOp::create(eb, loc, entry->getArgument(argument), at));
    }
    Value v = inner.emit(eb, root.getInput(), inputIndex, loads, failedOp);
    if (v && v.getType() != type)
      v = arith::ExtFOp::create(eb, loc, type, v);
    return v;
  };
  auto toI32 = [&](OpBuilder &cb, Value v) {
    return arith::IndexCastOp::create(cb, loc, i32, v).getResult();
  };
  Value countI32 = arith::ConstantIntOp::create(body, loc, i32, count);

  // Each work item: its first column, then every size-th one after it.
  Value first = element(body, tid);
  if (!first) {
    func.erase();
    return failure();
  }
  Value best = first, bestAt = toI32(body, tid);
  if (chunks > 1) {
    auto loop = scf::ForOp::create(
        body, loc, index(body, 1), index(body, chunks), index(body, 1), ValueRange{best, bestAt},
        [&](OpBuilder &fb, Location, Value c, ValueRange acc) {
          Value column = arith::AddIOp::create(fb, loc, tid,
                                               arith::MulIOp::create(fb, loc, c, index(fb, size)));
          Value v = element(fb, column);
          Value at = toI32(fb, column);
          Value take = beats(fb, loc, root.getKind(), acc[0], acc[1], v, at, countI32);
          scf::YieldOp::create(fb, loc,
                               ValueRange{arith::SelectOp::create(fb, loc, take, v, acc[0]),
                                          arith::SelectOp::create(fb, loc, take, at, acc[1])});
        });
    best = loop.getResult(0);
    bestAt = loop.getResult(1);
  }
  memref::StoreOp::create(body, loc, best, values, ValueRange{tid});
  memref::StoreOp::create(body, loc, bestAt, positions, ValueRange{tid});
  gpu::BarrierOp::create(body, loc);
  // The tree: straight-line code, one barrier per level.
  for (int64_t half = size / 2; half >= 1; half /= 2) {
    auto active = scf::IfOp::create(
        body, loc, arith::CmpIOp::create(body, loc, arith::CmpIPredicate::ult, tid,
                                         index(body, half)),
        false);
    OpBuilder tb = OpBuilder::atBlockBegin(&active.getThenRegion().front());
    Value other = arith::AddIOp::create(tb, loc, tid, index(tb, half));
    Value a = memref::LoadOp::create(tb, loc, values, ValueRange{tid});
    Value ia = memref::LoadOp::create(tb, loc, positions, ValueRange{tid});
    Value bv = memref::LoadOp::create(tb, loc, values, ValueRange{other});
    Value ib = memref::LoadOp::create(tb, loc, positions, ValueRange{other});
    Value take = beats(tb, loc, root.getKind(), a, ia, bv, ib, countI32);
    memref::StoreOp::create(tb, loc, arith::SelectOp::create(tb, loc, take, bv, a), values,
                            ValueRange{tid});
    memref::StoreOp::create(tb, loc, arith::SelectOp::create(tb, loc, take, ib, ia), positions,
                            ValueRange{tid});
    gpu::BarrierOp::create(body, loc);
  }
  // Work item 0 writes the result and the epilogue's values.
  auto leader = scf::IfOp::create(
      body, loc, arith::CmpIOp::create(body, loc, arith::CmpIPredicate::eq, tid, index(body, 0)),
      false);
  OpBuilder wb = OpBuilder::atBlockBegin(&leader.getThenRegion().front());
  Value position = memref::LoadOp::create(wb, loc, positions, ValueRange{index(wb, 0)});
  Type resultType = getElementTypeOrSelf(root.getType());
  if (resultType != i32)
    position = arith::ExtSIOp::create(wb, loc, resultType, position);
  epilogue.setBinding(root.getResult(), position);
  SmallVector<Value> loads;
  for (auto [argument, expr] : epilogue.getAccesses()) {
    Value at = affine::AffineApplyOp::create(wb, loc, AffineMap::get(1, 0, expr),
                                             ValueRange{row});
    loads.push_back(memref::LoadOp::create(wb, loc, entry->getArgument(argument), at));
  }
  storeResults(wb, loc, kernel, entry, row, [&](Value result) {
    return epilogue.emit(wb, result, d0, loads, failedOp);
  });
  gpu::TerminatorOp::create(lb, loc);
  func::ReturnOp::create(b, loc);
  if (failedOp) {
    func.erase();
    return failure();
  }
  return func;
}
