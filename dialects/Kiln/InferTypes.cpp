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
/// the op's error) otherwise.
template <typename OpTy>
FailureOr<SmallVector<RankedTensorType>> sameElementType(std::optional<Location> loc,
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

/// Broadcast of `values` (numpy rules) with element type `element`, or of
/// the first operand when `element` is null.
template <typename OpTy>
LogicalResult inferBroadcast(std::optional<Location> loc, ValueRange all, ValueRange same,
                             Type element, SmallVectorImpl<Type> &inferred) {
  FailureOr<SmallVector<RankedTensorType>> types = sameElementType<OpTy>(loc, same);
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

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = rankedOf(adaptor.getInput());
  if (!in)
    return fail<TransposeOp>(loc, "operand must be a ranked tensor");
  return result<TransposeOp>(loc, shapes::transpose(in.getShape(), adaptor.getPermutation()),
                             in.getElementType(), inferred);
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = rankedOf(adaptor.getInput());
  if (!in)
    return fail<PadOp>(loc, "operand must be a ranked tensor");
  return result<PadOp>(loc, shapes::pad(in.getShape(), adaptor.getLow(), adaptor.getHigh()),
                       in.getElementType(), inferred);
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = rankedOf(adaptor.getInput()), idx = rankedOf(adaptor.getIndices());
  if (!in || !idx)
    return fail<GatherOp>(loc, "operands must be ranked tensors");
  return result<GatherOp>(loc,
                          shapes::gather(in.getShape(), idx.getShape(), adaptor.getAxis()),
                          in.getElementType(), inferred);
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  FailureOr<SmallVector<RankedTensorType>> types =
      sameElementType<ConcatOp>(loc, adaptor.getInputs());
  if (failed(types))
    return failure();
  SmallVector<ArrayRef<int64_t>> shapes;
  for (RankedTensorType t : *types)
    shapes.push_back(t.getShape());
  Type element = types->empty() ? Type() : types->front().getElementType();
  return result<ConcatOp>(loc, shapes::concat(shapes, adaptor.getAxis()), element, inferred);
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = rankedOf(adaptor.getInput());
  if (!in)
    return fail<ReduceOp>(loc, "operand must be a ranked tensor");
  return result<ReduceOp>(
      loc, shapes::reduce(in.getShape(), adaptor.getAxes(), adaptor.getKeepdims()),
      in.getElementType(), inferred);
}

LogicalResult ArgReduceOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = rankedOf(adaptor.getInput());
  if (!in)
    return fail<ArgReduceOp>(loc, "operand must be a ranked tensor");
  return result<ArgReduceOp>(
      loc, shapes::reduce(in.getShape(), adaptor.getAxes(), adaptor.getKeepdims()),
      IntegerType::get(ctx, 32), inferred);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  FailureOr<SmallVector<RankedTensorType>> types =
      sameElementType<MatmulOp>(loc, {adaptor.getLhs(), adaptor.getRhs()});
  if (failed(types))
    return failure();
  return result<MatmulOp>(loc, shapes::matmul((*types)[0].getShape(), (*types)[1].getShape()),
                          (*types)[0].getElementType(), inferred);
}

LogicalResult Pool2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType in = rankedOf(adaptor.getInput());
  if (!in)
    return fail<Pool2dOp>(loc, "operand must be a ranked tensor");
  return result<Pool2dOp>(loc,
                          shapes::pool2d(in.getShape(), adaptor.getKernel(),
                                         adaptor.getStrides(), adaptor.getPadding(),
                                         adaptor.getCeilMode()),
                          in.getElementType(), inferred);
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  FailureOr<SmallVector<RankedTensorType>> types =
      sameElementType<Conv2dOp>(loc, {adaptor.getInput(), adaptor.getFilter()});
  if (failed(types))
    return failure();
  return result<Conv2dOp>(
      loc,
      shapes::conv2d((*types)[0].getShape(), (*types)[1].getShape(), adaptor.getStrides(),
                     adaptor.getPadding(), adaptor.getDilation(), adaptor.getGroups()),
      (*types)[0].getElementType(), inferred);
}
