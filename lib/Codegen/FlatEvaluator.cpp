//===- FlatEvaluator.cpp - kernel values at affine indices ----------------===//

#include "KernelBuilding.h"
#include "kiln/Codegen/KernelToLinalg.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <numbers>

using namespace mlir;
using namespace kiln;

SmallVector<AffineExpr> kiln::delinearize(AffineExpr flat, ArrayRef<int64_t> shape) {
  SmallVector<AffineExpr> coords(shape.size());
  int64_t stride = 1;
  for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
    AffineExpr c = stride == 1 ? flat : flat.floorDiv(stride);
    coords[k] = k == 0 ? c : c % shape[k];
    stride *= shape[k];
  }
  return coords;
}

AffineExpr kiln::linearizeExpr(ArrayRef<int64_t> shape, ArrayRef<AffineExpr> coords, MLIRContext *ctx) {
  AffineExpr index = getAffineConstantExpr(0, ctx);
  int64_t stride = 1;
  for (int64_t k = static_cast<int64_t>(shape.size()) - 1; k >= 0; --k) {
    index = index + coords[k] * stride;
    stride *= shape[k];
  }
  return index;
}

AffineExpr kiln::reductionInputIndex(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes,
                                     MLIRContext *ctx) {
  auto reduced = [&](size_t d) { return llvm::is_contained(axes, static_cast<int64_t>(d)); };
  SmallVector<int64_t> keptShape, reducedShape;
  for (size_t d = 0; d < shape.size(); ++d)
    (reduced(d) ? reducedShape : keptShape).push_back(shape[d]);
  SmallVector<AffineExpr> keptCoords = delinearize(getAffineDimExpr(0, ctx), keptShape);
  SmallVector<AffineExpr> reducedCoords = delinearize(getAffineDimExpr(1, ctx), reducedShape);
  SmallVector<AffineExpr> coords;
  for (size_t d = 0, k = 0, r = 0; d < shape.size(); ++d)
    coords.push_back(reduced(d) ? reducedCoords[r++] : keptCoords[k++]);
  return simplifyAffineExpr(linearizeExpr(shape, coords, ctx), 2, 0);
}

func::FuncOp kiln::createFlatKernelFunction(KernelOp kernel, OpBuilder &builder, StringRef name,
                                      int64_t iterations, int64_t outer) {
  auto flatType = [](Type tensorType) {
    auto tensor = cast<RankedTensorType>(tensorType);
    return MemRefType::get({std::max<int64_t>(1, tensor.getNumElements())},
                           storageElementType(tensor.getElementType()));
  };
  SmallVector<Type> argTypes;
  for (Type t : kernel.getInputs().getTypes())
    argTypes.push_back(flatType(t));
  for (Type t : kernel.getResultTypes())
    argTypes.push_back(flatType(t));
  auto func = func::FuncOp::create(builder, kernel.getLoc(), name,
                                   builder.getFunctionType(argTypes, {}));
  func->setAttr("kiln.iteration_size", builder.getI64IntegerAttr(iterations));
  func->setAttr("kiln.outer_size", builder.getI64IntegerAttr(outer));
  return func;
}

void kiln::storeResults(OpBuilder &b, Location loc, KernelOp kernel, Block *entry, Value index,
                  function_ref<Value(Value)> valueOf) {
  size_t numInputs = kernel.getInputs().size();
  for (auto [i, result] : llvm::enumerate(kernel.getBody().front().getTerminator()->getOperands())) {
    Value v = valueOf(result);
    if (!v)
      continue;
    Value out = entry->getArgument(numInputs + i);
    Type stored = cast<MemRefType>(out.getType()).getElementType();
    if (v.getType() != stored)
      v = arith::ExtUIOp::create(b, loc, stored, v);
    memref::StoreOp::create(b, loc, v, out, index);
  }
}


Value FlatEvaluator::visitGuarded(Operation *op, AffineExpr index, OpBuilder *b) {
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  SmallVector<AffineExpr> coords = delinearize(index, out);
  auto coordinateValue = [&](AffineExpr e) -> Value {
    return affine::AffineApplyOp::create(
        *b, op->getLoc(),
        AffineMap::get(numDims, 0, simplifyAffineExpr(e, numDims, 0)), emitState.dims);
  };
  auto inRange = [&](Value c, int64_t lo, int64_t hi) -> Value {
    Location loc = op->getLoc();
    return arith::AndIOp::create(
        *b, loc,
        arith::CmpIOp::create(*b, loc, arith::CmpIPredicate::sge, c,
                              arith::ConstantIndexOp::create(*b, loc, lo)),
        arith::CmpIOp::create(*b, loc, arith::CmpIPredicate::slt, c,
                              arith::ConstantIndexOp::create(*b, loc, hi)));
  };
  if (auto pad = dyn_cast<PadOp>(op)) {
    ArrayRef<int64_t> in = shapeOf(pad.getInput());
    SmallVector<AffineExpr> source;
    for (size_t k = 0; k < in.size(); ++k)
      source.push_back(coords[k] - pad.getLow()[k]);
    Value v = visit(pad.getInput(), linearizeExpr(in, source, ctx), b);
    if (!b)
      return Value();
    Value valid;
    for (size_t k = 0; k < in.size(); ++k) {
      if (pad.getLow()[k] == 0 && pad.getHigh()[k] == 0)
        continue;
      Value inside = inRange(coordinateValue(source[k]), 0, in[k]);
      valid = valid ? arith::AndIOp::create(*b, op->getLoc(), valid, inside) : inside;
    }
    if (!valid)
      return v;
    Value fill = floatConstant(*b, op->getLoc(), v.getType(), pad.getValue().convertToDouble());
    return arith::SelectOp::create(*b, op->getLoc(), valid, v, fill);
  }
  if (auto gather = dyn_cast<GatherOp>(op)) {
    // The position comes from the indices tensor: a load at a computed,
    // clamped index of the (kernel input) operand.
    int64_t axis = gather.getAxisAttr().getInt();
    ArrayRef<int64_t> in = shapeOf(gather.getInput());
    Value position = visit(gather.getIndices(), coords[axis], b);
    if (!b)
      return Value();
    auto source = dyn_cast<BlockArgument>(gather.getInput());
    if (!source || emitState.buffers.empty()) {
      gather.emitOpError("reads a kernel input only (fusion puts nothing in front)");
      *emitState.failed = true;
      return Value();
    }
    Location loc = op->getLoc();
    Value at = arith::IndexCastOp::create(*b, loc, b->getIndexType(), position);
    at = arith::MaxSIOp::create(*b, loc, at, arith::ConstantIndexOp::create(*b, loc, 0));
    at = arith::MinSIOp::create(*b, loc, at,
                                arith::ConstantIndexOp::create(*b, loc, in[axis] - 1));
    SmallVector<AffineExpr> rest(coords.begin(), coords.end());
    rest[axis] = getAffineConstantExpr(0, ctx);
    int64_t stride = 1;
    for (size_t k = axis + 1; k < in.size(); ++k)
      stride *= in[k];
    Value flat = arith::AddIOp::create(
        *b, loc, coordinateValue(linearizeExpr(in, rest, ctx)),
        arith::MulIOp::create(*b, loc, at, arith::ConstantIndexOp::create(*b, loc, stride)));
    return memref::LoadOp::create(*b, loc, emitState.buffers[source.getArgNumber()], flat);
  }
  auto concat = cast<ConcatOp>(op);
  int64_t axis = concat.getAxisAttr().getInt(), offset = 0;
  Value result, axisCoord;
  for (Value input : concat.getInputs()) {
    ArrayRef<int64_t> in = shapeOf(input);
    SmallVector<AffineExpr> source(coords.begin(), coords.end());
    source[axis] = coords[axis] - offset;
    Value v = visit(input, linearizeExpr(in, source, ctx), b);
    if (b) {
      if (!result) {
        result = v;
        axisCoord = coordinateValue(coords[axis]);
      } else {
        Value here = arith::CmpIOp::create(
            *b, op->getLoc(), arith::CmpIPredicate::sge, axisCoord,
            arith::ConstantIndexOp::create(*b, op->getLoc(), offset));
        result = arith::SelectOp::create(*b, op->getLoc(), here, v, result);
      }
    }
    offset += in[axis];
  }
  return result;
}

Value FlatEvaluator::emit(OpBuilder &b, Value v, AffineExpr index, ValueRange inputs,
                          bool &failed, ValueRange dims, ValueRange buffers, int64_t lanes) {
  emitState = {&b, inputs, &failed, dims, buffers, lanes};
  Value result = visit(v, index, &b);
  if (lanes > 1 && result && !isa<VectorType>(result.getType()))
    result = vector::BroadcastOp::create(b, v.getLoc(), VectorType::get({lanes}, result.getType()),
                                         result);
  return result;
}

Value FlatEvaluator::visit(Value v, AffineExpr index, OpBuilder *b) {
  index = simplifyAffineExpr(index, numDims, 0);
  auto key = std::make_pair(v, index);
  if (b)
    if (auto it = values.find(key); it != values.end())
      return it->second;
  Value result;
  if (rowBound.contains(v))
    return b ? rowValues.lookup(v) : Value();
  if (bound.contains(v)) {
    // Fusion only lets a contraction join when its consumers read it at
    // the iteration point; anything else is a compiler bug, reported.
    if (index != boundIndex())
      misused = true;
    return b ? values.lookup({v, boundIndex()}) : Value();
  }
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto access = std::make_pair(arg.getArgNumber(), index);
    auto *found = llvm::find(accesses, access);
    if (found == accesses.end()) {
      accesses.push_back(access);
      found = &accesses.back();
    }
    if (b) {
      result = emitState.inputs[found - accesses.begin()];
      if (getElementTypeOrSelf(arg.getType()).isInteger(1)) // i8 in memory
        result = arith::CmpIOp::create(
            *b, arg.getLoc(), arith::CmpIPredicate::ne, result,
            arith::ConstantIntOp::create(*b, arg.getLoc(), result.getType(), 0));
    }
  } else {
    Operation *op = v.getDefiningOp();
    if (op->hasTrait<View>()) {
      result = visit(op->getOperand(0), viewSourceIndex(op, index), b);
    } else if (op->hasTrait<GuardedView>()) {
      result = visitGuarded(op, index, b);
    } else {
      ArrayRef<int64_t> shape = cast<RankedTensorType>(v.getType()).getShape();
      SmallVector<Value> args;
      SmallVector<AffineExpr> argIndex;
      for (Value operand : op->getOperands()) {
        argIndex.push_back(simplifyAffineExpr(
            broadcastSourceIndex(cast<RankedTensorType>(operand.getType()).getShape(), shape, index),
            numDims, 0));
        args.push_back(visit(operand, argIndex.back(), b));
      }
      if (b) {
        int64_t lanes = emitState.lanes;
        if (lanes > 1) {
          // Lane-uniform operands alone (or none): one scalar op. Mixed:
          // the uniform ones broadcast to the vectors.
          if (llvm::none_of(args, [](Value a) { return a && isa<VectorType>(a.getType()); })) {
            lanes = 1;
          } else {
            for (auto [k, a] : llvm::enumerate(args)) {
              if (!a || isa<VectorType>(a.getType()))
                continue;
              Value operand = op->getOperand(k);
              if (llvm::none_of(uniforms, [&](const Uniform &u) {
                    return u.v == operand && u.index == argIndex[k];
                  }))
                uniforms.push_back({operand, argIndex[k], a});
              a = vector::BroadcastOp::create(*b, op->getLoc(),
                                              VectorType::get({lanes}, a.getType()), a);
            }
          }
        }
        result = emitScalar(*b, op, args, lanes);
        if (!result) {
          op->emitOpError("has no scalar lowering inside a kernel");
          *emitState.failed = true;
          result = args.empty() ? Value() : args.front();
        }
      }
    }
  }
  if (b)
    values[key] = result;
  return result;
}

