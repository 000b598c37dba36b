//===- GraphBuilder.h - recorded nodes as a kiln graph function -*- C++ -*-===//
//
// The first step of every realization: the nodes the roots need, in
// topological order, as one func.func of kiln ops (inputs for realized and
// host-data nodes), with each op at the user's source line.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_GRAPHBUILDER_H
#define KILN_LIB_FRONTEND_GRAPHBUILDER_H

#include "lib/Frontend/Graph.h"

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Errors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"

namespace kiln {

mlir::Type elementType(mlir::MLIRContext *ctx, DType dtype);
mlir::RankedTensorType tensorType(mlir::MLIRContext *ctx, const Node &node);
mlir::Location locationOf(mlir::MLIRContext *ctx, std::source_location loc);
DeviceAttr deviceAttr(mlir::MLIRContext *ctx, const Device &device);
/// The device placement gave `op`.
Device deviceOf(mlir::Operation *op);
SourceLocation sourceOf(mlir::Location loc);
std::string typeText(mlir::Type type);

/// The nodes `roots` need, operands before users; realized nodes are
/// inputs, so the graph above them is not visited.
std::vector<Node *> topologicalOrder(const std::vector<std::shared_ptr<Node>> &roots);

/// The graph function of everything `roots` need, in topological order.
struct GraphBuilder {
  mlir::MLIRContext *ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  /// The node behind each kiln.input, by its index.
  std::vector<Node *> inputs;
  llvm::DenseMap<Node *, mlir::Value> values;
  /// Ahead of time: every committed device becomes this one (a model whose
  /// weights live on a GPU, compiled for the CPU).
  std::optional<Device> retarget;
  /// With retarget: devices of its api keep their ordinals (a model split
  /// across two GPUs stays split); only the others move.
  bool keepOrdinals = false;

  explicit GraphBuilder(mlir::MLIRContext *ctx) : ctx(ctx) {}
  /// `order` is topologicalOrder(roots).
  void build(const std::vector<std::shared_ptr<Node>> &roots, const std::vector<Node *> &order);
  void build(const std::vector<std::shared_ptr<Node>> &roots) {
    build(roots, topologicalOrder(roots));
  }

private:
  DeviceAttr committedAttr(const Device &device) const;
  mlir::Value emit(mlir::OpBuilder &b, Node *node);
};

} // namespace kiln

#endif // KILN_LIB_FRONTEND_GRAPHBUILDER_H
