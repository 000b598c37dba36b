//===- KilnOps.cpp - kiln op verifiers and builders -----------------------===//

#include "dialects/Kiln/KilnDialect.h"
#include "dialects/Kiln/WindowRules.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace kiln;

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {
/// Checks that the operands broadcast to the result's shape.
LogicalResult verifyBroadcast(Operation *op, ValueRange operands,
                              RankedTensorType result) {
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    auto type = cast<RankedTensorType>(v.getType());
    FailureOr<SmallVector<int64_t>> next =
        broadcastShapes(shape, type.getShape());
    if (failed(next)) {
      InFlightDiagnostic diag = op->emitOpError("operand shapes ");
      for (size_t i = 0; i < operands.size(); ++i)
        diag << (i ? ", " : "")
             << shapeString(
                    cast<RankedTensorType>(operands[i].getType()).getShape());
      return diag << " do not broadcast";
    }
    shape = *next;
  }
  if (ArrayRef<int64_t>(shape) != result.getShape())
    return op->emitOpError("result shape ")
           << shapeString(result.getShape())
           << " does not match the broadcast shape " << shapeString(shape);
  return success();
}

LogicalResult verifySameElementType(Operation *op, ValueRange values) {
  Type first = cast<RankedTensorType>(values.front().getType()).getElementType();
  for (Value v : values.drop_front())
    if (cast<RankedTensorType>(v.getType()).getElementType() != first)
      return op->emitOpError("element types differ: ")
             << first << " and "
             << cast<RankedTensorType>(v.getType()).getElementType();
  return success();
}

template <typename BinaryOp>
LogicalResult verifyBinary(BinaryOp op) {
  if (failed(verifySameElementType(
          op, ValueRange{op.getLhs(), op.getRhs(), op.getResult()})))
    return failure();
  return verifyBroadcast(op, ValueRange{op.getLhs(), op.getRhs()},
                         op.getResult().getType());
}
} // namespace

#define KILN_BINARY_VERIFIER(OP)                                               \
  LogicalResult OP::verify() { return verifyBinary(*this); }
KILN_BINARY_VERIFIER(AddOp)
KILN_BINARY_VERIFIER(SubOp)
KILN_BINARY_VERIFIER(MulOp)
KILN_BINARY_VERIFIER(DivOp)
KILN_BINARY_VERIFIER(MaxOp)
KILN_BINARY_VERIFIER(MinOp)
KILN_BINARY_VERIFIER(PowOp)
#undef KILN_BINARY_VERIFIER

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

LogicalResult CmpOp::verify() {
  if (failed(verifySameElementType(*this, ValueRange{getLhs(), getRhs()})))
    return failure();
  return verifyBroadcast(*this, ValueRange{getLhs(), getRhs()},
                         getResult().getType());
}

LogicalResult SelectOp::verify() {
  if (failed(verifySameElementType(
          *this, ValueRange{getLhs(), getRhs(), getResult()})))
    return failure();
  return verifyBroadcast(*this, ValueRange{getCond(), getLhs(), getRhs()},
                         getResult().getType());
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
        !isa<ConstantOp>(op) &&
        !op.hasTrait<Reduction>() && !op.hasTrait<Contraction>())
      return op.emitOpError("cannot be part of a kernel: only elementwise ops, "
                            "views, reductions, contractions and constants fuse");
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
/// Saturating at INT64_MAX: kiln-opt takes any type, and a product that
/// wraps would compare equal to another shape's.
int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      return INT64_MAX;
  return n;
}

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

LogicalResult TransposeOp::verify() {
  ArrayRef<int64_t> perm = getPermutation(), in = shapeOf(getInput());
  if (perm.size() != in.size())
    return emitOpError("permutation has ") << perm.size() << " entries for a rank-"
                                           << in.size() << " operand";
  SmallVector<bool> seen(in.size(), false);
  SmallVector<int64_t> expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p])
      return emitOpError("permutation ") << shapeString(perm) << " is not a permutation of 0.."
                                         << in.size() - 1;
    seen[p] = true;
    expected.push_back(in[p]);
  }
  if (ArrayRef<int64_t>(expected) != shapeOf(getResult()))
    return emitOpError("result shape ") << shapeString(shapeOf(getResult()))
                                        << " should be " << shapeString(expected);
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (numElements(shapeOf(getInput())) == INT64_MAX ||
      numElements(shapeOf(getResult())) == INT64_MAX)
    return emitOpError("has a shape whose element count overflows 64 bits");
  if (numElements(shapeOf(getInput())) != numElements(shapeOf(getResult())))
    return emitOpError("cannot reshape ") << shapeString(shapeOf(getInput())) << " ("
                                          << numElements(shapeOf(getInput()))
                                          << " elements) to "
                                          << shapeString(shapeOf(getResult()));
  return success();
}

LogicalResult BroadcastToOp::verify() {
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes(shapeOf(getInput()), shapeOf(getResult()));
  if (failed(shape) || ArrayRef<int64_t>(*shape) != shapeOf(getResult()))
    return emitOpError("cannot broadcast ") << shapeString(shapeOf(getInput())) << " to "
                                            << shapeString(shapeOf(getResult()));
  return success();
}

LogicalResult SliceOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  if (getStarts().size() != in.size() || getSteps().size() != in.size() ||
      out.size() != in.size())
    return emitOpError("starts, steps and the result must have the operand's rank ")
           << in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t start = getStarts()[d], step = getSteps()[d], count = out[d];
    if (step == 0)
      return emitOpError("step of dimension ") << d << " is 0";
    if (count == 0)
      continue;
    int64_t last = start + (count - 1) * step;
    if (start < 0 || start >= in[d] || last < 0 || last >= in[d])
      return emitOpError("dimension ")
             << d << ": elements " << start << ", " << start + step << ", ... " << last
             << " are not all inside [0, " << in[d] << ")";
  }
  return success();
}

LogicalResult PadOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  if (getLow().size() != in.size() || getHigh().size() != in.size() || out.size() != in.size())
    return emitOpError("low, high and the result must have the operand's rank ") << in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (getLow()[d] < 0 || getHigh()[d] < 0)
      return emitOpError("padding must be non-negative");
    if (in[d] + getLow()[d] + getHigh()[d] != out[d])
      return emitOpError("dimension ") << d << ": " << in[d] << " + " << getLow()[d] << " + "
                                       << getHigh()[d] << " is not " << out[d];
  }
  if (getInput().getType().getElementType() != getResult().getType().getElementType())
    return emitOpError("result element type differs from the operand's");
  return success();
}

LogicalResult GatherOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), idx = shapeOf(getIndices()),
                    out = shapeOf(getResult());
  int64_t axis = getAxisAttr().getInt();
  if (axis < 0 || axis >= static_cast<int64_t>(in.size()))
    return emitOpError("axis ") << axis << " is outside the rank " << in.size();
  if (idx.size() != 1)
    return emitOpError("indices must be rank 1, got ") << shapeString(idx);
  SmallVector<int64_t> expected(in);
  expected[axis] = idx[0];
  if (ArrayRef<int64_t>(expected) != out)
    return emitOpError("result shape ") << shapeString(out) << " should be "
                                        << shapeString(expected);
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  ArrayRef<int64_t> out = shapeOf(getResult());
  int64_t axis = getAxisAttr().getInt(), total = 0;
  if (axis < 0 || axis >= static_cast<int64_t>(out.size()))
    return emitOpError("axis ") << axis << " is outside the rank " << out.size();
  for (Value input : getInputs()) {
    ArrayRef<int64_t> in = shapeOf(input);
    if (in.size() != out.size())
      return emitOpError("inputs must have the result's rank ") << out.size();
    for (size_t d = 0; d < in.size(); ++d)
      if (static_cast<int64_t>(d) != axis && in[d] != out[d])
        return emitOpError("input shape ") << shapeString(in) << " differs from the result "
                                           << shapeString(out) << " off the axis";
    total += in[axis];
    if (cast<RankedTensorType>(input.getType()).getElementType() !=
        getResult().getType().getElementType())
      return emitOpError("element types differ");
  }
  if (total != out[axis])
    return emitOpError("inputs add up to ") << total << " along the axis, not " << out[axis];
  return success();
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

/// Shared by reduce and arg_reduce: axes sorted and inside the rank, and
/// the result shape they imply.
static LogicalResult verifyReducedShape(Operation *op, ArrayRef<int64_t> in,
                                        ArrayRef<int64_t> axes, bool keepdims,
                                        ArrayRef<int64_t> result) {
  SmallVector<int64_t> expected;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(in.size()) ||
        (i && axes[i] <= axes[i - 1]))
      return op->emitOpError("axes ") << shapeString(axes)
                                      << " must be sorted, distinct and inside the rank "
                                      << in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    bool reduced = llvm::is_contained(axes, static_cast<int64_t>(d));
    if (!reduced)
      expected.push_back(in[d]);
    else if (keepdims)
      expected.push_back(1);
  }
  if (ArrayRef<int64_t>(expected) != result)
    return op->emitOpError("result shape ") << shapeString(result) << " should be "
                                            << shapeString(expected);
  return success();
}

LogicalResult ArgReduceOp::verify() {
  if (getKind() != ReduceKind::max && getKind() != ReduceKind::min)
    return emitOpError("arg_reduce is max or min");
  return verifyReducedShape(*this, shapeOf(getInput()), getAxes(), getKeepdims(),
                            shapeOf(getResult()));
}

LogicalResult ReduceOp::verify() {
  if (failed(verifyReducedShape(*this, shapeOf(getInput()), getAxes(), getKeepdims(),
                                shapeOf(getResult()))))
    return failure();
  if (getInput().getType().getElementType() != getResult().getType().getElementType())
    return emitOpError("result element type differs from the operand's");
  return success();
}

LogicalResult MatmulOp::verify() {
  ArrayRef<int64_t> a = shapeOf(getLhs()), b = shapeOf(getRhs()), c = shapeOf(getResult());
  if (a.size() < 2 || b.size() < 2)
    return emitOpError("operands must have rank 2 or more, got ")
           << shapeString(a) << " and " << shapeString(b);
  if (a.back() != b[b.size() - 2])
    return emitOpError("contracted dimensions differ: ")
           << shapeString(a) << " x " << shapeString(b);
  FailureOr<SmallVector<int64_t>> batch = broadcastShapes(a.drop_back(2), b.drop_back(2));
  if (failed(batch))
    return emitOpError("batch dimensions of ") << shapeString(a) << " and " << shapeString(b)
                                               << " do not broadcast";
  SmallVector<int64_t> expected = *batch;
  expected.push_back(a[a.size() - 2]);
  expected.push_back(b.back());
  if (ArrayRef<int64_t>(expected) != c)
    return emitOpError("result shape ") << shapeString(c) << " should be "
                                        << shapeString(expected);
  if (failed(verifySameElementType(*this, ValueRange{getLhs(), getRhs(), getResult()})))
    return failure();
  return success();
}

LogicalResult Pool2dOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput()), y = shapeOf(getResult());
  if (getKind() != ReduceKind::max && getKind() != ReduceKind::mean)
    return emitOpError("pooling is max or mean");
  if (x.size() != 4)
    return emitOpError("input must be rank 4 (NCHW), got ") << shapeString(x);
  if (getKernel().size() != 2 || getStrides().size() != 2 || getPadding().size() != 2)
    return emitOpError("kernel, strides and padding need two values each");
  SmallVector<int64_t> expected = {x[0], x[1]}, rounded = {x[0], x[1]};
  for (int i = 0; i < 2; ++i) {
    int64_t k = getKernel()[i], s = getStrides()[i], p = getPadding()[i];
    if (k < 1 || s < 1 || p < 0 || 2 * p > k)
      return emitOpError("kernel and strides must be positive, padding at most half the kernel");
    if (x[2 + i] + 2 * p < k)
      return emitOpError("the window (") << k << ") is larger than the padded input ("
                                         << x[2 + i] + 2 * p << ")";
    expected.push_back(windowCount(x[2 + i], k, s, p, p, /*ceilMode=*/false));
    rounded.push_back(windowCount(x[2 + i], k, s, p, p, /*ceilMode=*/true));
  }
  for (int i = 2; i < 4; ++i)
    if (y.size() != 4 || (y[i] != expected[i] && y[i] != rounded[i]))
      return emitOpError("result shape ")
             << shapeString(y) << " should be " << shapeString(expected)
             << (expected == rounded ? "" : " (or " + shapeString(rounded) + " with ceil_mode)");
  if (y[0] != x[0] || y[1] != x[1])
    return emitOpError("result shape ") << shapeString(y) << " should be " << shapeString(expected);
  return success();
}

LogicalResult Conv2dOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput()), w = shapeOf(getFilter()), y = shapeOf(getResult());
  int64_t groups = getGroupsAttr().getInt();
  if (x.size() != 4 || w.size() != 4)
    return emitOpError("input and filter must be rank 4 (NCHW, OIHW), got ")
           << shapeString(x) << " and " << shapeString(w);
  if (getStrides().size() != 2 || getPadding().size() != 2 || getDilation().size() != 2)
    return emitOpError("strides, padding and dilation need two values each");
  if (groups < 1 || x[1] % groups || w[0] % groups || w[1] * groups != x[1])
    return emitOpError("groups ") << groups << " do not divide " << x[1]
                                  << " input and " << w[0]
                                  << " output channels with a filter of " << w[1]
                                  << " channels per group";
  SmallVector<int64_t> expected = {x[0], w[0]};
  for (int i = 0; i < 2; ++i) {
    int64_t s = getStrides()[i], p = getPadding()[i], d = getDilation()[i];
    if (s < 1 || d < 1 || p < 0)
      return emitOpError("strides and dilation must be positive and padding non-negative");
    int64_t span = d * (w[2 + i] - 1) + 1;
    if (x[2 + i] + 2 * p < span)
      return emitOpError("the filter (") << span << " with dilation) is larger than the padded input ("
                                         << x[2 + i] + 2 * p << ")";
    expected.push_back((x[2 + i] + 2 * p - span) / s + 1);
  }
  if (ArrayRef<int64_t>(expected) != y)
    return emitOpError("result shape ") << shapeString(y) << " should be " << shapeString(expected);
  return verifySameElementType(*this, ValueRange{getInput(), getFilter(), getResult()});
}

int64_t ReduceOp::getReducedCount() {
  int64_t n = 1;
  for (int64_t axis : getAxes())
    n *= shapeOf(getInput())[axis];
  return n;
}

#define GET_OP_CLASSES
#include "dialects/Kiln/KilnOps.cpp.inc"
