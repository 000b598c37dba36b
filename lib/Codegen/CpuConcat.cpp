//===- CpuConcat.cpp - a concatenation written input by input on the CPU --===//
//
// A kernel ending in a concat (SqueezeNet's fire modules: two convolutions'
// bias and ReLU, joined along the channels) as loops over each input's own
// elements instead of one loop over the result that evaluates every input
// per element and selects one. The outer loop runs over rows (the
// coordinates before the axis, and the axis); a row belongs to one input,
// chosen once per row, and its inner loop computes that input's values
// straight into their place, with the reads' indices simplified by the
// loops' ranges, so LLVM vectorizes it.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace kiln;

FailureOr<func::FuncOp> kiln::buildCpuConcatFunction(KernelOp kernel, OpBuilder &builder,
                                                     StringRef name) {
  Operation *yield = kernel.getBody().front().getTerminator();
  if (yield->getNumOperands() != 1)
    return func::FuncOp();
  auto concat = yield->getOperand(0).getDefiningOp<ConcatOp>();
  if (!concat)
    return func::FuncOp();
  for (Operation &op : kernel.getBody().front().without_terminator())
    if (op.hasTrait<GuardedView>() && &op != concat.getOperation())
      return func::FuncOp();
  ArrayRef<int64_t> y = cast<RankedTensorType>(concat.getType()).getShape();
  const int64_t axis = concat.getAxisAttr().getInt();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= y[d];
  for (size_t d = axis + 1; d < y.size(); ++d)
    inner *= y[d];
  const int64_t total = y[axis];
  if (outer * total * inner == 0)
    return func::FuncOp();

  Location loc = kernel.getLoc();
  MLIRContext *ctx = builder.getContext();
  func::FuncOp func =
      createFlatKernelFunction(kernel, builder, name, outer * total * inner, outer * total);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };
  Value output = entry->getArgument(kernel.getInputs().size());
  AffineExpr o = getAffineDimExpr(0, ctx), c = getAffineDimExpr(1, ctx),
             p = getAffineDimExpr(2, ctx);
  bool failed = false;

  // Row (o, channel) of input `k`, whose rows start at `offset` along the axis.
  auto writeRow = [&](OpBuilder &rb, Value input, int64_t size, int64_t offset, Value row,
                      Value channel) {
    AffineExpr index = (o * size + c) * inner + p;
    SmallVector<int64_t> bounds = {outer, size, inner};
    Value local = arith::SubIOp::create(rb, loc, channel, idx(rb, offset));
    scf::ForOp::create(rb, loc, idx(rb, 0), idx(rb, inner), idx(rb, 1), ValueRange{},
        [&](OpBuilder &ib, Location, Value at, ValueRange) {
          SmallVector<Value> coords = {row, local, at};
          FlatEvaluator evaluator(kernel, 3);
          evaluator.collect(input, index);
          SmallVector<Value> loads;
          for (auto [arg, expr] : evaluator.getAccesses())
            loads.push_back(memref::LoadOp::create(
                ib, loc, entry->getArgument(arg),
                ValueRange{applyExpr(ib, loc, simplifyWithBounds(expr, bounds), coords)}));
          Value v = evaluator.emit(ib, input, index, loads, failed, coords);
          Value out = applyExpr(ib, loc, (o * total + c) * inner + p,
                                ValueRange{row, channel, at});
          memref::StoreOp::create(ib, loc, v, output, ValueRange{out});
          scf::YieldOp::create(ib, loc);
        });
  };
  scf::ForOp::create(b, loc, idx(b, 0), idx(b, outer * total), idx(b, 1), ValueRange{},
      [&](OpBuilder &rb, Location, Value unit, ValueRange) {
        Value row = arith::DivUIOp::create(rb, loc, unit, idx(rb, total));
        Value channel = arith::RemUIOp::create(rb, loc, unit, idx(rb, total));
        // A chain of ifs on the channel: the row's input.
        OpBuilder at = rb;
        int64_t offset = 0;
        auto inputs = concat.getInputs();
        for (size_t k = 0; k < inputs.size(); ++k) {
          int64_t size = cast<RankedTensorType>(inputs[k].getType()).getShape()[axis];
          if (k + 1 == inputs.size()) {
            writeRow(at, inputs[k], size, offset, row, channel);
            break;
          }
          Value mine = arith::CmpIOp::create(at, loc, arith::CmpIPredicate::ult, channel,
                                             idx(at, offset + size));
          auto choice = scf::IfOp::create(at, loc, mine, /*withElseRegion=*/true);
          OpBuilder then = OpBuilder::atBlockBegin(&choice.getThenRegion().front());
          writeRow(then, inputs[k], size, offset, row, channel);
          at = OpBuilder::atBlockBegin(&choice.getElseRegion().front());
          offset += size;
        }
        scf::YieldOp::create(rb, loc);
      });
  func::ReturnOp::create(b, loc);
  if (failed) {
    func.erase();
    return failure();
  }
  return func;
}
