//===- KernelCost.cpp - FLOPs, bytes, form and sources of a kernel --------===//

#include "kiln/Codegen/KernelCost.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace kiln;

namespace {
uint64_t elementsOf(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  return ranked ? static_cast<uint64_t>(ranked.getNumElements()) : 0;
}

uint64_t bytesOf(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked)
    return 0;
  Type element = ranked.getElementType();
  uint64_t width = element.isInteger(1) ? 1 : element.getIntOrFloatBitWidth() / 8;
  return elementsOf(type) * width;
}

int64_t product(ArrayRef<int64_t> values) {
  int64_t n = 1;
  for (int64_t v : values)
    n *= v;
  return n;
}

/// FLOPs of one op: data movement (views, gathers, pads) is free.
uint64_t flopsOf(Operation &op) {
  uint64_t out = op.getNumResults() ? elementsOf(op.getResult(0).getType()) : 0;
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    ArrayRef<int64_t> lhs = cast<RankedTensorType>(matmul.getLhs().getType()).getShape();
    return 2 * out * static_cast<uint64_t>(lhs.back());
  }
  if (auto conv = dyn_cast<Conv2dOp>(op)) {
    ArrayRef<int64_t> filter = cast<RankedTensorType>(conv.getFilter().getType()).getShape();
    return 2 * out * static_cast<uint64_t>(filter[1] * filter[2] * filter[3]);
  }
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    // The two products, 2 L S (E + Ev) per batch, counted whole (a causal
    // kernel skips the blocks past each query block's last row).
    auto shape = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
    uint64_t e = shape(attention.getQuery()).back(), ev = shape(attention.getValue()).back();
    uint64_t keys = shape(attention.getKey()).end()[-2];
    return 2 * (out / ev) * keys * (e + ev); // out / ev: the queries
  }
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return elementsOf(reduce.getInput().getType());
  if (auto arg = dyn_cast<ArgReduceOp>(op))
    return elementsOf(arg.getInput().getType());
  if (auto pool = dyn_cast<Pool2dOp>(op))
    return out * static_cast<uint64_t>(product(pool.getKernel()));
  // Casts and selects are data movement too; math is one FLOP an element.
  if (op.hasTrait<kiln::Elementwise>() && !isa<CastOp, SelectOp>(op))
    return out;
  return 0;
}

std::string fileLine(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    StringRef name = file.getFilename().getValue();
    name = name.substr(name.find_last_of('/') + 1);
    return (name + ":" + std::to_string(file.getLine())).str();
  }
  if (auto named = dyn_cast<NameLoc>(loc))
    return named.getName().str();
  return {};
}
} // namespace

KernelCost kiln::kernelCost(KernelOp kernel) {
  KernelCost cost;
  for (Value input : kernel.getInputs())
    cost.bytes += bytesOf(input.getType());
  for (Value result : kernel.getResults())
    cost.bytes += bytesOf(result.getType());
  cost.kind = "elementwise";
  std::string lastPlace;
  for (Operation &op : kernel.getBody().front().without_terminator()) {
    cost.flops += flopsOf(op);
    if (isa<Conv2dOp>(op))
      cost.kind = "conv";
    else if (isa<MatmulOp>(op) && cost.kind != "conv")
      cost.kind = "matmul";
    else if (isa<AttentionOp>(op))
      cost.kind = "attention";
    else if (isa<ReduceOp, ArgReduceOp, Pool2dOp>(op) && cost.kind == "elementwise")
      cost.kind = "reduction";
    std::string place = fileLine(op.getLoc());
    if (place.empty())
      continue;
    std::string name = op.getName().stripDialect().str();
    if (place == lastPlace) {
      cost.sources += "+" + name;
      continue;
    }
    cost.sources += (cost.sources.empty() ? "" : "; ") + place + " " + name;
    lastPlace = place;
  }
  return cost;
}
