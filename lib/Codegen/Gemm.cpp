//===- Gemm.cpp - matmul and convolution as one GEMM form -----------------===//
//
// matmul: A and B are the operands read through their views; b runs over
// the (broadcast) batch dimensions. conv2d is an implicit GEMM: b is the
// group, A the filter [Cout/g, K], B the input gathered on the fly (im2col
// without the copy): k = (ci, kh, kw), j = (n, ho, wo), zero outside the
// image.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kiln;

Value kiln::constantIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

Value kiln::insidePlane(OpBuilder &b, Location loc, Value h, Value w, const ConvGeometry &cg) {
  return arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, h, constantIndex(b, loc, cg.height)),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, w, constantIndex(b, loc, cg.width)));
}

Value kiln::applyExpr(OpBuilder &b, Location loc, AffineExpr e, ValueRange dims) {
  return affine::AffineApplyOp::create(
      b, loc, AffineMap::get(dims.size(), 0, simplifyAffineExpr(e, dims.size(), 0)), dims);
}

std::optional<std::pair<unsigned, AffineExpr>>
kiln::operandAccess(KernelOp kernel, Value operand, ArrayRef<int64_t> resultBatch,
                    bool allowBool) {
  MLIRContext *ctx = kernel.getContext();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(operand.getType()).getShape();
  SmallVector<AffineExpr> batchCoords = delinearize(getAffineDimExpr(0, ctx), resultBatch);
  // Aligned at the right against [batch..., rows, cols]; a size of 1
  // broadcasts.
  const size_t batch = resultBatch.size(), offset = batch + 2 - shape.size();
  SmallVector<AffineExpr> coords;
  for (size_t j = 0; j < shape.size(); ++j) {
    size_t dim = j + offset;
    coords.push_back(shape[j] == 1 ? getAffineConstantExpr(0, ctx)
                     : dim < batch  ? batchCoords[dim]
                                    : getAffineDimExpr(dim == batch ? 1 : 2, ctx));
  }
  FlatEvaluator evaluator(kernel, 3);
  evaluator.collect(operand, linearizeExpr(shape, coords, ctx));
  if (evaluator.getAccesses().size() != 1)
    return std::nullopt;
  auto arg = kernel.getBody().front().getArgument(evaluator.getAccesses()[0].first);
  // Only views in front: the value is the element itself.
  Value v = operand;
  while (Operation *def = v.getDefiningOp()) {
    if (!def->hasTrait<View>())
      return std::nullopt;
    v = def->getOperand(0);
  }
  Type element = getElementTypeOrSelf(arg.getType());
  if (v != arg || !(isa<FloatType>(element) || (allowBool && element.isInteger(1))))
    return std::nullopt;
  return evaluator.getAccesses()[0];
}

SmallVector<ChannelPart, 2> kiln::channelParts(Value input) {
  auto channelsOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape()[1]; };
  auto concat = input.getDefiningOp<ConcatOp>();
  if (!concat || concat.getAxisAttr().getInt() != 1)
    return {{input, 0, channelsOf(input)}};
  SmallVector<ChannelPart, 2> parts;
  int64_t first = 0;
  for (Value part : concat.getInputs()) {
    if (channelsOf(part) > 0) // (an empty input contributes nothing to read)
      parts.push_back({part, first, channelsOf(part)});
    first += channelsOf(part);
  }
  return parts;
}

std::optional<SmallVector<ConvSource, 2>> kiln::convSources(Value input) {
  SmallVector<ConvSource, 2> sources;
  for (const ChannelPart &part : channelParts(input)) {
    auto arg = dyn_cast<BlockArgument>(part.value);
    if (!arg)
      return std::nullopt;
    sources.push_back({arg.getArgNumber(), part.firstChannel, part.channels});
  }
  if (sources.empty())
    return std::nullopt;
  return sources;
}

std::optional<Gemm> kiln::describeGemm(KernelOp kernel, Operation *root,
                                       int64_t minRowsPerGroup) {
  MLIRContext *ctx = kernel.getContext();
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  Gemm gemm;
  AffineExpr b = getAffineDimExpr(0, ctx), i = getAffineDimExpr(1, ctx),
             j = getAffineDimExpr(2, ctx);
  // An operand read only here, straight from an f32 kernel input whose
  // innermost dimension (of `size`) holds whole 4-vectors.
  auto vectorizable = [](Value operand, int64_t size) {
    auto arg = dyn_cast<BlockArgument>(operand);
    return arg && arg.hasOneUse() && size % 4 == 0 &&
           getElementTypeOrSelf(arg.getType()).isF32();
  };
  // Readers read the kernel function's arguments, once it exists.
  gemm.entry = std::make_shared<Block *>(nullptr);
  std::shared_ptr<Block *> entry = gemm.entry;
  auto reader = [&](unsigned arg, AffineExpr expr) -> OperandReader {
    return [entry, arg, expr](OpBuilder &rb, Location loc, Value bv, Value iv, Value jv) {
      return memref::LoadOp::create(rb, loc, (*entry)->getArgument(arg),
                                    ValueRange{applyExpr(rb, loc, expr, ValueRange{bv, iv, jv})})
          .getResult();
    };
  };
  if (auto matmul = dyn_cast<MatmulOp>(root)) {
    ArrayRef<int64_t> c = shapeOf(matmul.getResult());
    ArrayRef<int64_t> resultBatch = c.drop_back(2);
    auto lhs = operandAccess(kernel, matmul.getLhs(), resultBatch);
    auto rhs = operandAccess(kernel, matmul.getRhs(), resultBatch);
    if (!lhs || !rhs)
      return std::nullopt;
    for (int64_t d : resultBatch)
      gemm.batch *= d;
    gemm.m = c[c.size() - 2];
    gemm.n = c.back();
    gemm.k = shapeOf(matmul.getLhs()).back();
    // Through views (a head split: slice, reshape, transpose) an index is
    // full of divisions that the GEMM's ranges decide: without them the
    // packing and the A reads are plain address arithmetic (attention's
    // Q K^T went from 9.6 to 200 GFLOP/s).
    lhs->second = simplifyWithBounds(lhs->second, {gemm.batch, gemm.m, gemm.k});
    rhs->second = simplifyWithBounds(rhs->second, {gemm.batch, gemm.k, gemm.n});
    // A batch that shares its B (a [L, 1, E] x [E, F] projection) and whose
    // A rows follow each other batch by batch is one GEMM of batch x M rows:
    // B packed once, not once per batch.
    // (With one row per batch the bounds dropped the row index from the
    // operand's index: drop it here too.)
    AffineExpr row = gemm.m == 1 ? getAffineConstantExpr(0, ctx) : i;
    if (gemm.batch > 1 && !rhs->second.isFunctionOfDim(0) &&
        simplifyAffineExpr(lhs->second, 3, 0) ==
            simplifyAffineExpr((b * gemm.m + row) * gemm.k + j, 3, 0)) {
      gemm.m *= gemm.batch;
      gemm.batch = 1;
      lhs->second = i * gemm.k + j;
    }
    gemm.readA = reader(lhs->first, lhs->second);
    gemm.readB = reader(rhs->first, rhs->second);
    gemm.aAccess = *lhs;
    gemm.bAccess = *rhs;
    gemm.resultIndex = (b * gemm.m + i) * gemm.n + j;
    gemm.plainB = true;
    // Plain operands along their innermost dimension: every other term of
    // the element index is a multiple of that dimension's size.
    if (vectorizable(matmul.getRhs(), gemm.n)) {
      gemm.bVectorArg = rhs->first;
      gemm.bVectorIndex = simplifyAffineExpr(rhs->second.replace(j, j * 4).floorDiv(4), 3, 0);
    }
    if (vectorizable(matmul.getLhs(), gemm.k)) {
      gemm.aVectorArg = lhs->first;
      gemm.aVectorIndex = simplifyAffineExpr(lhs->second.replace(j, j * 4).floorDiv(4), 3, 0);
    }
  } else {
    auto conv = cast<Conv2dOp>(root);
    auto filter = dyn_cast<BlockArgument>(conv.getFilter());
    ArrayRef<int64_t> x = shapeOf(conv.getInput()), w = shapeOf(conv.getFilter()),
                      y = shapeOf(conv.getResult());
    int64_t groups = conv.getGroupsAttr().getInt();
    std::optional<SmallVector<ConvSource, 2>> sources = convSources(conv.getInput());
    if (!sources || !filter || w[0] / groups < minRowsPerGroup ||
        (sources->size() > 1 && groups != 1))
      return std::nullopt; // depthwise and narrow groups: untiled
    // One GEMM per (image, group): b = n * groups + g. Columns stay within
    // one image, so a 1x1 convolution reads a plain matrix at any batch and
    // a row of results is contiguous (the epilogue runs on vectors).
    gemm.batch = x[0] * groups;
    gemm.m = w[0] / groups;
    gemm.k = w[1] * w[2] * w[3];
    gemm.n = y[2] * y[3];
    AffineExpr image = b.floorDiv(groups), group = b % groups;
    // A: the filter rows of group g. B: input element (k, j), zero padding.
    gemm.readA = reader(filter.getArgNumber(), (group * gemm.m + i) * gemm.k + j);
    gemm.aAccess = {filter.getArgNumber(), (group * gemm.m + i) * gemm.k + j};
    if (vectorizable(conv.getFilter(), gemm.k)) {
      gemm.aVectorArg = filter.getArgNumber();
      gemm.aVectorIndex = (group * gemm.m + i) * (gemm.k / 4) + j;
    }
    unsigned arg = sources->front().arg;
    // C[b, i, j] is y[n, g * M + i, ho, wo].
    gemm.resultIndex = (image * y[1] + group * gemm.m + i) * (y[2] * y[3]) + j;
    // A 1x1 convolution with stride 1 and no padding reads
    // B[b, k, j] = x[n, g * Cg + k, j]: a matrix, no gather (of one input:
    // a folded concat's inputs are gathered source by source).
    if (sources->size() == 1 && w[2] == 1 && w[3] == 1 && llvm::all_equal({conv.getStrides()[0],
        conv.getStrides()[1], conv.getDilation()[0], conv.getDilation()[1], int64_t(1)}) &&
        conv.getPadding()[0] == 0 && conv.getPadding()[1] == 0) {
      gemm.readB = reader(arg, (image * x[1] + group * w[1] + i) * (x[2] * x[3]) + j);
      gemm.plainB = true;
      return gemm.k < 1 ? std::nullopt : std::optional<Gemm>(gemm);
    }
    // Otherwise each device's builder gathers B itself from the geometry
    // (readB stays unset): the CPU packs panels through per-column tables,
    // the GPU decomposes each column once per work item.
    gemm.conv = ConvGeometry{arg,
                             x[0], x[1], x[2], x[3], y[2], y[3], w[1], w[2], w[3],
                             conv.getStrides()[0], conv.getStrides()[1],
                             conv.getPadding()[0], conv.getPadding()[1],
                             conv.getDilation()[0], conv.getDilation()[1], groups,
                             std::move(*sources)};
  }
  if (gemm.k < 1)
    return std::nullopt; // the untiled form reports the empty reduction
  return gemm;
}

std::optional<Depthwise> kiln::describeDepthwise(Operation *root) {
  auto conv = dyn_cast_or_null<Conv2dOp>(root);
  if (!conv)
    return std::nullopt;
  auto input = dyn_cast<BlockArgument>(conv.getInput());
  auto filter = dyn_cast<BlockArgument>(conv.getFilter());
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> x = shapeOf(conv.getInput()), w = shapeOf(conv.getFilter()),
                    y = shapeOf(conv.getResult());
  const int64_t groups = conv.getGroupsAttr().getInt();
  // More taps than 7x7 would not fit the builders' registers.
  if (!input || !filter || w[1] != 1 || groups != x[1] || w[0] % groups != 0 ||
      w[2] * w[3] > 49 || y[2] * y[3] == 0)
    return std::nullopt;
  Depthwise d;
  d.conv = conv;
  d.g = ConvGeometry{input.getArgNumber(), x[0], x[1], x[2], x[3], y[2], y[3], 1, w[2], w[3],
                     conv.getStrides()[0], conv.getStrides()[1], conv.getPadding()[0],
                     conv.getPadding()[1], conv.getDilation()[0], conv.getDilation()[1], groups};
  d.filterArg = filter.getArgNumber();
  d.outChannels = y[1];
  d.perGroup = w[0] / groups;
  d.element = getElementTypeOrSelf(input.getType());
  return d;
}

void kiln::emitGpuGemmResult(OpBuilder &b, Location loc, KernelOp kernel, Operation *root,
                             Block *entry, const Gemm &gemm, Value batch, Value i, Value j,
                             Value sum, bool guarded, bool &failed) {
  OpBuilder sb = b;
  if (guarded) {
    auto below = [&](Value v, int64_t bound) {
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, v,
                                   constantIndex(b, loc, bound));
    };
    Value inside = arith::AndIOp::create(b, loc, below(i, gemm.m), below(j, gemm.n));
    auto guard = scf::IfOp::create(b, loc, inside, false);
    sb = OpBuilder::atBlockBegin(&guard.getThenRegion().front());
  }
  Value at = applyExpr(sb, loc, gemm.resultIndex, ValueRange{batch, i, j});
  emitGemmEpilogue(sb, loc, kernel, root, entry, sum, at, failed);
}

void kiln::emitGemmEpilogue(OpBuilder &sb, Location loc, KernelOp kernel, Operation *root,
                            Block *entry, Value sum, Value at, bool &failed) {
  Value rootValue = root->getResult(0);
  Type resultType = getElementTypeOrSelf(rootValue.getType());
  AffineExpr d0 = getAffineDimExpr(0, kernel.getContext());
  if (resultType != sum.getType())
    sum = arith::TruncFOp::create(sb, loc, resultType, sum);
  FlatEvaluator epilogue(kernel, 1);
  epilogue.bind(rootValue);
  for (Value result : kernel.getBody().front().getTerminator()->getOperands())
    epilogue.collect(result, d0);
  if (epilogue.misusedBinding()) {
    root->emitOpError("is read by its epilogue away from the iteration point");
    failed = true;
    return;
  }
  epilogue.setBinding(rootValue, sum);
  SmallVector<Value> loads;
  for (auto [arg, expr] : epilogue.getAccesses())
    loads.push_back(memref::LoadOp::create(sb, loc, entry->getArgument(arg),
                                           ValueRange{applyExpr(sb, loc, expr, ValueRange{at})}));
  storeResults(sb, loc, kernel, entry, at, [&](Value result) {
    return epilogue.emit(sb, result, d0, loads, failed);
  });
}

void kiln::emitGemmEpilogueAt(OpBuilder &sb, Location loc, KernelOp kernel, Operation *root,
                              Block *entry, Value sum, ValueRange coords,
                              ArrayRef<int64_t> bounds, AffineExpr resultIndex, bool &failed) {
  Value rootValue = root->getResult(0);
  Type resultType = getElementTypeOrSelf(rootValue.getType());
  unsigned dims = static_cast<unsigned>(coords.size());
  if (resultType != sum.getType())
    sum = arith::TruncFOp::create(sb, loc, resultType, sum);
  AffineExpr index = simplifyWithBounds(resultIndex, bounds);
  FlatEvaluator epilogue(kernel, dims);
  epilogue.bindAt(rootValue, index);
  for (Value result : kernel.getBody().front().getTerminator()->getOperands())
    epilogue.collect(result, index);
  if (epilogue.misusedBinding()) {
    root->emitOpError("is read by its epilogue away from the iteration point");
    failed = true;
    return;
  }
  epilogue.setBinding(rootValue, sum);
  SmallVector<Value> loads;
  for (auto [arg, expr] : epilogue.getAccesses())
    loads.push_back(memref::LoadOp::create(
        sb, loc, entry->getArgument(arg),
        ValueRange{applyExpr(sb, loc, simplifyWithBounds(expr, bounds), coords)}));
  Value at = applyExpr(sb, loc, index, coords);
  storeResults(sb, loc, kernel, entry, at, [&](Value result) {
    return epilogue.emit(sb, result, index, loads, failed, coords);
  });
}

namespace {
/// How an index moves with the last coordinate: 0, 1, or none of those.
std::optional<int64_t> lastStride(AffineExpr e, ArrayRef<int64_t> bounds) {
  unsigned dims = static_cast<unsigned>(bounds.size());
  AffineExpr last = getAffineDimExpr(dims - 1, e.getContext());
  // On the simplified form: valid at every point in bounds, so its step
  // holds between any two neighbours in them.
  AffineExpr simple = simplifyWithBounds(e, bounds);
  AffineExpr step = simplifyAffineExpr(simple.replace(last, last + 1) - simple, dims, 0);
  auto c = dyn_cast<AffineConstantExpr>(step);
  if (!c || (c.getValue() != 0 && c.getValue() != 1))
    return std::nullopt;
  return c.getValue();
}

/// `epilogue` (of the result index's dims) with the root bound at `index`
/// and every result collected there.
void collectEpilogue(FlatEvaluator &epilogue, KernelOp kernel, Operation *root,
                     AffineExpr index) {
  epilogue.bindAt(root->getResult(0), index);
  for (Value result : kernel.getBody().front().getTerminator()->getOperands())
    epilogue.collect(result, index);
}

/// The epilogue run along the result's last coordinate: results contiguous
/// there, no guarded view of its own, and each read's step along it (1:
/// contiguous, 0: one value for the run) as (argument, index, step); none
/// otherwise.
std::optional<SmallVector<std::tuple<unsigned, AffineExpr, int64_t>>>
epilogueReadsAlongRows(KernelOp kernel, Operation *root, ArrayRef<int64_t> bounds,
                       AffineExpr resultIndex) {
  // (A guarded view read by the root alone, the concat in front of a
  // convolution, is the form's to read, not the epilogue's.)
  for (Operation &op : kernel.getBody().front().without_terminator())
    if (op.hasTrait<GuardedView>() &&
        !llvm::all_of(op.getUsers(), [&](Operation *user) { return user == root; }))
      return std::nullopt;
  AffineExpr index = simplifyWithBounds(resultIndex, bounds);
  if (lastStride(index, bounds) != 1)
    return std::nullopt;
  FlatEvaluator epilogue(kernel, static_cast<unsigned>(bounds.size()));
  collectEpilogue(epilogue, kernel, root, index);
  if (epilogue.misusedBinding())
    return std::nullopt;
  SmallVector<std::tuple<unsigned, AffineExpr, int64_t>> reads;
  for (auto [arg, expr] : epilogue.getAccesses()) {
    std::optional<int64_t> step = lastStride(expr, bounds);
    if (!step)
      return std::nullopt;
    reads.push_back({arg, simplifyWithBounds(expr, bounds), *step});
  }
  return reads;
}
} // namespace

std::optional<DenseSet<unsigned>> kiln::gpuEpilogueGroups(KernelOp kernel, Operation *root,
                                                          const Gemm &gemm) {
  constexpr int64_t lanes = 4;
  SmallVector<int64_t> bounds{gemm.batch, gemm.m, gemm.n};
  if (gemm.n % lanes)
    return std::nullopt;
  Block &body = kernel.getBody().front();
  auto groupable = [&](Type t) {
    Type e = getElementTypeOrSelf(t);
    return (e.isF16() || e.isF32()) && cast<RankedTensorType>(t).getNumElements() % lanes == 0;
  };
  for (Type t : kernel.getResultTypes())
    if (!groupable(t))
      return std::nullopt;
  // A group's first element (j a multiple of 4) at a multiple of 4.
  auto aligned = [&](AffineExpr e) {
    MLIRContext *ctx = e.getContext();
    AffineExpr first = simplifyAffineExpr(
        e.replaceDims({getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx),
                       getAffineConstantExpr(0, ctx)}) %
            lanes,
        3, 0);
    auto c = dyn_cast<AffineConstantExpr>(first);
    return c && c.getValue() == 0;
  };
  std::optional<SmallVector<std::tuple<unsigned, AffineExpr, int64_t>>> reads =
      epilogueReadsAlongRows(kernel, root, bounds, gemm.resultIndex);
  if (!reads || !aligned(simplifyWithBounds(gemm.resultIndex, bounds)))
    return std::nullopt;
  // The arguments the operands read (through views): the form's buffers.
  DenseSet<unsigned> operandArgs;
  SmallVector<Value> work(root->getOperands());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v))
      operandArgs.insert(arg.getArgNumber());
    else if (Operation *def = v.getDefiningOp())
      llvm::append_range(work, def->getOperands());
  }
  DenseSet<unsigned> grouped, single;
  for (auto [arg, expr, step] : *reads) {
    if (step == 0)
      single.insert(arg);
    else if (aligned(expr))
      grouped.insert(arg);
    else
      return std::nullopt;
  }
  for (unsigned arg : grouped)
    if (single.contains(arg) || operandArgs.contains(arg) ||
        !groupable(body.getArgument(arg).getType()))
      return std::nullopt;
  return grouped;
}

void kiln::emitGpuGemmResultGroup(OpBuilder &sb, Location loc, KernelOp kernel, Operation *root,
                                  Block *entry, const Gemm &gemm, Value batch, Value i, Value j,
                                  Value sums, const DenseSet<unsigned> &grouped, bool &failed) {
  SmallVector<int64_t> bounds{gemm.batch, gemm.m, gemm.n};
  auto vec = cast<VectorType>(sums.getType());
  int64_t lanes = vec.getNumElements();
  Type resultType = getElementTypeOrSelf(root->getResult(0).getType());
  if (resultType != vec.getElementType())
    sums = arith::TruncFOp::create(sb, loc, vec.clone(resultType), sums);
  AffineExpr index = simplifyWithBounds(gemm.resultIndex, bounds);
  FlatEvaluator epilogue(kernel, 3);
  collectEpilogue(epilogue, kernel, root, index);
  epilogue.setBinding(root->getResult(0), sums);
  SmallVector<Value> coords{batch, i, j};
  SmallVector<Value> loads;
  for (auto [arg, expr] : epilogue.getAccesses()) {
    AffineExpr e = simplifyWithBounds(expr, bounds);
    loads.push_back(memref::LoadOp::create(
        sb, loc, entry->getArgument(arg),
        ValueRange{applyExpr(sb, loc, grouped.contains(arg) ? e.floorDiv(lanes) : e, coords)}));
  }
  Value at = applyExpr(sb, loc, index.floorDiv(lanes), coords);
  storeResults(sb, loc, kernel, entry, at, [&](Value result) {
    return epilogue.emit(sb, result, index, loads, failed, coords, {}, lanes);
  });
}

bool kiln::vectorizableGemmEpilogue(KernelOp kernel, Operation *root, ArrayRef<int64_t> bounds,
                                    AffineExpr resultIndex) {
  auto f32 = [](Type t) { return getElementTypeOrSelf(t).isF32(); };
  for (Operation &op : kernel.getBody().front().without_terminator())
    for (Type t : op.getResultTypes())
      if (!f32(t) && !getElementTypeOrSelf(t).isInteger(1))
        return false;
  for (Type t : kernel.getResultTypes())
    if (!f32(t))
      return false;
  std::optional<SmallVector<std::tuple<unsigned, AffineExpr, int64_t>>> reads =
      epilogueReadsAlongRows(kernel, root, bounds, resultIndex);
  return reads && llvm::all_of(*reads, [&](const auto &read) {
           return f32(kernel.getBody().front().getArgument(std::get<0>(read)).getType());
         });
}

std::optional<GemmRowValues>
kiln::precomputeGemmRowValues(OpBuilder &b, Location loc, KernelOp kernel, Operation *root,
                              Block *entry, ArrayRef<SmallVector<Value>> rowCoords,
                              ArrayRef<int64_t> bounds, AffineExpr resultIndex, int64_t lanes,
                              Value buffer, int64_t stride, bool &failed) {
  VectorType vec = VectorType::get({lanes}, b.getF32Type());
  AffineExpr index = simplifyWithBounds(resultIndex, bounds);
  GemmRowValues out;
  out.buffer = buffer;
  out.stride = stride;
  for (auto [r, coords] : llvm::enumerate(rowCoords)) {
    FlatEvaluator epilogue(kernel, static_cast<unsigned>(coords.size()));
    epilogue.bindAt(root->getResult(0), index);
    for (Value result : kernel.getBody().front().getTerminator()->getOperands())
      epilogue.collect(result, index);
    // The row's uniform values for real; everything else a stand-in whose
    // vector ops nothing uses (erased as dead code).
    Value standIn = arith::ConstantOp::create(b, loc, DenseElementsAttr::get(vec, b.getF32FloatAttr(0)));
    epilogue.setBinding(root->getResult(0), standIn);
    SmallVector<Value> inputs;
    for (auto [arg, expr] : epilogue.getAccesses())
      inputs.push_back(
          lastStride(expr, bounds) == 1
              ? standIn
              : memref::LoadOp::create(
                    b, loc, entry->getArgument(arg),
                    ValueRange{applyExpr(b, loc, simplifyWithBounds(expr, bounds), coords)})
                    .getResult());
    for (Value result : kernel.getBody().front().getTerminator()->getOperands())
      epilogue.emit(b, result, index, inputs, failed, coords, {}, lanes);
    ArrayRef<FlatEvaluator::Uniform> uniforms = epilogue.getUniforms();
    if (r == 0) {
      if (uniforms.empty() || int64_t(uniforms.size()) > stride ||
          llvm::any_of(uniforms, [](const FlatEvaluator::Uniform &u) {
            return !u.computed.getType().isF32();
          }))
        return std::nullopt;
      for (const FlatEvaluator::Uniform &u : uniforms)
        out.keys.push_back({u.v, u.index});
    }
    assert(uniforms.size() == out.keys.size() && "rows of one epilogue differ");
    for (auto [k, u] : llvm::enumerate(uniforms))
      memref::StoreOp::create(b, loc, u.computed, buffer,
                              ValueRange{constantIndex(b, loc, int64_t(r) * stride + int64_t(k))});
  }
  return out;
}

void kiln::emitGemmEpilogueVector(OpBuilder &sb, Location loc, KernelOp kernel, Operation *root,
                                  Block *entry, Value sums, ValueRange coords,
                                  ArrayRef<int64_t> bounds, AffineExpr resultIndex,
                                  bool &failed, const GemmRowValues *rowValues, Value row,
                                  int64_t validLanes) {
  auto vec = cast<VectorType>(sums.getType());
  Value mask;
  if (validLanes > 0 && validLanes < vec.getNumElements())
    mask = vector::CreateMaskOp::create(
        sb, loc, VectorType::get(vec.getShape(), sb.getI1Type()),
        ValueRange{constantIndex(sb, loc, validLanes)});
  unsigned dims = static_cast<unsigned>(coords.size());
  AffineExpr index = simplifyWithBounds(resultIndex, bounds);
  FlatEvaluator epilogue(kernel, dims);
  epilogue.bindAt(root->getResult(0), index);
  for (Value result : kernel.getBody().front().getTerminator()->getOperands())
    epilogue.collect(result, index);
  epilogue.setBinding(root->getResult(0), sums);
  if (rowValues) {
    Value base = arith::MulIOp::create(sb, loc, row, constantIndex(sb, loc, rowValues->stride));
    for (auto [k, key] : llvm::enumerate(rowValues->keys))
      epilogue.seed(key.first, key.second,
                    vector::BroadcastOp::create(
                        sb, loc, vec,
                        memref::LoadOp::create(
                            sb, loc, rowValues->buffer,
                            ValueRange{arith::AddIOp::create(sb, loc, base,
                                                             constantIndex(sb, loc, int64_t(k)))})));
  }
  SmallVector<Value> loads;
  for (auto [arg, expr] : epilogue.getAccesses()) {
    Value buffer = entry->getArgument(arg);
    Value at = applyExpr(sb, loc, simplifyWithBounds(expr, bounds), coords);
    // A value the same in every lane stays a scalar: what depends on such
    // values alone is computed once, not per lane (or read from rowValues).
    if (lastStride(expr, bounds) == 1 && mask)
      loads.push_back(vector::MaskedLoadOp::create(
          sb, loc, vec, buffer, ValueRange{at}, mask,
          arith::ConstantOp::create(sb, loc, vec, sb.getZeroAttr(vec))));
    else if (lastStride(expr, bounds) == 1)
      loads.push_back(vector::LoadOp::create(sb, loc, vec, buffer, ValueRange{at}));
    else
      loads.push_back(memref::LoadOp::create(sb, loc, buffer, ValueRange{at}));
  }
  Value at = applyExpr(sb, loc, index, coords);
  for (auto [i, result] :
       llvm::enumerate(kernel.getBody().front().getTerminator()->getOperands())) {
    Value v = epilogue.emit(sb, result, index, loads, failed, coords, {}, vec.getNumElements());
    Value out = entry->getArgument(kernel.getInputs().size() + i);
    if (mask)
      vector::MaskedStoreOp::create(sb, loc, out, ValueRange{at}, mask, v);
    else
      vector::StoreOp::create(sb, loc, v, out, ValueRange{at});
  }
}

void kiln::prefetchShare(OpBuilder &b, Location loc, Value buffer, Value start, Value last,
                         Value pass, Value stepsPerPass, Value step, int64_t lines) {
  Value at = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, pass, stepsPerPass), step);
  Value stride = constantIndex(b, loc, lines * kCacheLineFloats);
  Value first = arith::AddIOp::create(b, loc, start, arith::MulIOp::create(b, loc, at, stride));
  for (int64_t l = 0; l < lines; ++l)
    memref::PrefetchOp::create(
        b, loc, buffer,
        ValueRange{arith::MinUIOp::create(
            b, loc,
            arith::AddIOp::create(b, loc, first, constantIndex(b, loc, l * kCacheLineFloats)),
            last)},
        /*isWrite=*/false, /*localityHint=*/2, /*isDataCache=*/true);
}

std::optional<int64_t> kiln::elementAt(AffineExpr index, int64_t b, int64_t row, int64_t col) {
  MLIRContext *ctx = index.getContext();
  AffineExpr e = index.replaceDims({getAffineConstantExpr(b, ctx), getAffineConstantExpr(row, ctx),
                                    getAffineConstantExpr(col, ctx)});
  auto c = dyn_cast<AffineConstantExpr>(simplifyAffineExpr(e, 0, 0));
  return c ? std::optional<int64_t>(c.getValue()) : std::nullopt;
}

bool kiln::contiguousAlongColumns(AffineExpr index) {
  std::optional<int64_t> first = elementAt(index, 0, 0, 0), second = elementAt(index, 0, 0, 1);
  return first && second && *second - *first == 1;
}
