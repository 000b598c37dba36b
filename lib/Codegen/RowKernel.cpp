//===- RowKernel.cpp - reductions over one iteration space, one kernel ----===//
//
// softmax, layer norm, or a sum with its prologue and epilogue are one
// kernel. The iteration space is the reductions' input seen as rows (kept
// dimensions) by columns (reduced ones). Each reduction is one phase over a
// row's columns; values computed from reduction results ("row values") are
// computed once per row and read wherever the broadcast puts them; results
// of the input's shape are written in a last phase.
//
// GPUs, wide contiguous rows: a workgroup takes a row. Each work item
// reduces its columns, then subgroup reductions and one shared-memory step
// combine the work items. Up to maxChunksInRegisters columns per work item
// stay in registers between phases (straight-line code), so each input
// element is loaded once. Where rows come in whole groups of 4 columns and
// every argument is read along them (or once per row), a work item takes 4
// columns per chunk, loaded and stored as one vector (16 bytes of f32, 8 of
// f16). Rows one subgroup covers go several to a workgroup. Otherwise (the
// CPU, narrow rows, column reductions) one loop iteration or work item
// takes a row.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilding.h"
#include "kiln/Codegen/KernelToLinalg.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <memory>

using namespace mlir;
using namespace kiln;

namespace {
/// Cascade blocks: CPU blocks are long enough to vectorize; a GPU work item
/// sees few elements, its accuracy comes from the workgroup's tree.
constexpr int64_t kCpuCascadeBlock = 4096;
constexpr int64_t kGpuCascadeBlock = 256;

struct RowInfo {
  SmallVector<ReduceOp> reductions; // in body (dependence) order
  SmallVector<int64_t> full;        // the reductions' input shape
  SmallVector<int64_t> rowShape;    // their result shape
  SmallVector<int64_t> axes;
  int64_t rows = 1, columns = 1;
  bool contiguous = true; // the reduced axes are the innermost
  llvm::SetVector<Value> rowValues; // reduction results and ops on them
};

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

/// Checks the structure fusion promises (kiln-opt can feed anything): every
/// reduction over the same input shape and axes, row values read only by
/// elementwise ops of the row shape, or of the full shape when the row shape
/// keeps the reduced dimensions.
LogicalResult analyze(KernelOp kernel, RowInfo &info) {
  Block &body = kernel.getBody().front();
  DenseSet<Value> dependents; // computed from a reduction result
  for (Operation &op : body.without_terminator()) {
    if (auto reduce = dyn_cast<ReduceOp>(op)) {
      if (!info.reductions.empty() &&
          (shapeOf(reduce.getInput()) != ArrayRef<int64_t>(info.full) ||
           reduce.getAxes() != ArrayRef<int64_t>(info.axes) ||
           shapeOf(reduce.getResult()) != ArrayRef<int64_t>(info.rowShape)))
        return reduce.emitOpError("differs in shape or axes from the kernel's first reduction");
      if (info.reductions.empty()) {
        info.full.assign(shapeOf(reduce.getInput()).begin(), shapeOf(reduce.getInput()).end());
        info.rowShape.assign(shapeOf(reduce.getResult()).begin(),
                             shapeOf(reduce.getResult()).end());
        info.axes.assign(reduce.getAxes().begin(), reduce.getAxes().end());
      }
      // (With one column per row a per-row value is also a per-element one.)
      if (info.rowValues.contains(reduce.getInput()) && info.full != info.rowShape)
        return reduce.emitOpError("reduces a per-row value");
      info.reductions.push_back(reduce);
      info.rowValues.insert(reduce.getResult());
      dependents.insert(reduce.getResult());
      continue;
    }
    if (llvm::any_of(op.getOperands(), [&](Value v) { return dependents.contains(v); })) {
      if (!op.hasTrait<Elementwise>())
        return op.emitOpError("reads a value computed from a reduction of its kernel through "
                              "a view: it would read another row's value");
      dependents.insert(op.getResult(0));
    }
    if (llvm::none_of(op.getOperands(), [&](Value v) { return info.rowValues.contains(v); }))
      continue;
    ArrayRef<int64_t> shape = shapeOf(op.getResult(0));
    bool keepdims = info.rowShape.size() == info.full.size();
    if (!op.hasTrait<Elementwise>())
      return op.emitOpError("reads a per-row value but is not elementwise");
    if (shape == ArrayRef<int64_t>(info.rowShape))
      info.rowValues.insert(op.getResult(0));
    else if (shape != ArrayRef<int64_t>(info.full) || !keepdims)
      return op.emitOpError("reads a per-row value at a shape other than the row's or the "
                            "reduction input's");
  }
  int64_t inner = static_cast<int64_t>(info.full.size());
  for (int64_t k = static_cast<int64_t>(info.axes.size()) - 1; k >= 0; --k)
    info.contiguous &= info.axes[k] == --inner;
  for (size_t d = 0; d < info.full.size(); ++d)
    (llvm::is_contained(info.axes, static_cast<int64_t>(d)) ? info.columns : info.rows) *=
        info.full[d];
  if (info.columns < 1)
    return info.reductions.front()->emitOpError("reduces an empty dimension: not supported");
  if (info.rows < 1)
    return kernel.emitOpError("has an empty result: nothing to build");
  for (Value result : body.getTerminator()->getOperands())
    if (shapeOf(result) != ArrayRef<int64_t>(info.full) &&
        shapeOf(result) != ArrayRef<int64_t>(info.rowShape))
      return kernel.emitOpError("has a result of neither the row nor the reduction input shape");
  return success();
}

/// The reduction of `v` over a subgroup, in every lane: an xor butterfly
/// of shuffles. (gpu.subgroup_reduce did not legalize to SPIR-V here, and
/// the group max/min instructions would not propagate NaN as PyTorch does.)
Value subgroupReduce(OpBuilder &b, Location loc, ReduceKind kind, Value v, int subgroupSize) {
  for (int offset = 1; offset < subgroupSize; offset *= 2) {
    Value other = gpu::ShuffleOp::create(b, loc, v, offset, subgroupSize, gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    v = reductionStep(b, loc, kind, v, other);
  }
  return v;
}

/// The state shared by both builders: the row values computed so far and
/// the evaluators that must see them.
class RowEmitter {
public:
  RowEmitter(KernelOp kernel, RowInfo &info, Block *entry, bool &failed)
      : kernel(kernel), info(info), entry(entry), failed(failed), ctx(kernel.getContext()),
        loc(kernel.getLoc()), fullIndex(reductionInputIndex(info.full, info.axes, ctx)) {}

  /// An evaluator over (row) or (row, column) that reads the row values
  /// computed so far; `persistent` ones also learn those computed later.
  FlatEvaluator &evaluator(unsigned dims, bool persistent = false) {
    owned.push_back(std::make_unique<FlatEvaluator>(kernel, dims));
    FlatEvaluator &e = *owned.back();
    for (auto &[v, computed] : rowValues) {
      e.bindRow(v);
      e.setRowValue(v, computed);
    }
    if (persistent)
      persistents.push_back(&e);
    return e;
  }

  /// `v` at `index` of `dims`, loading what the evaluator has not loaded yet.
  Value evaluate(OpBuilder &b, FlatEvaluator &e, SmallVector<Value> &loads, Value v,
                 AffineExpr index, ValueRange dims) {
    e.collect(v, index);
    ArrayRef<std::pair<unsigned, AffineExpr>> accesses = e.getAccesses();
    bool grouped = lanes > 1 && dims.size() == 2;
    for (size_t i = loads.size(); i < accesses.size(); ++i) {
      AffineExpr access = accesses[i].second;
      // A group's lanes read `lanes` consecutive elements of a grouped
      // argument (its buffer declared as vectors): one load.
      if (grouped && groupedArgs.contains(accesses[i].first))
        access = access.floorDiv(lanes);
      // Along a row's columns (dim 1, in [0, columns) in the row loops)
      // views that regroup dimensions (a residual read through a transpose)
      // read at indices linear in the column once simplified under that
      // bound: no division per element, and LLVM vectorizes the column loops.
      if (rowLoops && dims.size() == 2)
        if (std::optional<AffineExpr> run =
                simplifyWithinRun(access, 1, {info.rows, info.columns}))
          access = *run;
      Value at = affine::AffineApplyOp::create(b, loc, AffineMap::get(dims.size(), 0, access),
                                               dims);
      loads.push_back(memref::LoadOp::create(b, loc, entry->getArgument(accesses[i].first), at));
    }
    return e.emit(b, v, index, loads, failed, {}, {}, grouped ? lanes : 1);
  }

  /// The accumulator type: f16 and bf16 accumulate in f32 (as PyTorch does).
  Type accumulatorType(ReduceOp reduce) {
    Type type = getElementTypeOrSelf(reduce.getInput().getType());
    return type.isF16() || type.isBF16() ? Float32Type::get(ctx) : type;
  }

  Value widen(OpBuilder &b, Value v, Type type) {
    if (!v)
      return v;
    if (auto vector = dyn_cast<VectorType>(v.getType()))
      type = VectorType::get(vector.getShape(), type);
    return v.getType() != type ? arith::ExtFOp::create(b, loc, type, v).getResult() : v;
  }

  /// Records a reduction's total (scaled for a mean, narrowed back to its
  /// type), then computes every row value that depends on nothing else
  /// still missing, at the row `row`.
  void finishReduction(OpBuilder &b, ReduceOp reduce, Value total, Value row) {
    if (reduce.getKind() == ReduceKind::mean)
      total = arith::MulFOp::create(b, loc, total,
                                    floatConstant(b, loc, total.getType(), 1.0 / info.columns));
    Type stored = getElementTypeOrSelf(reduce.getResult().getType());
    if (total.getType() != stored)
      total = arith::TruncFOp::create(b, loc, stored, total);
    record(reduce.getResult(), total);
    for (Value v : info.rowValues) {
      if (rowValues.count(v) || v.getDefiningOp<ReduceOp>())
        continue;
      Operation *op = v.getDefiningOp();
      if (llvm::any_of(op->getOperands(), [&](Value operand) {
            return info.rowValues.contains(operand) && !rowValues.count(operand);
          }))
        continue;
      FlatEvaluator &e = evaluator(1);
      SmallVector<Value> loads;
      record(v, evaluate(b, e, loads, v, getAffineDimExpr(0, ctx), row));
    }
  }

  /// Stores the computed results `values` (by result number) at `index`.
  void store(OpBuilder &b, ArrayRef<std::pair<unsigned, Value>> values, Value index) {
    storeResults(b, loc, kernel, entry, index, [&](Value result) {
      for (auto [i, v] : values)
        if (yielded(i) == result)
          return v;
      return Value();
    });
  }

  /// Results of the full shape (written per column) and of the row shape.
  SmallVector<unsigned> elementResults, rowResults;
  void classifyResults() {
    for (auto [i, v] : llvm::enumerate(kernel.getBody().front().getTerminator()->getOperands()))
      (shapeOf(v) == ArrayRef<int64_t>(info.full) ? elementResults : rowResults).push_back(i);
  }
  Value yielded(unsigned i) { return kernel.getBody().front().getTerminator()->getOperand(i); }

  /// Stores the row-shaped results of row `row`.
  void storeRowResults(OpBuilder &b, Value row) {
    if (rowResults.empty())
      return;
    FlatEvaluator &e = evaluator(1);
    SmallVector<Value> loads;
    SmallVector<std::pair<unsigned, Value>> values;
    for (unsigned i : rowResults)
      if (Value v = evaluate(b, e, loads, yielded(i), getAffineDimExpr(0, ctx), row))
        values.push_back({i, v});
    store(b, values, row);
  }

  KernelOp kernel;
  RowInfo &info;
  Block *entry;
  bool &failed;
  MLIRContext *ctx;
  Location loc;
  AffineExpr fullIndex;

  /// One loop iteration or work item per row, its columns a loop over
  /// [0, columns) (buildRowLoops).
  bool rowLoops = false;
  /// Columns per work item and chunk (a workgroup per row): with more than
  /// one, the 2-d evaluations are vectors of that many lanes, the
  /// `groupedArgs` and full-shape results are buffers of such vectors.
  int64_t lanes = 1;
  DenseSet<unsigned> groupedArgs;

private:
  void record(Value v, Value computed) {
    rowValues[v] = computed;
    for (FlatEvaluator *e : persistents) {
      e->bindRow(v);
      e->setRowValue(v, computed);
    }
  }

  llvm::MapVector<Value, Value> rowValues;
  SmallVector<std::unique_ptr<FlatEvaluator>> owned;
  SmallVector<FlatEvaluator *> persistents;
};

/// One loop iteration (CPU) or work item per row; a cascade of loops over
/// the columns per reduction (blocks of `block` columns), one loop over
/// them for the stores. `reassociate` lets LLVM vectorize the reductions.
void buildRowLoops(OpBuilder &b, RowEmitter &em, bool reassociate, int64_t block) {
  Location loc = em.loc;
  auto index = [&](OpBuilder &ib, int64_t v) { return arith::ConstantIndexOp::create(ib, loc, v); };
  Value zero = index(b, 0), one = index(b, 1);
  scf::ParallelOp::create(
      b, loc, ValueRange{zero}, ValueRange{index(b, em.info.rows)}, ValueRange{one},
      [&](OpBuilder &pb, Location, ValueRange outer) {
        Value row = outer[0];
        for (ReduceOp reduce : em.info.reductions) {
          Type type = em.accumulatorType(reduce);
          ReduceKind kind = reduce.getKind();
          SmallVector<Value> total = buildCascadeLoop(
              pb, loc, em.info.columns, block,
              [&](OpBuilder &ib) { return SmallVector<Value>{reductionInit(ib, loc, kind, type)}; },
              [&](OpBuilder &fb, Value column, ValueRange acc) -> SmallVector<Value> {
                FlatEvaluator &e = em.evaluator(2);
                SmallVector<Value> loads;
                Value v = em.widen(fb, em.evaluate(fb, e, loads, reduce.getInput(), em.fullIndex,
                                                   ValueRange{row, column}),
                                   type);
                if (!v)
                  return SmallVector<Value>(acc);
                Value next = reductionStep(fb, loc, kind, acc[0], v);
                if (reassociate)
                  if (auto fm = dyn_cast<arith::ArithFastMathInterface>(next.getDefiningOp()))
                    next.getDefiningOp()->setAttr(
                        fm.getFastMathAttrName(),
                        arith::FastMathFlagsAttr::get(em.ctx, arith::FastMathFlags::reassoc));
                return {next};
              },
              [&](OpBuilder &cb, ValueRange acc, ValueRange part) -> SmallVector<Value> {
                return {reductionStep(cb, loc, kind, acc[0], part[0])};
              });
          em.finishReduction(pb, reduce, total[0], row);
        }
        em.storeRowResults(pb, row);
        if (em.elementResults.empty())
          return;
        scf::ForOp::create(
            pb, loc, index(pb, 0), index(pb, em.info.columns), index(pb, 1), ValueRange{},
            [&](OpBuilder &fb, Location, Value column, ValueRange) {
              FlatEvaluator &e = em.evaluator(2);
              SmallVector<Value> loads;
              Value at = affine::AffineApplyOp::create(
                  fb, loc, AffineMap::get(2, 0, em.fullIndex), ValueRange{row, column});
              SmallVector<std::pair<unsigned, Value>> values;
              for (unsigned i : em.elementResults)
                if (Value v = em.evaluate(fb, e, loads, em.yielded(i), em.fullIndex,
                                          ValueRange{row, column}))
                  values.push_back({i, v});
              em.store(fb, values, at);
              scf::YieldOp::create(fb, loc);
            });
      });
}

/// A workgroup per row (see the file comment).
void buildRowWorkgroups(OpBuilder &b, RowEmitter &em, const DeviceLimits &limits,
                        const RowKernelConfig &config) {
  Location loc = em.loc;
  RowInfo &info = em.info;
  auto index = [&](OpBuilder &ib, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(ib, loc, v);
  };
  int64_t size = config.workgroupSize, sg = limits.subgroupSize, groups = size / sg;
  const int64_t lanes = em.lanes, span = size * lanes; // columns per chunk
  int64_t chunks = (info.columns + span - 1) / span;
  bool inRegisters = chunks <= config.maxChunksInRegisters;
  // Rows one subgroup covers go several to a workgroup, a subgroup each
  // (nothing but shuffles between their work items): a workgroup of one
  // subgroup per row of 128 halves ran the f16 transformer's softmax at
  // 720 GB/s on the H200, its compute units holding as many workgroups as
  // they may but few work items.
  int64_t perGroup = 1;
  if (groups == 1 && info.rows >= 1024)
    perGroup = std::max<int64_t>(1, std::min<int64_t>(8, limits.maxWorkgroupInvocations / size));
  int64_t blocks = (info.rows + perGroup - 1) / perGroup;
  int64_t gridX = std::min<int64_t>(blocks, limits.maxWorkgroupCount[0]);
  int64_t gridY = (blocks + gridX - 1) / gridX;
  auto launch = gpu::LaunchOp::create(b, loc, index(b, gridX), index(b, gridY), index(b, 1),
                                      index(b, size * perGroup), index(b, 1), index(b, 1));
  OpBuilder lb = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value row = launch.getBlockIds().x;
  if (gridY > 1)
    row = arith::AddIOp::create(
        lb, loc, row, arith::MulIOp::create(lb, loc, launch.getBlockIds().y, index(lb, gridX)));
  if (perGroup > 1) {
    // (tid from here on: the work item within its row)
    row = arith::AddIOp::create(lb, loc, arith::MulIOp::create(lb, loc, row, index(lb, perGroup)),
                                arith::DivUIOp::create(lb, loc, tid, index(lb, size)));
    tid = arith::RemUIOp::create(lb, loc, tid, index(lb, size));
  }
  // Per reduction, one partial result per subgroup (workgroup memory).
  SmallVector<Value> partials;
  for (ReduceOp reduce : info.reductions)
    partials.push_back(memref::AllocOp::create(
        lb, loc,
        MemRefType::get({groups}, em.accumulatorType(reduce), AffineMap(),
                        lb.getI64IntegerAttr(3))));
  OpBuilder body = lb;
  // Uniform per workgroup (per subgroup with several rows, which have no
  // barriers): barriers stay legal.
  if (gridX * gridY * perGroup != info.rows) {
    auto guard = scf::IfOp::create(
        lb, loc, arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, row,
                                       index(lb, info.rows)),
        /*withElseRegion=*/false);
    body = OpBuilder::atBlockBegin(&guard.getThenRegion().front());
  }
  Value lane = arith::RemUIOp::create(body, loc, tid, index(body, sg));
  Value subgroup = arith::DivUIOp::create(body, loc, tid, index(body, sg));

  // The column a work item handles in chunk `c` (clamped into the row) and
  // whether it is real.
  // (With lanes, the first of the group's columns; rows hold whole groups.)
  auto columnOf = [&](OpBuilder &cb, Value c) -> std::pair<Value, Value> {
    Value column = arith::AddIOp::create(cb, loc, tid,
                                         arith::MulIOp::create(cb, loc, c, index(cb, size)));
    if (lanes > 1)
      column = arith::MulIOp::create(cb, loc, column, index(cb, lanes));
    Value valid = arith::CmpIOp::create(cb, loc, arith::CmpIPredicate::ult, column,
                                        index(cb, info.columns));
    Value clamped = arith::MinUIOp::create(cb, loc, column, index(cb, info.columns - lanes));
    return {clamped, valid};
  };
  struct Chunk {
    FlatEvaluator *evaluator;
    SmallVector<Value> loads;
    Value column, valid;
    bool partial;
  };
  SmallVector<Chunk> held;
  if (inRegisters)
    for (int64_t c = 0; c < chunks; ++c) {
      auto [column, valid] = columnOf(body, index(body, c));
      held.push_back({&em.evaluator(2, /*persistent=*/true), {}, column, valid,
                      (c + 1) * span > info.columns});
    }

  // The reduction operand at one chunk, the identity where the column is
  // past the row's end.
  auto term = [&](OpBuilder &tb, ReduceOp reduce, FlatEvaluator &e, SmallVector<Value> &loads,
                  Value column, Value valid, bool partial) -> Value {
    Type type = em.accumulatorType(reduce);
    Value v = em.widen(tb, em.evaluate(tb, e, loads, reduce.getInput(), em.fullIndex,
                                       ValueRange{row, column}),
                       type);
    if (!v || !partial)
      return v;
    Value init = reductionInit(tb, loc, reduce.getKind(), type);
    if (auto vector = dyn_cast<VectorType>(v.getType())) {
      // (SPIR-V selects vectors by a vector of conditions.)
      init = vector::BroadcastOp::create(tb, loc, vector, init);
      valid = vector::BroadcastOp::create(tb, loc, vector.clone(tb.getI1Type()), valid);
    }
    return arith::SelectOp::create(tb, loc, valid, v, init);
  };
  // A term into the accumulator, lane by lane.
  auto accumulate = [&](OpBuilder &ab, ReduceKind kind, Value acc, Value v) -> Value {
    if (!isa<VectorType>(v.getType()))
      return reductionStep(ab, loc, kind, acc, v);
    for (int64_t l = 0; l < lanes; ++l)
      acc = reductionStep(ab, loc, kind, acc, vector::ExtractOp::create(ab, loc, v, l));
    return acc;
  };

  for (auto [r, reduce] : llvm::enumerate(info.reductions)) {
    Type type = em.accumulatorType(reduce);
    ReduceKind kind = reduce.getKind();
    Value acc = reductionInit(body, loc, kind, type);
    if (inRegisters) {
      for (Chunk &chunk : held)
        if (Value v = term(body, reduce, *chunk.evaluator, chunk.loads, chunk.column, chunk.valid,
                           chunk.partial))
          acc = accumulate(body, kind, acc, v);
    } else {
      acc = buildCascadeLoop(
          body, loc, chunks, kGpuCascadeBlock,
          [&](OpBuilder &ib) { return SmallVector<Value>{reductionInit(ib, loc, kind, type)}; },
          [&](OpBuilder &fb, Value c, ValueRange carried) -> SmallVector<Value> {
            auto [column, valid] = columnOf(fb, c);
            FlatEvaluator &e = em.evaluator(2);
            SmallVector<Value> loads;
            Value v = term(fb, reduce, e, loads, column, valid, true);
            return {v ? reductionStep(fb, loc, kind, carried[0], v) : carried[0]};
          },
          [&](OpBuilder &cb, ValueRange carried, ValueRange part) -> SmallVector<Value> {
            return {reductionStep(cb, loc, kind, carried[0], part[0])};
          })[0];
    }
    // Subgroups reduce their work items; subgroup leaders publish; every
    // subgroup then reduces the published partials, so all work items hold
    // the total without a second barrier.
    Value total = subgroupReduce(body, loc, kind, acc, static_cast<int>(sg));
    if (groups > 1) {
      Value leader = arith::CmpIOp::create(body, loc, arith::CmpIPredicate::eq, lane,
                                           index(body, 0));
      auto publish = scf::IfOp::create(body, loc, leader, false);
      OpBuilder pb = OpBuilder::atBlockBegin(&publish.getThenRegion().front());
      memref::StoreOp::create(pb, loc, total, partials[r], ValueRange{subgroup});
      gpu::BarrierOp::create(body, loc);
      // Lane l folds the partials l, l + sg, ... (straight-line code: more
      // subgroups than lanes when the workgroup exceeds sg * sg items).
      Value partial = reductionInit(body, loc, kind, type);
      for (int64_t first = 0; first < groups; first += sg) {
        Value slot = arith::AddIOp::create(body, loc, lane, index(body, first));
        Value mine = arith::CmpIOp::create(body, loc, arith::CmpIPredicate::ult, slot,
                                           index(body, groups));
        Value clamped = arith::MinUIOp::create(body, loc, slot, index(body, groups - 1));
        Value v = memref::LoadOp::create(body, loc, partials[r], ValueRange{clamped});
        v = arith::SelectOp::create(body, loc, mine, v, reductionInit(body, loc, kind, type));
        partial = reductionStep(body, loc, kind, partial, v);
      }
      total = subgroupReduce(body, loc, kind, partial, static_cast<int>(sg));
    }
    em.finishReduction(body, reduce, total, row);
  }

  if (!em.rowResults.empty()) {
    auto first = scf::IfOp::create(
        body, loc, arith::CmpIOp::create(body, loc, arith::CmpIPredicate::eq, tid, index(body, 0)),
        false);
    OpBuilder fb = OpBuilder::atBlockBegin(&first.getThenRegion().front());
    em.storeRowResults(fb, row);
  }
  auto storeElements = [&](OpBuilder &sb, FlatEvaluator &e, SmallVector<Value> &loads,
                           Value column, Value valid, bool partial) {
    SmallVector<std::pair<unsigned, Value>> values;
    for (unsigned i : em.elementResults)
      if (Value v = em.evaluate(sb, e, loads, em.yielded(i), em.fullIndex,
                                ValueRange{row, column}))
        values.push_back({i, v});
    OpBuilder wb = sb;
    if (partial) {
      auto inside = scf::IfOp::create(sb, loc, valid, false);
      wb = OpBuilder::atBlockBegin(&inside.getThenRegion().front());
    }
    AffineExpr flat = lanes > 1 ? em.fullIndex.floorDiv(lanes) : em.fullIndex;
    Value at = affine::AffineApplyOp::create(wb, loc, AffineMap::get(2, 0, flat),
                                             ValueRange{row, column});
    em.store(wb, values, at);
  };
  if (!em.elementResults.empty()) {
    if (inRegisters) {
      for (Chunk &chunk : held)
        storeElements(body, *chunk.evaluator, chunk.loads, chunk.column, chunk.valid,
                      chunk.partial);
    } else {
      scf::ForOp::create(body, loc, index(body, 0), index(body, chunks), index(body, 1),
                         ValueRange{}, [&](OpBuilder &fb, Location, Value c, ValueRange) {
                           auto [column, valid] = columnOf(fb, c);
                           FlatEvaluator &e = em.evaluator(2);
                           SmallVector<Value> loads;
                           storeElements(fb, e, loads, column, valid, true);
                           scf::YieldOp::create(fb, loc);
                         });
    }
  }
  gpu::TerminatorOp::create(lb, loc);
}
} // namespace

bool kiln::isRowKernel(KernelOp kernel) {
  bool reduce = false;
  for (Operation &op : kernel.getBody().front()) {
    if (op.hasTrait<Contraction>() || op.hasTrait<GuardedView>() || isa<ArgReduceOp, Pool2dOp>(op))
      return false;
    reduce |= isa<ReduceOp>(op);
  }
  return reduce;
}

/// Passes over a row: one per reduction, one more for full-shape results.
static int64_t rowPhases(KernelOp kernel, const RowInfo &info) {
  bool elementResults = llvm::any_of(
      kernel.getBody().front().getTerminator()->getOperands(),
      [&](Value v) { return shapeOf(v) == ArrayRef<int64_t>(info.full); });
  return static_cast<int64_t>(info.reductions.size()) + (elementResults ? 1 : 0);
}

RowKernelConfig kiln::defaultRowKernelConfig(KernelOp kernel, const DeviceLimits &limits) {
  // A kernel the row builder will reject gets a config all the same: the
  // builder's diagnostic says what is wrong, once.
  RowInfo info;
  ScopedDiagnosticHandler quiet(kernel.getContext(), [](Diagnostic &) { return success(); });
  if (failed(analyze(kernel, info)))
    return RowKernelConfig();
  return RowKernelConfig::defaultFor(limits, info.rows, info.columns, info.contiguous,
                                     rowPhases(kernel, info));
}

/// Lanes of a grouped row kernel: 16 bytes of f32, 8 of f16.
static constexpr int64_t kRowLanes = 4;

/// Every argument read the row kernel's evaluations make, as (argument,
/// index, dims of the index): the reductions' inputs and the full-shape
/// results over (row, column), the row values bound; the row values and
/// row-shaped results over the row, the reductions' results bound.
static SmallVector<std::tuple<unsigned, AffineExpr, unsigned>>
rowKernelReads(KernelOp kernel, const RowInfo &info, AffineExpr fullIndex) {
  FlatEvaluator columns(kernel, 2), rows(kernel, 1);
  AffineExpr d0 = getAffineDimExpr(0, kernel.getContext());
  for (Value v : info.rowValues)
    columns.bindRow(v);
  for (ReduceOp reduce : info.reductions) {
    columns.collect(reduce.getInput(), fullIndex);
    rows.bindRow(reduce.getResult());
  }
  for (Value v : info.rowValues)
    if (!v.getDefiningOp<ReduceOp>())
      rows.collect(v, d0);
  for (Value result : kernel.getBody().front().getTerminator()->getOperands()) {
    if (shapeOf(result) == ArrayRef<int64_t>(info.full))
      columns.collect(result, fullIndex);
    else
      rows.collect(result, d0);
  }
  SmallVector<std::tuple<unsigned, AffineExpr, unsigned>> reads;
  for (auto [arg, index] : columns.getAccesses())
    reads.push_back({arg, index, 2});
  for (auto [arg, index] : rows.getAccesses())
    reads.push_back({arg, index, 1});
  return reads;
}

/// The arguments a workgroup-per-row kernel reads `lanes` columns at a
/// time (`reads` as rowKernelReads lists them); none when some read or
/// result does not allow groups. A grouped argument is read at a column
/// coefficient of 1 from a multiple of `lanes` and nowhere else; other
/// arguments only at indices the same for the whole group (a per-row
/// value). Groups hold f16 or f32 (bf16's buffers become integers later;
/// i1 is stored as i8).
static std::optional<DenseSet<unsigned>>
groupedArguments(KernelOp kernel, const RowInfo &info, ArrayRef<unsigned> elementResults,
                 ArrayRef<std::tuple<unsigned, AffineExpr, unsigned>> reads, int64_t lanes) {
  MLIRContext *ctx = kernel.getContext();
  auto groupable = [&](Type type) {
    auto tensor = cast<RankedTensorType>(type);
    Type element = tensor.getElementType();
    return (element.isF16() || element.isF32()) && tensor.getNumElements() % lanes == 0;
  };
  auto constantAt = [&](AffineExpr e, int64_t row, int64_t column) -> std::optional<int64_t> {
    AffineExpr c = simplifyAffineExpr(
        e.replaceDimsAndSymbols({getAffineConstantExpr(row, ctx), getAffineConstantExpr(column, ctx)},
                                {}),
        2, 0);
    if (auto constant = dyn_cast<AffineConstantExpr>(c))
      return constant.getValue();
    return std::nullopt;
  };
  DenseSet<unsigned> grouped, other;
  for (auto [arg, index, dims] : reads) {
    if (dims != 2) {
      other.insert(arg);
      continue;
    }
    std::optional<AffineExpr> run = simplifyWithinRun(index, 1, {info.rows, info.columns});
    if (!run)
      return std::nullopt;
    std::optional<int64_t> at0 = constantAt(*run, 0, 0), at1 = constantAt(*run, 0, 1);
    if (!at0 || !at1)
      return std::nullopt;
    int64_t step = *at1 - *at0;
    if (step == 0) {
      other.insert(arg);
      continue;
    }
    // Every row's first element of a group at a multiple of `lanes`.
    AffineExpr first = simplifyAffineExpr(
        run->replaceDimsAndSymbols({getAffineDimExpr(0, ctx), getAffineConstantExpr(0, ctx)}, {}) %
            lanes,
        2, 0);
    auto zero = dyn_cast<AffineConstantExpr>(first);
    if (step != 1 || !zero || zero.getValue() != 0)
      return std::nullopt;
    grouped.insert(arg);
  }
  Block &body = kernel.getBody().front();
  for (unsigned arg : grouped)
    if (other.contains(arg) || !groupable(body.getArgument(arg).getType()))
      return std::nullopt;
  for (unsigned i : elementResults)
    if (!groupable(body.getTerminator()->getOperand(i).getType()))
      return std::nullopt;
  if (grouped.empty())
    return std::nullopt;
  return grouped;
}

FailureOr<func::FuncOp> kiln::buildRowKernelFunction(KernelOp kernel, OpBuilder &builder,
                                                      StringRef name, const DeviceLimits *gpu,
                                                      const RowKernelConfig *config) {
  RowInfo info;
  if (failed(analyze(kernel, info)))
    return failure();
  func::FuncOp func = createFlatKernelFunction(kernel, builder, name, info.rows * info.columns,
                                               info.rows);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  bool failedOp = false;
  RowEmitter emitter(kernel, info, entry, failedOp);
  emitter.classifyResults();
  RowKernelConfig chosen;
  if (gpu)
    chosen = config ? *config
                    : RowKernelConfig::defaultFor(*gpu, info.rows, info.columns, info.contiguous,
                                                  rowPhases(kernel, info));
  if (gpu && chosen.workgroupPerRow) {
    if (std::string problem = chosen.check(*gpu); !problem.empty()) {
      func.erase();
      return kernel.emitOpError("row kernel configuration: ") << problem, failure();
    }
    func->setAttr("kiln.outer_size", builder.getI64IntegerAttr(info.rows));
    // Groups of columns per load and store where every row's columns come
    // in whole groups that stay in registers and every read allows them.
    int64_t groupedChunks = (info.columns + chosen.workgroupSize * kRowLanes - 1) /
                            (chosen.workgroupSize * kRowLanes);
    if (info.contiguous && info.columns % kRowLanes == 0 &&
        groupedChunks <= chosen.maxChunksInRegisters)
      if (std::optional<DenseSet<unsigned>> grouped =
              groupedArguments(kernel, info, emitter.elementResults,
                               rowKernelReads(kernel, info, emitter.fullIndex), kRowLanes)) {
        emitter.lanes = kRowLanes;
        emitter.groupedArgs = *grouped;
        // Their buffers (and the full-shape results') as vectors: the same
        // bytes.
        SmallVector<Type> args(func.getArgumentTypes());
        auto asVectors = [&](unsigned i) {
          auto flat = cast<MemRefType>(args[i]);
          args[i] = MemRefType::get({flat.getNumElements() / kRowLanes},
                                    VectorType::get({kRowLanes}, flat.getElementType()));
        };
        for (unsigned arg : *grouped)
          asVectors(arg);
        for (unsigned i : emitter.elementResults)
          asVectors(kernel.getInputs().size() + i);
        func.setType(builder.getFunctionType(args, {}));
        for (auto [i, type] : llvm::enumerate(args))
          entry->getArgument(i).setType(type);
      }
    buildRowWorkgroups(b, emitter, *gpu, chosen);
  } else {
    emitter.rowLoops = true;
    buildRowLoops(b, emitter, /*reassociate=*/!gpu, gpu ? kGpuCascadeBlock : kCpuCascadeBlock);
  }
  func::ReturnOp::create(b, kernel.getLoc());
  if (failedOp) {
    func.erase();
    return failure();
  }
  // A device that stops loops early (llvmpipe) would drop elements without
  // a word: refuse what does not fit its budget instead.
  if (gpu && gpu->maxLoopIterations > 0) {
    int64_t needed = loopIterationsPerInvocation(func);
    if (needed > gpu->maxLoopIterations) {
      func.erase();
      return kernel.emitOpError("reduces rows of ")
                 << info.columns << " elements with " << needed
                 << " loop iterations per work item; the device runs at most "
                 << gpu->maxLoopIterations
                 << " per kernel invocation: reduce in two steps (reshape the rows and "
                    "reduce twice) or run it on the CPU device",
             failure();
    }
  }
  return func;
}
