//===- KernelToLinalg.cpp - kiln.kernel -> linalg.generic on memrefs ------===//
//
// Kernels are flattened: one parallel loop over the iteration space's
// elements, with each operand's broadcast folded into its indexing map as
// floordiv/mod by constants. Flat 1-D buffers keep the later GPU mapping to
// a single grid dimension and avoid strided memref layouts.
//
//===----------------------------------------------------------------------===//

#include "kiln/Codegen/KernelToLinalg.h"
#include "kiln/Codegen/KernelConfigAttr.h"
#include "Gemm.h"
#include "KernelBuilding.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AffineExprVisitor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <numbers>

using namespace mlir;
using namespace kiln;

Type kiln::storageElementType(Type elementType) {
  if (elementType.isInteger(1))
    return IntegerType::get(elementType.getContext(), 8);
  return elementType;
}

namespace {
/// The iteration space and operand shapes after merging adjacent dimensions
/// that every operand treats alike (all operands padded to the space's rank).
struct Coalesced {
  SmallVector<int64_t> space;
  SmallVector<SmallVector<int64_t>> shapes;
};

Coalesced coalesce(ArrayRef<int64_t> space, ArrayRef<ArrayRef<int64_t>> shapes) {
  size_t rank = space.size();
  auto broadcasts = [&](size_t operand, size_t k) {
    ArrayRef<int64_t> shape = shapes[operand];
    size_t offset = rank - shape.size();
    return k < offset || shape[k - offset] == 1;
  };
  Coalesced out;
  out.shapes.resize(shapes.size());
  SmallVector<bool> previous;
  for (size_t k = 0; k < rank; ++k) {
    if (space[k] == 1)
      continue; // a size-1 dimension changes no index
    SmallVector<bool> pattern;
    for (size_t i = 0; i < shapes.size(); ++i)
      pattern.push_back(broadcasts(i, k));
    if (!out.space.empty() && pattern == previous) {
      out.space.back() *= space[k];
      for (size_t i = 0; i < shapes.size(); ++i)
        if (!pattern[i])
          out.shapes[i].back() *= space[k];
      continue;
    }
    out.space.push_back(space[k]);
    for (size_t i = 0; i < shapes.size(); ++i)
      out.shapes[i].push_back(pattern[i] ? 1 : space[k]);
    previous = pattern;
  }
  if (out.space.empty()) { // a single element
    out.space.push_back(1);
    for (auto &shape : out.shapes)
      shape.push_back(1);
  }
  return out;
}

/// The map of an operand of `shape` (same rank as `space`, 1 where it
/// broadcasts) into the iteration space.
AffineMap projectedMap(ArrayRef<int64_t> shape, ArrayRef<int64_t> space,
                       MLIRContext *ctx) {
  SmallVector<AffineExpr> exprs;
  for (size_t k = 0; k < space.size(); ++k)
    exprs.push_back(shape[k] == 1 && space[k] != 1 ? getAffineConstantExpr(0, ctx)
                                                   : getAffineDimExpr(k, ctx));
  return AffineMap::get(space.size(), 0, exprs, ctx);
}

} // namespace


bool kiln::supportsVector4(KernelOp kernel) {
  // f16 too: 8-byte groups, 4x fewer loads and stores than halves one by
  // one (bf16's buffers become integers after this form is chosen).
  auto vectorElement = [](Type t) {
    return getElementTypeOrSelf(t).isF32() || getElementTypeOrSelf(t).isF16();
  };
  ArrayRef<int64_t> space =
      cast<RankedTensorType>(kernel.getResult(0).getType()).getShape();
  bool views = llvm::any_of(kernel.getBody().front(), [](Operation &op) {
    return op.hasTrait<View>() || op.hasTrait<GuardedView>() || op.hasTrait<Reduction>() ||
           op.hasTrait<Contraction>();
  });
  return !views && !space.empty() && space.back() % 4 == 0 &&
         llvm::all_of(kernel.getInputs().getTypes(), vectorElement) &&
         llvm::all_of(kernel.getResultTypes(), vectorElement);
}

namespace {
bool readsPrefixAtLoopIndex(KernelOp kernel, int64_t iterations) {
  MLIRContext *ctx = kernel.getContext();
  FlatEvaluator evaluator(kernel);
  for (Value result : kernel.getBody().front().getTerminator()->getOperands())
    evaluator.collect(result, getAffineDimExpr(0, ctx));
  Block &body = kernel.getBody().front();
  return llvm::any_of(evaluator.getAccesses(), [&](const auto &access) {
    auto type = cast<RankedTensorType>(body.getArgument(access.first).getType());
    return access.second == getAffineDimExpr(0, ctx) && type.getNumElements() != iterations;
  });
}

/// A linalg.generic over `outputs` whose body is the kernel's results as
/// `evaluator` builds them at `index`, reading the generic's inputs (one per
/// access, in the evaluator's order).
void buildEvaluatedGeneric(OpBuilder &b, Location loc, KernelOp kernel, FlatEvaluator &evaluator,
                           ValueRange inputs, ValueRange outputs, ArrayRef<AffineMap> maps,
                           ArrayRef<utils::IteratorType> iterators, AffineExpr index,
                           bool &failedOp) {
  linalg::GenericOp::create(
      b, loc, TypeRange{}, inputs, outputs, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange scalars) {
        ValueRange loads = scalars.take_front(inputs.size());
        SmallVector<Value> yielded;
        for (auto [value, out] : llvm::zip(kernel.getBody().front().getTerminator()->getOperands(),
                                           scalars.drop_front(inputs.size()))) {
          Value v = evaluator.emit(nb, value, index, loads, failedOp);
          if (v && v.getType() != out.getType())
            v = arith::ExtUIOp::create(nb, nloc, out.getType(), v);
          yielded.push_back(v ? v : out);
        }
        linalg::YieldOp::create(nb, nloc, yielded);
      });
}

/// A CPU flat kernel whose views divide the flat index (transposes, slices
/// of regrouped dimensions) as rows of the result's last dimension: with
/// o = row * D + i, inputs read at indices linear in i (BoundedIndex.cpp), so
/// LLVM vectorizes the loop over i; the flat loop's divisions per element
/// kept it scalar (an attention head's q, sliced from a fused projection
/// and transposed: 205 us for 64K elements). None where an index stays
/// nonlinear in i or the flat form has no division.
func::FuncOp buildRowRunsFunction(KernelOp kernel, OpBuilder &builder, StringRef name,
                                  int64_t iterations, bool &failedOp) {
  MLIRContext *ctx = builder.getContext();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(kernel.getResult(0).getType()).getShape();
  if (shape.size() < 2 || shape.back() < 8 || iterations % shape.back() != 0)
    return func::FuncOp();
  const int64_t D = shape.back(), rows = iterations / D;
  FlatEvaluator flat(kernel);
  for (Value result : kernel.getBody().front().getTerminator()->getOperands())
    flat.collect(result, getAffineDimExpr(0, ctx));
  if (llvm::none_of(flat.getAccesses(),
                    [](const auto &access) { return dividesIndex(access.second); }))
    return func::FuncOp();
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  AffineExpr index = d0 * D + d1;
  FlatEvaluator evaluator(kernel, 2);
  for (Value result : kernel.getBody().front().getTerminator()->getOperands())
    evaluator.collect(result, index);
  SmallVector<AffineMap> maps;
  for (auto [arg, at] : evaluator.getAccesses()) {
    std::optional<AffineExpr> run = simplifyWithinRun(at, 1, {rows, D});
    if (!run)
      return func::FuncOp();
    maps.push_back(AffineMap::get(2, 0, *run));
  }
  Location loc = kernel.getLoc();
  func::FuncOp func = createFlatKernelFunction(kernel, builder, name, iterations, rows);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  size_t numInputs = kernel.getInputs().size();
  SmallVector<Value> inputs, outputs;
  for (auto [arg, at] : evaluator.getAccesses())
    inputs.push_back(entry->getArgument(arg));
  for (BlockArgument out : entry->getArguments().drop_front(numInputs)) {
    auto type = cast<MemRefType>(out.getType());
    outputs.push_back(memref::ExpandShapeOp::create(
        b, loc, MemRefType::get({rows, D}, type.getElementType()), out,
        ArrayRef<ReassociationIndices>{{0, 1}}));
    maps.push_back(AffineMap::getMultiDimIdentityMap(2, ctx));
  }
  buildEvaluatedGeneric(b, loc, kernel, evaluator, inputs, outputs, maps,
                        {utils::IteratorType::parallel, utils::IteratorType::parallel}, index,
                        failedOp);
  func::ReturnOp::create(b, loc);
  return func;
}

func::FuncOp buildFlatFunction(KernelOp kernel, OpBuilder &builder, StringRef name,
                               int64_t iterations, bool &failedOp) {
  MLIRContext *ctx = builder.getContext();
  Location loc = kernel.getLoc();
  FlatEvaluator evaluator(kernel);
  for (Value result : kernel.getBody().front().getTerminator()->getOperands())
    evaluator.collect(result, getAffineDimExpr(0, ctx));
  func::FuncOp func = createFlatKernelFunction(kernel, builder, name, iterations, std::max<int64_t>(1, iterations));
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);

  size_t numInputs = kernel.getInputs().size();
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (auto [arg, index] : evaluator.getAccesses()) {
    inputs.push_back(entry->getArgument(arg));
    maps.push_back(AffineMap::get(1, 0, index));
  }
  for (size_t i = 0; i < kernel.getNumResults(); ++i)
    maps.push_back(AffineMap::getMultiDimIdentityMap(1, ctx));
  buildEvaluatedGeneric(b, loc, kernel, evaluator, inputs,
                        entry->getArguments().drop_front(numInputs), maps,
                        {utils::IteratorType::parallel}, getAffineDimExpr(0, ctx), failedOp);
  func::ReturnOp::create(b, loc);
  return func;
}
/// An elementwise kernel holding pad or concat: an scf.parallel over its
/// elements whose loads are clamped into their buffers (a guarded view reads
/// every candidate, then selects), the values built by the evaluator.
func::FuncOp buildGuardedFunction(KernelOp kernel, OpBuilder &builder, StringRef name,
                                  int64_t iterations, bool &failedOp) {
  MLIRContext *ctx = builder.getContext();
  Location loc = kernel.getLoc();
  AffineExpr d0 = getAffineDimExpr(0, ctx);
  Block &body = kernel.getBody().front();
  FlatEvaluator evaluator(kernel, 1);
  for (Value result : body.getTerminator()->getOperands())
    evaluator.collect(result, d0);
  int64_t count = std::max<int64_t>(1, iterations);
  func::FuncOp func = createFlatKernelFunction(kernel, builder, name, iterations, count);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value end = arith::ConstantIndexOp::create(b, loc, count);
  scf::ParallelOp::create(
      b, loc, ValueRange{zero}, ValueRange{end}, ValueRange{one},
      [&](OpBuilder &pb, Location ploc, ValueRange ivs) {
        SmallVector<Value> loads;
        for (auto [arg, expr] : evaluator.getAccesses()) {
          Value buffer = entry->getArgument(arg);
          int64_t size = cast<MemRefType>(buffer.getType()).getNumElements();
          Value at = affine::AffineApplyOp::create(pb, ploc, AffineMap::get(1, 0, expr), ivs);
          at = arith::MaxSIOp::create(pb, ploc, at, arith::ConstantIndexOp::create(pb, ploc, 0));
          at = arith::MinSIOp::create(pb, ploc, at,
                                      arith::ConstantIndexOp::create(pb, ploc, size - 1));
          loads.push_back(memref::LoadOp::create(pb, ploc, buffer, at));
        }
        storeResults(pb, ploc, kernel, entry, ivs[0], [&](Value result) {
          return evaluator.emit(pb, result, d0, loads, failedOp, ivs, entry->getArguments());
        });
      });
  func::ReturnOp::create(b, loc);
  return func;
}

/// The input and filter values of one product term of a convolution at
/// (result element `o`, reduced element `r`): the input read is guarded, and
/// zero outside the image (padding).
std::pair<Value, Value> convOperands(OpBuilder &b, Location loc, Conv2dOp conv, Block *entry,
                                     Value o, Value r, bool &failedOp) {
  MLIRContext *ctx = b.getContext();
  std::optional<SmallVector<ConvSource, 2>> sources = convSources(conv.getInput());
  auto filter = dyn_cast<BlockArgument>(conv.getFilter());
  if (!sources || !filter) {
    conv.emitOpError("operands must be kernel inputs (fusion puts nothing in front)");
    failedOp = true;
    return {Value(), Value()};
  }
  ArrayRef<int64_t> x = conv.getInput().getType().getShape(),
                    w = conv.getFilter().getType().getShape(),
                    y = conv.getResult().getType().getShape();
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  SmallVector<AffineExpr> out = delinearize(d0, y);            // n, co, ho, wo
  SmallVector<AffineExpr> red = delinearize(d1, w.drop_front()); // ci, kh, kw
  int64_t groups = conv.getGroupsAttr().getInt(), perGroup = w[0] / groups;
  AffineExpr channel = out[1].floorDiv(perGroup) * w[1] + red[0];
  AffineExpr h = out[2] * conv.getStrides()[0] - conv.getPadding()[0] + red[1] * conv.getDilation()[0];
  AffineExpr col = out[3] * conv.getStrides()[1] - conv.getPadding()[1] + red[2] * conv.getDilation()[1];
  auto apply = [&](AffineExpr e) {
    return affine::AffineApplyOp::create(b, loc, AffineMap::get(2, 0, simplifyAffineExpr(e, 2, 0)),
                                         ValueRange{o, r})
        .getResult();
  };
  Value hv = apply(h), wv = apply(col);
  auto cmp = [&](arith::CmpIPredicate p, Value a, int64_t c) {
    return arith::CmpIOp::create(b, loc, p, a, arith::ConstantIndexOp::create(b, loc, c));
  };
  Value valid = arith::AndIOp::create(
      b, loc,
      arith::AndIOp::create(b, loc, cmp(arith::CmpIPredicate::sge, hv, 0),
                            cmp(arith::CmpIPredicate::slt, hv, x[2])),
      arith::AndIOp::create(b, loc, cmp(arith::CmpIPredicate::sge, wv, 0),
                            cmp(arith::CmpIPredicate::slt, wv, x[3])));
  // A folded concat reads every source (at a clamped index) and keeps the
  // one holding the channel: this untiled form is the rare fallback.
  Value xv, channelValue = apply(channel);
  for (const ConvSource &s : *sources) {
    Value at = apply(((out[0] * s.channels + channel - s.firstChannel) * x[2] + h) * x[3] + col);
    Value safe = arith::SelectOp::create(b, loc, valid, at, arith::ConstantIndexOp::create(b, loc, 0));
    if (sources->size() > 1)
      safe = arith::MinSIOp::create(
          b, loc, arith::MaxSIOp::create(b, loc, safe, arith::ConstantIndexOp::create(b, loc, 0)),
          arith::ConstantIndexOp::create(b, loc, x[0] * s.channels * x[2] * x[3] - 1));
    Value v = memref::LoadOp::create(b, loc, entry->getArgument(s.arg), safe);
    xv = !xv ? v
             : arith::SelectOp::create(b, loc, cmp(arith::CmpIPredicate::sge, channelValue,
                                                   s.firstChannel),
                                       v, xv)
                   .getResult();
  }
  xv = arith::SelectOp::create(b, loc, valid, xv, floatConstant(b, loc, xv.getType(), 0.0));
  Value fv = memref::LoadOp::create(
      b, loc, entry->getArgument(filter.getArgNumber()),
      apply(((out[1] * w[1] + red[0]) * w[2] + red[1]) * w[3] + red[2]));
  return {xv, fv};
}

/// A kernel rooted at a reduction or a contraction: an scf.parallel over
/// result elements (d0) around an scf.for over the reduced elements (d1)
/// carrying the accumulator from the identity, then the elementwise
/// epilogue at d0 with the accumulator bound to the contraction's result.
/// Every lowering keeps the results outside (threads on the CPU, work items
/// on GPUs). (Not linalg: a reduction generic needs a separate fill, and
/// linalg.index in a generic with floordiv/mod indexing maps crashes its
/// folder in MLIR 22.) The reduced count is at least 1: a zero-trip loop with
/// iter_args miscompiles to SPIR-V (TOOLCHAIN.md).
func::FuncOp buildContractionFunction(KernelOp kernel, Operation *root, OpBuilder &builder,
                                      StringRef name, bool &failedOp) {
  MLIRContext *ctx = builder.getContext();
  Location loc = kernel.getLoc();
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };

  // The operands read inside the loop, each at an index of (d0, d1).
  SmallVector<std::pair<Value, AffineExpr>> operands;
  // Pooling: the window coordinates that must lie inside the image.
  SmallVector<AffineExpr> windowCoords;
  SmallVector<int64_t> windowBounds;
  int64_t count = 0;
  if (isa<ReduceOp, ArgReduceOp>(root)) {
    Value input = root->getOperand(0);
    ArrayRef<int64_t> in = shapeOf(input);
    ArrayRef<int64_t> axes = isa<ReduceOp>(root) ? cast<ReduceOp>(root).getAxes()
                                                  : cast<ArgReduceOp>(root).getAxes();
    operands.push_back({input, reductionInputIndex(in, axes, ctx)});
    count = 1;
    for (int64_t axis : axes)
      count *= in[axis];
  } else if (auto pool = dyn_cast<Pool2dOp>(root)) {
    // The window element's index, unguarded: loads are clamped and the
    // padding value substituted in the loop below.
    ArrayRef<int64_t> x = shapeOf(pool.getInput());
    SmallVector<AffineExpr> out = delinearize(d0, shapeOf(pool.getResult()));
    SmallVector<AffineExpr> win = delinearize(d1, pool.getKernel());
    AffineExpr h = out[2] * pool.getStrides()[0] - pool.getPadding()[0] + win[0];
    AffineExpr w = out[3] * pool.getStrides()[1] - pool.getPadding()[1] + win[1];
    operands.push_back({pool.getInput(), ((out[0] * x[1] + out[1]) * x[2] + h) * x[3] + w});
    windowCoords = {h, w};
    windowBounds = {x[2], x[3]};
    count = pool.getKernel()[0] * pool.getKernel()[1];
  } else if (auto conv = dyn_cast<Conv2dOp>(root)) {
    ArrayRef<int64_t> w = shapeOf(conv.getFilter());
    count = w[1] * w[2] * w[3]; // loads are guarded: built in the loop below
  } else {
    auto matmul = cast<MatmulOp>(root);
    ArrayRef<int64_t> a = shapeOf(matmul.getLhs()), b = shapeOf(matmul.getRhs()),
                      c = shapeOf(matmul.getResult());
    SmallVector<AffineExpr> out = delinearize(d0, c);
    size_t batch = c.size() - 2;
    // Operand coordinates: batch dims aligned right (size 1 broadcasts).
    auto coordsOf = [&](ArrayRef<int64_t> shape, AffineExpr row, AffineExpr col) {
      SmallVector<AffineExpr> coords;
      size_t offset = batch - (shape.size() - 2);
      for (size_t j = 0; j + 2 < shape.size(); ++j)
        coords.push_back(shape[j] == 1 ? getAffineConstantExpr(0, ctx) : out[j + offset]);
      coords.push_back(row);
      coords.push_back(col);
      return coords;
    };
    operands.push_back({matmul.getLhs(), linearizeExpr(a, coordsOf(a, out[batch], d1), ctx)});
    operands.push_back({matmul.getRhs(), linearizeExpr(b, coordsOf(b, d1, out[batch + 1]), ctx)});
    count = a.back();
  }

  FlatEvaluator inner(kernel, 2);
  for (auto &[value, index] : operands)
    inner.collect(value, index);
  // The epilogue: the kernel's results at d0, the root bound to the sum.
  FlatEvaluator epilogue(kernel, 1);
  epilogue.bind(root->getResult(0));
  Block &body = kernel.getBody().front();
  for (Value result : body.getTerminator()->getOperands())
    epilogue.collect(result, d0);

  Value rootValue = root->getResult(0);
  int64_t results = std::max<int64_t>(1, cast<RankedTensorType>(rootValue.getType()).getNumElements());
  func::FuncOp func = createFlatKernelFunction(kernel, builder, name, results * count, results);
  if (count < 1 || epilogue.misusedBinding()) {
    root->emitOpError(count < 1 ? "reduces an empty dimension: not supported"
                                : "is read by its epilogue away from the iteration point");
    failedOp = true;
    return func;
  }
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  auto index = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value zero = index(0), one = index(1), resultCount = index(results), reducedCount = index(count);
  auto reduce = dyn_cast<ReduceOp>(root);
  auto pool = dyn_cast<Pool2dOp>(root);
  auto arg = dyn_cast<ArgReduceOp>(root);
  // The accumulator's type: f16 accumulates in f32 (as PyTorch does): an
  // f16 sum stops growing at 2048 and 1/count underflows for a mean.
  Type type = getElementTypeOrSelf(root->getOperand(0).getType());
  Type stored = type;
  if (type.isF16() || type.isBF16())
    type = Float32Type::get(ctx);
  auto widen = [&](OpBuilder &wb, Location wloc, Value v) -> Value {
    return v && v.getType() != type ? arith::ExtFOp::create(wb, wloc, type, v).getResult() : v;
  };
  ReduceKind kind = reduce ? reduce.getKind()
                    : pool ? pool.getKind()
                    : arg  ? arg.getKind()
                           : ReduceKind::sum;
  auto loadAll = [&](OpBuilder &lb, Location lloc, FlatEvaluator &evaluator, ValueRange dims) {
    SmallVector<Value> loads;
    for (auto [arg, expr] : evaluator.getAccesses()) {
      Value at = affine::AffineApplyOp::create(
          lb, lloc, AffineMap::get(dims.size(), 0, expr), dims);
      if (!windowCoords.empty()) { // padding: read in bounds, replaced below
        int64_t size = cast<MemRefType>(entry->getArgument(arg).getType()).getNumElements();
        at = arith::MaxSIOp::create(lb, lloc, at, arith::ConstantIndexOp::create(lb, lloc, 0));
        at = arith::MinSIOp::create(lb, lloc, at,
                                    arith::ConstantIndexOp::create(lb, lloc, size - 1));
      }
      loads.push_back(memref::LoadOp::create(lb, lloc, entry->getArgument(arg), at));
    }
    return loads;
  };
  scf::ParallelOp::create(
      b, loc, ValueRange{zero}, ValueRange{resultCount}, ValueRange{one},
      [&](OpBuilder &pb, Location ploc, ValueRange outer) {
        SmallVector<Value> inits = {reductionInit(pb, ploc, kind, type)};
        if (arg)
          inits.push_back(zero);
        auto loop = scf::ForOp::create(
            pb, ploc, zero, reducedCount, one, inits,
            [&](OpBuilder &fb, Location floc, Value red, ValueRange acc) {
              SmallVector<Value> loads = loadAll(fb, floc, inner, ValueRange{outer[0], red});
              SmallVector<Value> values;
              for (auto &[value, expr] : operands)
                values.push_back(widen(fb, floc, inner.emit(fb, value, expr, loads, failedOp,
                                                             ValueRange{outer[0], red})));
              if (auto conv = dyn_cast<Conv2dOp>(root)) {
                auto pair = convOperands(fb, floc, conv, entry, outer[0], red, failedOp);
                values = {widen(fb, floc, pair.first), widen(fb, floc, pair.second)};
              }
              if (llvm::is_contained(values, Value())) {
                scf::YieldOp::create(fb, floc, acc);
                return;
              }
              if (arg) {
                // The first strictly better element wins; NaN beats all.
                Value better = arith::CmpFOp::create(
                    fb, floc,
                    kind == ReduceKind::max ? arith::CmpFPredicate::OGT
                                            : arith::CmpFPredicate::OLT,
                    values[0], acc[0]);
                Value isNaN = arith::CmpFOp::create(fb, floc, arith::CmpFPredicate::UNO,
                                                    values[0], values[0]);
                Value hadNaN = arith::CmpFOp::create(fb, floc, arith::CmpFPredicate::UNO,
                                                     acc[0], acc[0]);
                Value newNaN = arith::AndIOp::create(
                    fb, floc, isNaN,
                    arith::XOrIOp::create(fb, floc, hadNaN,
                                          arith::ConstantIntOp::create(fb, floc, 1, 1)));
                Value take = arith::OrIOp::create(fb, floc, better, newNaN);
                scf::YieldOp::create(
                    fb, floc,
                    ValueRange{arith::SelectOp::create(fb, floc, take, values[0], acc[0]),
                               arith::SelectOp::create(fb, floc, take, red, acc[1])});
                return;
              }
              Value v = values[0];
              if (!reduce && !pool) // a contraction: the product of its two operands
                v = arith::MulFOp::create(fb, floc, values[0], values[1]);
              if (pool) {
                Value valid;
                for (auto [coord, bound] : llvm::zip(windowCoords, windowBounds)) {
                  Value c = affine::AffineApplyOp::create(
                      fb, floc, AffineMap::get(2, 0, simplifyAffineExpr(coord, 2, 0)),
                      ValueRange{outer[0], red});
                  Value inside = arith::AndIOp::create(
                      fb, floc,
                      arith::CmpIOp::create(fb, floc, arith::CmpIPredicate::sge, c,
                                            arith::ConstantIndexOp::create(fb, floc, 0)),
                      arith::CmpIOp::create(fb, floc, arith::CmpIPredicate::slt, c,
                                            arith::ConstantIndexOp::create(fb, floc, bound)));
                  valid = valid ? arith::AndIOp::create(fb, floc, valid, inside) : inside;
                }
                v = arith::SelectOp::create(fb, floc, valid, v,
                                            kind == ReduceKind::max
                                                ? reductionInit(fb, floc, kind, type)
                                                : floatConstant(fb, floc, type, 0.0));
              }
              scf::YieldOp::create(fb, floc, reductionStep(fb, floc, kind, acc[0], v));
            });
        Value result = loop.getResult(0);
        if (arg) // the position, as the i32 the result holds
          result = arith::IndexCastOp::create(
              pb, ploc, getElementTypeOrSelf(rootValue.getType()), loop.getResult(1));
        if (!arg && kind == ReduceKind::mean) // one scaling of the sum, after the loop
          result = arith::MulFOp::create(pb, ploc, result,
                                         floatConstant(pb, ploc, type, 1.0 / count));
        if (!arg && stored != type)
          result = arith::TruncFOp::create(pb, ploc, stored, result);
        epilogue.setBinding(rootValue, result);
        SmallVector<Value> loads = loadAll(pb, ploc, epilogue, ValueRange{outer[0]});
        storeResults(pb, ploc, kernel, entry, outer[0], [&](Value result) {
          return epilogue.emit(pb, result, d0, loads, failedOp);
        });
      });
  func::ReturnOp::create(b, loc);
  return func;
}
} // namespace

FailureOr<func::FuncOp> kiln::buildKernelFunction(KernelOp kernel,
                                                   OpBuilder &builder,
                                                   StringRef name,
                                                   KernelLayout layout,
                                                   const DeviceLimits *gpu) {
  // The kernel's own config, else the device's default (now recorded on it).
  FailureOr<KernelConfig> config = materializeKernelConfig(kernel, gpu);
  if (failed(config))
    return failure();
  MLIRContext *ctx = builder.getContext();
  Location loc = kernel.getLoc();
  ArrayRef<int64_t> space =
      cast<RankedTensorType>(kernel.getResult(0).getType()).getShape();
  int64_t iterations = 1;
  for (int64_t d : space)
    iterations *= d;

  if (isRowKernel(kernel))
    return buildRowKernelFunction(kernel, builder, name, gpu, &config->row);
  if (gpu && isLongArgReduction(kernel, *gpu))
    return buildArgRowKernelFunction(kernel, builder, name, *gpu);

  for (Operation &op : kernel.getBody().front())
    if (auto attention = dyn_cast<AttentionOp>(op)) {
      if (!gpu && layout == KernelLayout::Coalesced)
        return buildCpuAttentionFunction(kernel, attention, builder, name);
      attention.emitOpError("has a fused kernel on the CPU only: run kiln-decompose-attention "
                            "for this device");
      return failure();
    }

  // A kernel with a reduction or a contraction has its own loop structure.
  Operation *root = nullptr;
  for (Operation &op : kernel.getBody().front())
    if (op.hasTrait<Reduction>() || op.hasTrait<Contraction>())
      root = &op;
  // (arg_reduce has the Reduction trait too.)
  if (root && gpu && config->form == KernelConfig::Form::CoopGemm)
    return buildCoopGemmFunction(kernel, root, builder, name, *gpu, config->coop);
  if (root && gpu && config->form == KernelConfig::Form::Gemm) {
    FailureOr<func::FuncOp> tiled = buildTiledContractionFunction(
        kernel, root, builder, name, *gpu, &config->gemm);
    if (failed(tiled) || *tiled)
      return tiled;
  }
  if (root && !gpu && layout == KernelLayout::Coalesced &&
      config->form == KernelConfig::Form::CpuGemm) {
    FailureOr<func::FuncOp> blocked =
        buildCpuGemmFunction(kernel, root, builder, name, config->cpuGemm);
    if (failed(blocked) || *blocked)
      return blocked;
  }
  if (root && !gpu && layout == KernelLayout::Coalesced &&
      config->form == KernelConfig::Form::CpuDirectConv)
    return buildCpuDirectConvFunction(kernel, root, builder, name, config->cpuDirectConv);
  if (root && !gpu && config->form == KernelConfig::Form::Cpu) {
    FailureOr<func::FuncOp> depthwise = buildCpuDepthwiseFunction(kernel, root, builder, name);
    if (failed(depthwise) || *depthwise)
      return depthwise;
    FailureOr<func::FuncOp> pooling = buildCpuPoolFunction(kernel, root, builder, name);
    if (failed(pooling) || *pooling)
      return pooling;
  }
  if (root && gpu) {
    FailureOr<func::FuncOp> depthwise = buildGpuDepthwiseFunction(kernel, root, builder, name);
    if (failed(depthwise) || *depthwise)
      return depthwise;
  }
  if (root) {
    bool failedOp = false;
    func::FuncOp func = buildContractionFunction(kernel, root, builder, name, failedOp);
    if (failedOp) {
      func.erase();
      return failure();
    }
    return func;
  }

  if (!gpu && layout == KernelLayout::Coalesced) {
    FailureOr<func::FuncOp> joined = buildCpuConcatFunction(kernel, builder, name);
    if (failed(joined) || *joined)
      return joined;
  }
  // pad and concat read with bounds checks: explicit loops, clamped loads.
  // So does a view that reads a prefix of a larger input at the loop index
  // itself (x[0:1] of a [3] tensor): linalg would take the loop's size from
  // that input's and reject the kernel.
  if (llvm::any_of(kernel.getBody().front(),
                   [](Operation &op) { return op.hasTrait<GuardedView>(); }) ||
      readsPrefixAtLoopIndex(kernel, iterations)) {
    bool failedOp = false;
    func::FuncOp func = buildGuardedFunction(kernel, builder, name, iterations, failedOp);
    if (failedOp) {
      func.erase();
      return failure();
    }
    return func;
  }

  // Views need per-use indexing, which only the flat layout expresses.
  bool views = llvm::any_of(kernel.getBody().front(),
                            [](Operation &op) { return op.hasTrait<View>(); });
  if (layout == KernelLayout::Flat || views) {
    bool failedOp = false;
    func::FuncOp func =
        !gpu && layout == KernelLayout::Coalesced
            ? buildRowRunsFunction(kernel, builder, name, iterations, failedOp)
            : func::FuncOp();
    if (!func && !failedOp)
      func = buildFlatFunction(kernel, builder, name, iterations, failedOp);
    if (failedOp) {
      func.erase();
      return failure();
    }
    return func;
  }

  size_t numInputs = kernel.getInputs().size();
  SmallVector<ArrayRef<int64_t>> inputShapes;
  for (Value v : kernel.getInputs())
    inputShapes.push_back(cast<RankedTensorType>(v.getType()).getShape());

  // Memref shapes and indexing maps per layout; outputs come last.
  SmallVector<SmallVector<int64_t>> shapes;
  SmallVector<AffineMap> maps;
  SmallVector<int64_t> loops;
  // Per argument: read as vector<4xf32> (else a scalar, splatted).
  SmallVector<bool> vectorArgs;
  if (layout == KernelLayout::Vector4) {
    if (!supportsVector4(kernel))
      return kernel.emitOpError("cannot use the vector4 layout"), failure();
    AffineExpr group = getAffineDimExpr(0, ctx);
    loops = {iterations / 4};
    for (ArrayRef<int64_t> shape : inputShapes) {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      // The element index of the group's first lane.
      AffineExpr first = simplifyAffineExpr(
          broadcastSourceIndex(shape, space, group * 4), 1, 0);
      bool lanesContiguous = !shape.empty() && shape.back() == space.back();
      if (n == 1) {
        shapes.push_back({1});
        maps.push_back(AffineMap::get(1, 0, getAffineConstantExpr(0, ctx)));
        vectorArgs.push_back(false);
      } else if (lanesContiguous) {
        shapes.push_back({n / 4});
        maps.push_back(AffineMap::get(1, 0, simplifyAffineExpr(first.floorDiv(4), 1, 0)));
        vectorArgs.push_back(true);
      } else { // broadcast along the innermost dimension: one value per group
        shapes.push_back({n});
        maps.push_back(AffineMap::get(1, 0, first));
        vectorArgs.push_back(false);
      }
    }
    for (size_t i = 0; i < kernel.getNumResults(); ++i) {
      shapes.push_back(loops);
      maps.push_back(AffineMap::getMultiDimIdentityMap(1, ctx));
      vectorArgs.push_back(true);
    }
  } else {
    Coalesced merged = coalesce(space, inputShapes);
    loops = merged.space;
    for (auto &shape : merged.shapes) {
      maps.push_back(projectedMap(shape, loops, ctx));
      shapes.push_back(shape);
    }
    for (size_t i = 0; i < kernel.getNumResults(); ++i) {
      shapes.push_back(loops);
      maps.push_back(AffineMap::getMultiDimIdentityMap(loops.size(), ctx));
    }
  }
  SmallVector<Type> argTypes;
  for (auto [i, shape] : llvm::enumerate(shapes)) {
    Type element = i < numInputs ? getElementTypeOrSelf(kernel.getInputs()[i].getType())
                                 : getElementTypeOrSelf(kernel.getResultTypes()[i - numInputs]);
    element = storageElementType(element);
    if (!vectorArgs.empty() && vectorArgs[i])
      element = VectorType::get({4}, element);
    argTypes.push_back(MemRefType::get(shape, element));
  }
  int64_t lanes = layout == KernelLayout::Vector4 ? 4 : 1;
  auto func = func::FuncOp::create(builder, loc, name,
                                   builder.getFunctionType(argTypes, {}));
  func->setAttr("kiln.iteration_size", builder.getI64IntegerAttr(iterations));
  func->setAttr("kiln.outer_size", builder.getI64IntegerAttr(loops.front()));
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);

  bool failedOp = false;
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{}, entry->getArguments().take_front(numInputs),
      entry->getArguments().drop_front(numInputs), maps,
      SmallVector<utils::IteratorType>(loops.size(), utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location nloc, ValueRange scalars) {
        IRMapping values;
        Block &body = kernel.getBody().front();
        for (auto [arg, scalar] :
             llvm::zip(body.getArguments(), scalars.take_front(numInputs))) {
          Value v = scalar;
          if (lanes > 1 && !isa<VectorType>(v.getType()))
            v = vector::BroadcastOp::create(nb, nloc, VectorType::get({lanes}, v.getType()), v);
          // Booleans live in memory as i8.
          if (getElementTypeOrSelf(arg.getType()).isInteger(1))
            v = arith::CmpIOp::create(
                nb, nloc, arith::CmpIPredicate::ne, scalar,
                arith::ConstantIntOp::create(nb, nloc, scalar.getType(), 0));
          values.map(arg, v);
        }
        for (Operation &op : body.without_terminator()) {
          SmallVector<Value> args;
          for (Value operand : op.getOperands())
            args.push_back(values.lookup(operand));
          Value result = emitScalar(nb, &op, args, lanes);
          if (!result) {
            op.emitOpError("has no scalar lowering inside a kernel");
            failedOp = true;
            result = args.empty() ? Value() : args.front();
          }
          values.map(op.getResult(0), result);
        }
        SmallVector<Value> yielded;
        for (auto [value, out] :
             llvm::zip(body.getTerminator()->getOperands(),
                       scalars.drop_front(numInputs))) {
          Value v = values.lookup(value);
          if (v && v.getType() != out.getType())
            v = arith::ExtUIOp::create(nb, nloc, out.getType(), v);
          yielded.push_back(v ? v : out);
        }
        linalg::YieldOp::create(nb, nloc, yielded);
      });
  (void)generic;
  func::ReturnOp::create(b, loc);
  if (failedOp) {
    func.erase();
    return failure();
  }
  return func;
}
