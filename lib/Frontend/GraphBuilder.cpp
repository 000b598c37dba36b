//===- GraphBuilder.cpp - recorded nodes as a kiln graph function ---------===//

#include "lib/Frontend/GraphBuilder.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace kiln;

Type kiln::elementType(MLIRContext *ctx, DType dtype) {
  Builder b(ctx);
  switch (dtype) {
  case DType::f32: return b.getF32Type();
  case DType::f16: return b.getF16Type();
  case DType::i32: return b.getI32Type();
  case DType::boolean: return b.getI1Type();
  case DType::bf16: return b.getBF16Type();
  }
  return b.getF32Type();
}

RankedTensorType kiln::tensorType(MLIRContext *ctx, const Node &node) {
  return RankedTensorType::get(node.shape, elementType(ctx, node.dtype));
}

Location kiln::locationOf(MLIRContext *ctx, std::source_location loc) {
  return FileLineColLoc::get(ctx, loc.file_name(), loc.line(), loc.column());
}

DeviceAttr kiln::deviceAttr(MLIRContext *ctx, const Device &device) {
  return DeviceAttr::get(ctx, device.api(), device.index(), device.adapter_uuid(),
                         device.written());
}

Device kiln::deviceOf(Operation *op) {
  DeviceAttr attr = cast<PlacedOpInterface>(op).getPlacement();
  return Device::parse(attr.getName());
}

SourceLocation kiln::sourceOf(Location loc) {
  if (auto named = dyn_cast<NameLoc>(loc))
    loc = named.getChildLoc();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return {file.getFilename().str(), file.getLine(), file.getColumn()};
  return {};
}

std::string kiln::typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

std::vector<Node *> kiln::topologicalOrder(const std::vector<std::shared_ptr<Node>> &roots) {
  std::vector<Node *> order;
  llvm::DenseMap<Node *, bool> visited; // false: on the stack
  std::vector<std::pair<Node *, size_t>> stack;
  for (const auto &root : roots) {
    if (visited.count(root.get()))
      continue;
    stack.push_back({root.get(), 0});
    visited[root.get()] = false;
    while (!stack.empty()) {
      auto &[node, next] = stack.back();
      // Realized nodes are graph inputs: their operands are not needed.
      if (!node->realized() && next < node->operands.size()) {
        Node *operand = node->operands[next++].get();
        if (!visited.count(operand)) {
          visited[operand] = false;
          stack.push_back({operand, 0});
        }
        continue;
      }
      visited[node] = true;
      order.push_back(node);
      stack.pop_back();
    }
  }
  return order;
}

DeviceAttr GraphBuilder::committedAttr(const Device &device) const {
  if (retarget && !(keepOrdinals && device.api() == retarget->api()))
    return deviceAttr(ctx, *retarget);
  return deviceAttr(ctx, device);
}

Value GraphBuilder::emit(OpBuilder &b, Node *node) {
  Location loc = locationOf(ctx, node->loc);
  if (node->label)
    loc = NameLoc::get(StringAttr::get(ctx, *node->label), loc);
  RankedTensorType type = tensorType(ctx, *node);
  if (node->realized() || node->kind == OpKind::Input) {
    // A realized uncommitted value stays uncommitted: it follows its users.
    auto op = InputOp::create(b, loc, type, inputs.size(),
                              node->device ? committedAttr(*node->device)
                                           : DeviceAttr());
    inputs.push_back(node);
    return op;
  }
  SmallVector<Value> operands;
  for (const auto &operand : node->operands)
    operands.push_back(values.lookup(operand.get()));
  switch (node->kind) {
  case OpKind::Constant: {
    Attribute element =
        type.getElementType().isInteger(1)
            ? Attribute(b.getBoolAttr(node->value != 0))
            : Attribute(b.getFloatAttr(type.getElementType(), node->value));
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, element),
                              node->device ? committedAttr(*node->device)
                                           : DeviceAttr());
  }
  case OpKind::Transfer:
    return TransferOp::create(b, loc, type, operands[0],
                              committedAttr(*node->device));
  default:
    break;
  }
  // Every other kind: "kiln.<name>" with the node's attributes.
  std::string name = "kiln." + node->op;
  auto array = [&](ArrayRef<int64_t> v) { return b.getDenseI64ArrayAttr(v); };
  SmallVector<NamedAttribute> attrs;
  auto attr = [&](StringRef key, Attribute value) { attrs.push_back(b.getNamedAttr(key, value)); };
  switch (node->kind) {
  case OpKind::Reduce:
  case OpKind::ArgReduce:
    name = node->kind == OpKind::Reduce ? "kiln.reduce" : "kiln.arg_reduce";
    attr("kind", ReduceKindAttr::get(ctx, *symbolizeReduceKind(node->op)));
    attr("axes", array(node->axes));
    if (node->keepdims)
      attr("keepdims", b.getUnitAttr());
    break;
  case OpKind::Pool2d:
    name = "kiln.pool2d";
    attr("kind", ReduceKindAttr::get(ctx, *symbolizeReduceKind(node->op)));
    attr("kernel", array(node->window));
    attr("strides", array(node->stride));
    attr("padding", array(node->padding));
    if (node->ceilMode)
      attr("ceil_mode", b.getUnitAttr());
    break;
  case OpKind::Conv2d:
    attr("strides", array(node->stride));
    attr("padding", array(node->padding));
    attr("dilation", array(node->dilation));
    attr("groups", b.getI64IntegerAttr(node->groups));
    break;
  case OpKind::Pad:
    attr("low", array(node->low));
    attr("high", array(node->high));
    attr("value", b.getF64FloatAttr(node->value));
    break;
  case OpKind::Gather:
  case OpKind::Concat:
    attr("axis", b.getI64IntegerAttr(node->axes[0]));
    break;
  case OpKind::Attention:
    attr("scale", b.getF64FloatAttr(node->value));
    if (node->causal)
      attr("causal", b.getUnitAttr());
    break;
  case OpKind::View:
    if (node->op == "transpose")
      attr("permutation", array(node->permutation));
    if (node->op == "slice") {
      attr("starts", array(node->starts));
      attr("steps", array(node->steps));
    }
    break;
  case OpKind::Compare:
    name = "kiln.cmp";
    attr("predicate", CmpPredicateAttr::get(ctx, *symbolizeCmpPredicate(node->op)));
    break;
  default:
    break;
  }
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addTypes(type);
  state.addAttributes(attrs);
  return b.create(state)->getResult(0);
}

void GraphBuilder::build(const std::vector<std::shared_ptr<Node>> &roots,
                         const std::vector<Node *> &order) {
  OpBuilder b(ctx);
  module = ModuleOp::create(b.getUnknownLoc());
  SmallVector<Type> resultTypes;
  for (const auto &root : roots)
    resultTypes.push_back(tensorType(ctx, *root));
  b.setInsertionPointToEnd(module->getBody());
  func = func::FuncOp::create(b, b.getUnknownLoc(), "graph",
                              b.getFunctionType({}, resultTypes));
  b.setInsertionPointToStart(func.addEntryBlock());
  for (size_t i = 0; i < order.size(); ++i) {
    Value value = emit(b, order[i]);
    // Which node a constant came from, so that a reused Program reads the
    // values of a later graph's constants (GraphCache.h).
    if (auto constant = value.getDefiningOp<ConstantOp>())
      constant->setAttr("kiln.node", b.getI64IntegerAttr(static_cast<int64_t>(i)));
    values[order[i]] = value;
  }
  SmallVector<Value> results;
  for (const auto &root : roots)
    results.push_back(values.lookup(root.get()));
  func::ReturnOp::create(b, b.getUnknownLoc(), results);
}
