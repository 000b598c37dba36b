//===- CascadeLoop.cpp - reduction loops of bounded trip count ------------===//
//
// A reduction over N elements as nested loops of at most `block` iterations
// each. Each level starts from the identity and is folded into the level
// above, so an f32 sum adds numbers of similar size (PyTorch's cascade sum:
// 2^32 ones sum to 2^32, not to the 2^24 where a single f32 accumulator
// stops growing), and no single loop runs more than `block` times. Every
// loop has a static trip count of at least one: a zero-trip loop with
// iter_args miscompiles to SPIR-V (TOOLCHAIN.md).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilding.h"
#include "kiln/Codegen/KernelToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <functional>

using namespace mlir;
using namespace kiln;

namespace {
struct Cascade {
  Location loc;
  int64_t block;
  function_ref<SmallVector<Value>(OpBuilder &)> identity;
  function_ref<SmallVector<Value>(OpBuilder &, Value, ValueRange)> step;
  function_ref<SmallVector<Value>(OpBuilder &, ValueRange, ValueRange)> combine;

  Value index(OpBuilder &b, int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  /// The reduction of elements [base, base + count), count >= 1, starting
  /// from `inits`.
  SmallVector<Value> build(OpBuilder &b, Value base, int64_t count, ValueRange inits) {
    if (count <= block) {
      auto loop = scf::ForOp::create(
          b, loc, index(b, 0), index(b, count), index(b, 1), inits,
          [&](OpBuilder &fb, Location, Value iv, ValueRange acc) {
            Value at = base ? arith::AddIOp::create(fb, loc, base, iv).getResult() : iv;
            scf::YieldOp::create(fb, loc, step(fb, at, acc));
          });
      return SmallVector<Value>(loop.getResults());
    }
    // Sub-blocks of block^k elements, so the outer loop runs at most
    // `block` times; the remainder is one more (smaller) cascade.
    int64_t sub = block;
    while ((count + sub - 1) / sub > block)
      sub *= block;
    int64_t full = count / sub, tail = count % sub;
    auto loop = scf::ForOp::create(
        b, loc, index(b, 0), index(b, full), index(b, 1), inits,
        [&](OpBuilder &fb, Location, Value iv, ValueRange acc) {
          Value start = arith::MulIOp::create(fb, loc, iv, index(fb, sub));
          if (base)
            start = arith::AddIOp::create(fb, loc, base, start);
          SmallVector<Value> part = build(fb, start, sub, identity(fb));
          scf::YieldOp::create(fb, loc, combine(fb, acc, part));
        });
    SmallVector<Value> acc(loop.getResults());
    if (tail == 0)
      return acc;
    Value start = index(b, full * sub);
    if (base)
      start = arith::AddIOp::create(b, loc, base, start);
    return combine(b, acc, build(b, start, tail, identity(b)));
  }
};
} // namespace

SmallVector<Value> kiln::buildCascadeLoop(
    OpBuilder &b, Location loc, int64_t count, int64_t block,
    function_ref<SmallVector<Value>(OpBuilder &)> identity,
    function_ref<SmallVector<Value>(OpBuilder &, Value, ValueRange)> step,
    function_ref<SmallVector<Value>(OpBuilder &, ValueRange, ValueRange)> combine) {
  assert(count >= 1 && block >= 2 && "a cascade needs work and blocks of two or more");
  Cascade cascade{loc, block, identity, step, combine};
  return cascade.build(b, Value(), count, identity(b));
}

int64_t kiln::loopIterationsPerInvocation(Operation *root) {
  // Loops nested in loops multiply; loops one after another add. A loop
  // without static bounds counts as unbounded.
  std::function<int64_t(Region &)> regionCost;
  std::function<int64_t(Operation &)> opCost = [&](Operation &op) -> int64_t {
    int64_t inside = 0;
    for (Region &region : op.getRegions())
      inside = std::max(inside, regionCost(region)); // an if's two branches: the larger
    auto loop = dyn_cast<scf::ForOp>(op);
    if (!loop)
      return inside;
    std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()),
                           ub = getConstantIntValue(loop.getUpperBound()),
                           st = getConstantIntValue(loop.getStep());
    if (!lb || !ub || !st || *st <= 0)
      return INT64_MAX;
    int64_t trips = std::max<int64_t>(0, (*ub - *lb + *st - 1) / *st), total;
    if (__builtin_mul_overflow(trips, 1 + inside, &total))
      return INT64_MAX;
    return total;
  };
  regionCost = [&](Region &region) -> int64_t {
    int64_t total = 0;
    for (Block &block : region)
      for (Operation &op : block)
        if (__builtin_add_overflow(total, opCost(op), &total))
          return INT64_MAX;
    return total;
  };
  return opCost(*root);
}
