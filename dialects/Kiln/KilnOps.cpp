//===- KilnOps.cpp - kiln op verifiers and builders -----------------------===//

#include "dialects/Kiln/KilnDialect.h"
#include "dialects/Kiln/ShapeRules.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace kiln;

LogicalResult ConstantOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange,
    DictionaryAttr, OpaqueProperties properties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  auto value = properties.as<Properties *>()->value;
  if (!value)
    return failure();
  inferred.push_back(cast<TypedAttr>(value).getType());
  return success();
}


LogicalResult InputOp::verify() {
  if (static_cast<int64_t>(getIndex()) < 0)
    return emitOpError("input index must be non-negative");
  return success();
}

void KernelOp::build(OpBuilder &builder, OperationState &state,
                     TypeRange resultTypes, ValueRange inputs,
                     DeviceAttr device) {
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  if (device)
    state.addAttribute(getDeviceAttrName(state.name), device);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value v : inputs)
    block->addArgument(v.getType(), v.getLoc());
}

/// Kernels index with 64-bit products of their shapes (codegen delinearizes
/// and linearizes them): at most 2^40 elements per value, as the API allows.
static LogicalResult verifyKernelSizes(KernelOp kernel) {
  auto tooLarge = [](Type type) {
    auto shaped = dyn_cast<RankedTensorType>(type);
    if (!shaped)
      return false;
    int64_t n = 1;
    for (int64_t d : shaped.getShape())
      if (d < 0 || __builtin_mul_overflow(n, d, &n))
        return true;
    return n > (int64_t(1) << 40);
  };
  WalkResult walk = kernel.getBody().walk([&](Operation *op) {
    for (Type type : llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()))
      if (tooLarge(type)) {
        op->emitOpError("has a value of type ") << type
            << " with more than 2^40 elements: beyond what a kernel indexes";
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult KernelOp::verify() {
  if (failed(verifyKernelSizes(*this)))
    return failure();
  Block &block = getBody().front();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("has ") << getInputs().size() << " inputs but "
                               << block.getNumArguments()
                               << " block arguments";
  for (auto [input, arg] : llvm::zip(getInputs(), block.getArguments()))
    if (input.getType() != arg.getType())
      return emitOpError("block argument type ")
             << arg.getType() << " does not match input type "
             << input.getType();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return emitOpError("body must end in kiln.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yielded types do not match the result types");
  if (getNumResults() == 0)
    return emitOpError("must produce at least one result");
  ArrayRef<int64_t> space =
      cast<RankedTensorType>(getResult(0).getType()).getShape();
  for (Value r : getResults())
    if (cast<RankedTensorType>(r.getType()).getShape() != space)
      return emitOpError("all results must share one iteration shape");
  for (Operation &op : block.without_terminator()) {
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!dense || !dense.isSplat())
        return op.emitOpError("inside a kernel must be a splat (other constants are "
                              "kernel operands)");
    }
    if (!op.hasTrait<Elementwise>() && !op.hasTrait<View>() && !op.hasTrait<GuardedView>() &&
        !isa<ConstantOp, AttentionOp>(op) &&
        !op.hasTrait<Reduction>() && !op.hasTrait<Contraction>())
      return op.emitOpError("cannot be part of a kernel: only elementwise ops, "
                            "views, reductions, contractions, attention and constants fuse");
  }
  return success();
}

/// A device in op syntax: `"vulkan:0"`, optionally followed by
/// `adapter "<uuid>"` and `written "<spelling>"`. (The `#kiln.device<...>`
/// form cannot be used here: the generic attribute parser would take the
/// op's trailing `: type` as the attribute's type.)
static ParseResult parseDevice(OpAsmParser &parser, DeviceAttr &device) {
  std::string name, adapter, written;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseString(&name))
    return failure();
  FailureOr<DeviceAttr> base = parseDeviceName(parser.getContext(), name);
  if (failed(base))
    return parser.emitError(loc, "expected a device such as \"vulkan:0\" or "
                                 "\"cpu\", got \"")
           << name << "\"";
  if (succeeded(parser.parseOptionalKeyword("adapter")) &&
      parser.parseString(&adapter))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("written")) &&
      parser.parseString(&written))
    return failure();
  device = DeviceAttr::get(parser.getContext(), base->getApi(),
                           base->getOrdinal(), adapter, written);
  return success();
}

static void printDevice(OpAsmPrinter &printer, Operation *, DeviceAttr device) {
  printer << '"' << device.getName() << '"';
  if (!device.getAdapter().empty())
    printer << " adapter \"" << device.getAdapter() << '"';
  if (!device.getWritten().empty())
    printer << " written \"" << device.getWritten() << '"';
}

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

namespace {
SmallVector<int64_t> strides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t k = static_cast<int64_t>(shape.size()) - 2; k >= 0; --k)
    s[k] = s[k + 1] * shape[k + 1];
  return s;
}

/// Coordinate k of the row-major flat index `flat` in `shape`.
AffineExpr coordinate(AffineExpr flat, ArrayRef<int64_t> shape, size_t k) {
  SmallVector<int64_t> s = strides(shape);
  AffineExpr c = s[k] == 1 ? flat : flat.floorDiv(s[k]);
  return k == 0 ? c : c % shape[k];
}

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }
} // namespace

/// Reshape, broadcast_to and slice carry their result shape in their result
/// type (as tensor.reshape does); ShapeRules.h checks it.
static LogicalResult checked(Operation *op, const std::string &why) {
  return why.empty() ? success() : op->emitOpError(why);
}

LogicalResult ReshapeOp::verify() {
  return checked(*this, shapes::checkReshape(shapeOf(getInput()), shapeOf(getResult())));
}

LogicalResult BroadcastToOp::verify() {
  return checked(*this, shapes::checkBroadcastTo(shapeOf(getInput()), shapeOf(getResult())));
}

LogicalResult SliceOp::verify() {
  return checked(*this, shapes::checkSlice(shapeOf(getInput()), getStarts(), getSteps(),
                                           shapeOf(getResult())));
}

AffineExpr kiln::broadcastSourceIndex(ArrayRef<int64_t> shape, ArrayRef<int64_t> space,
                                      AffineExpr index) {
  MLIRContext *ctx = index.getContext();
  if (shape == space)
    return index;
  size_t offset = space.size() - shape.size();
  SmallVector<int64_t> s = strides(shape);
  AffineExpr result = getAffineConstantExpr(0, ctx);
  for (size_t j = 0; j < shape.size(); ++j)
    if (shape[j] != 1)
      result = result + coordinate(index, space, j + offset) * s[j];
  return result;
}

AffineExpr kiln::viewSourceIndex(Operation *view, AffineExpr index) {
  MLIRContext *ctx = index.getContext();
  ArrayRef<int64_t> in = shapeOf(view->getOperand(0)), out = shapeOf(view->getResult(0));
  if (isa<ReshapeOp>(view))
    return index; // row-major order is unchanged
  if (isa<BroadcastToOp>(view))
    return broadcastSourceIndex(in, out, index);
  SmallVector<int64_t> inStrides = strides(in);
  AffineExpr result = getAffineConstantExpr(0, ctx);
  if (auto transpose = dyn_cast<TransposeOp>(view)) {
    for (auto [k, p] : llvm::enumerate(transpose.getPermutation()))
      result = result + coordinate(index, out, k) * inStrides[p];
    return result;
  }
  auto slice = cast<SliceOp>(view);
  for (size_t d = 0; d < in.size(); ++d)
    result = result + (coordinate(index, out, d) * slice.getSteps()[d] + slice.getStarts()[d]) *
                          inStrides[d];
  return result;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult ArgReduceOp::verify() {
  if (getKind() != ReduceKind::max && getKind() != ReduceKind::min)
    return emitOpError("arg_reduce is max or min");
  return success();
}

LogicalResult Pool2dOp::verify() {
  if (getKind() != ReduceKind::max && getKind() != ReduceKind::mean)
    return emitOpError("pooling is max or mean");
  return success();
}

int64_t ReduceOp::getReducedCount() {
  int64_t n = 1;
  for (int64_t axis : getAxes())
    n *= shapeOf(getInput())[axis];
  return n;
}

#define GET_OP_CLASSES
#include "dialects/Kiln/KilnOps.cpp.inc"

/// q [..., L, E], k [..., S, E], v [..., S, Ev] -> [broadcast(...), L, Ev];
/// a mask broadcasts to [..., L, S].
LogicalResult AttentionOp::verify() {
  ArrayRef<int64_t> q = shapeOf(getQuery()), k = shapeOf(getKey()), v = shapeOf(getValue()),
                    y = shapeOf(getResult());
  if (q.size() < 2 || k.size() < 2 || v.size() < 2)
    return emitOpError("needs q, k and v of rank 2 or more");
  if (k.back() != q.back() || v[v.size() - 2] != k[k.size() - 2])
    return emitOpError("needs k's last size to be q's (E) and v's length to be k's (S)");
  Type element = mlir::getElementTypeOrSelf(getQuery().getType());
  if (mlir::getElementTypeOrSelf(getKey().getType()) != element ||
      mlir::getElementTypeOrSelf(getValue().getType()) != element ||
      mlir::getElementTypeOrSelf(getResult().getType()) != element)
    return emitOpError("needs q, k, v and the result of one element type");
  shapes::Inferred batch = shapes::broadcast({q.drop_back(2), k.drop_back(2), v.drop_back(2)});
  if (!batch.ok())
    return emitOpError(batch.error);
  SmallVector<int64_t> want(batch.shape.begin(), batch.shape.end());
  want.push_back(q[q.size() - 2]);
  want.push_back(v.back());
  if (y != ArrayRef<int64_t>(want))
    return emitOpError("result must be [batch..., L, Ev]");
  if (Value mask = getMask()) {
    if (getCausal())
      return emitOpError("takes a mask or causal, not both");
    Type m = mlir::getElementTypeOrSelf(mask.getType());
    if (!m.isInteger(1) && m != element)
      return emitOpError("needs a boolean mask or one of q's element type");
    SmallVector<int64_t> scores(batch.shape.begin(), batch.shape.end());
    scores.push_back(q[q.size() - 2]);
    scores.push_back(k[k.size() - 2]);
    std::string why = shapes::checkBroadcastTo(shapeOf(mask), scores);
    if (!why.empty())
      return emitOpError("mask: ") << why;
  }
  return success();
}
