//===- InferTypes.cpp - InferTypeOpInterface for the kiln ops -------------===//
//
// Every op whose result follows from its operands and attributes computes it
// here, through ShapeRules.h (which the Tensor API calls too). The
// interface's verifier then checks a written result type against it.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/KilnDialect.h"
#include "dialects/Kiln/ShapeRules.h"

using namespace mlir;
using namespace kiln;

namespace {
RankedTensorType rankedOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

/// Emits "'kiln.<op>' op <why>" at the op's location, when it has one.
template <typename OpTy>
LogicalResult fail(std::optional<Location> loc, const Twine &why) {
  return emitOptionalError(loc, "'", OpTy::getOperationName(), "' op ", why);
}

/// The rule's shape with `element`, or its reason as the op's error.
template <typename OpTy>
LogicalResult result(std::optional<Location> loc, const shapes::Inferred &rule, Type element,
                     SmallVectorImpl<Type> &inferred) {
  if (!rule.ok())
    return fail<OpTy>(loc, rule.error);
  inferred.push_back(RankedTensorType::get(rule.shape, element));
  return success();
}

/// The ranked types of `values`, all with one element type; failure (with
/// the op's error) otherwise. (Builders infer before the verifier has
/// checked the operands' types.)
template <typename OpTy>
FailureOr<SmallVector<RankedTensorType>> rankedOperands(std::optional<Location> loc,
                                                        ValueRange values) {
  SmallVector<RankedTensorType> types;
  for (Value v : values) {
    RankedTensorType t = rankedOf(v);
    if (!t)
      return fail<OpTy>(loc, "operands must be ranked tensors");
    if (!types.empty() && t.getElementType() != types.front().getElementType()) {
      std::string a, b;
      llvm::raw_string_ostream(a) << types.front().getElementType();
      llvm::raw_string_ostream(b) << t.getElementType();
      return fail<OpTy>(loc, "element types differ: '" + a + "' and '" + b + "'");
    }
    types.push_back(t);
  }
  return types;
}

/// Broadcast of `all` (numpy rules) with element type `element`, or that of
/// `same` (which must agree) when `element` is null.
template <typename OpTy>
LogicalResult inferBroadcast(std::optional<Location> loc, ValueRange all, ValueRange same,
                             Type element, SmallVectorImpl<Type> &inferred) {
  FailureOr<SmallVector<RankedTensorType>> types = rankedOperands<OpTy>(loc, same);
  if (failed(types))
    return failure();
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value v : all) {
    if (!rankedOf(v))
      return fail<OpTy>(loc, "operands must be ranked tensors");
    shapes.push_back(rankedOf(v).getShape());
  }
  return result<OpTy>(loc, shapes::broadcast(shapes),
                      element ? element : types->front().getElementType(), inferred);
}
} // namespace

#define KILN_INFER_BINARY(OP)                                                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc,              \
                                     Adaptor adaptor, SmallVectorImpl<Type> &inferred) {       \
    SmallVector<Value, 2> operands = {adaptor.getLhs(), adaptor.getRhs()};                     \
    return inferBroadcast<OP>(loc, operands, operands, Type(), inferred);                      \
  }
KILN_INFER_BINARY(AddOp)
KILN_INFER_BINARY(SubOp)
KILN_INFER_BINARY(MulOp)
KILN_INFER_BINARY(DivOp)
KILN_INFER_BINARY(MaxOp)
KILN_INFER_BINARY(MinOp)
KILN_INFER_BINARY(PowOp)
#undef KILN_INFER_BINARY

LogicalResult CmpOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  SmallVector<Value, 2> operands = {adaptor.getLhs(), adaptor.getRhs()};
  return inferBroadcast<CmpOp>(loc, operands, operands, IntegerType::get(ctx, 1), inferred);
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferBroadcast<SelectOp>(loc, {adaptor.getCond(), adaptor.getLhs(), adaptor.getRhs()},
                                  {adaptor.getLhs(), adaptor.getRhs()}, Type(), inferred);
}

namespace {
/// An op whose tensor operands (one element type) give its result through
/// `rule(shapes)`, with `element` as element type, or the first operand's
/// when that is null.
template <typename OpTy>
LogicalResult inferFromOperands(std::optional<Location> loc, ValueRange operands, Type element,
                                function_ref<shapes::Inferred(ArrayRef<ArrayRef<int64_t>>)> rule,
                                SmallVectorImpl<Type> &inferred) {
  FailureOr<SmallVector<RankedTensorType>> types = rankedOperands<OpTy>(loc, operands);
  if (failed(types))
    return failure();
  SmallVector<ArrayRef<int64_t>> shapes;
  for (RankedTensorType t : *types)
    shapes.push_back(t.getShape());
  if (!element && !types->empty())
    element = types->front().getElementType();
  return result<OpTy>(loc, rule(shapes), element, inferred);
}

/// The same for an op of one tensor operand.
template <typename OpTy>
LogicalResult inferFromInput(std::optional<Location> loc, Value input, Type element,
                             function_ref<shapes::Inferred(ArrayRef<int64_t>)> rule,
                             SmallVectorImpl<Type> &inferred) {
  return inferFromOperands<OpTy>(
      loc, input, element, [&](ArrayRef<ArrayRef<int64_t>> in) { return rule(in.front()); },
      inferred);
}
} // namespace

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferFromInput<TransposeOp>(
      loc, adaptor.getInput(), Type(),
      [&](ArrayRef<int64_t> in) { return shapes::transpose(in, adaptor.getPermutation()); },
      inferred);
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferFromInput<PadOp>(
      loc, adaptor.getInput(), Type(),
      [&](ArrayRef<int64_t> in) { return shapes::pad(in, adaptor.getLow(), adaptor.getHigh()); },
      inferred);
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType idx = rankedOf(adaptor.getIndices());
  if (!idx)
    return fail<GatherOp>(loc, "operands must be ranked tensors");
  return inferFromInput<GatherOp>(
      loc, adaptor.getInput(), Type(),
      [&](ArrayRef<int64_t> in) { return shapes::gather(in, idx.getShape(), adaptor.getAxis()); },
      inferred);
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferFromOperands<ConcatOp>(
      loc, adaptor.getInputs(), Type(),
      [&](ArrayRef<ArrayRef<int64_t>> in) { return shapes::concat(in, adaptor.getAxis()); },
      inferred);
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferFromInput<ReduceOp>(
      loc, adaptor.getInput(), Type(),
      [&](ArrayRef<int64_t> in) {
        return shapes::reduce(in, adaptor.getAxes(), adaptor.getKeepdims());
      },
      inferred);
}

LogicalResult ArgReduceOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferFromInput<ArgReduceOp>(
      loc, adaptor.getInput(), IntegerType::get(ctx, 32),
      [&](ArrayRef<int64_t> in) {
        return shapes::reduce(in, adaptor.getAxes(), adaptor.getKeepdims());
      },
      inferred);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferFromOperands<MatmulOp>(
      loc, {adaptor.getLhs(), adaptor.getRhs()}, Type(),
      [&](ArrayRef<ArrayRef<int64_t>> in) { return shapes::matmul(in[0], in[1]); }, inferred);
}

LogicalResult Pool2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferFromInput<Pool2dOp>(
      loc, adaptor.getInput(), Type(),
      [&](ArrayRef<int64_t> in) {
        return shapes::pool2d(in, adaptor.getKernel(), adaptor.getStrides(),
                              adaptor.getPadding(), adaptor.getCeilMode());
      },
      inferred);
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  return inferFromOperands<Conv2dOp>(
      loc, {adaptor.getInput(), adaptor.getFilter()}, Type(),
      [&](ArrayRef<ArrayRef<int64_t>> in) {
        return shapes::conv2d(in[0], in[1], adaptor.getStrides(), adaptor.getPadding(),
                              adaptor.getDilation(), adaptor.getGroups());
      },
      inferred);
}
