//===- EmulateBF16Storage.cpp - bf16 buffers as i16 bits on the GPU -------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEMULATEBF16STORAGE
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
/// `type` with bf16 (as a scalar, a vector's or a memref's element) made
/// i16; null when it holds no bf16.
Type withoutBF16(Type type) {
  if (type.isBF16())
    return IntegerType::get(type.getContext(), 16);
  if (auto vector = dyn_cast<VectorType>(type))
    if (Type element = withoutBF16(vector.getElementType()))
      return vector.clone(element);
  if (auto memref = dyn_cast<MemRefType>(type))
    if (Type element = withoutBF16(memref.getElementType()))
      return memref.clone(element);
  return nullptr;
}

bool holdsBF16(Type type) { return withoutBF16(type) != nullptr; }

/// Calls `fn` on every value of `func`: results and block arguments.
void forEachValue(func::FuncOp func, llvm::function_ref<void(Value)> fn) {
  func.walk([&](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          fn(arg);
    for (Value result : op->getResults())
      fn(result);
  });
}

/// Retypes the buffers; a load's value and a store's operand keep bf16
/// through a bitcast.
void retypeBuffers(func::FuncOp func) {
  forEachValue(func, [](Value v) {
    if (isa<MemRefType>(v.getType()))
      if (Type type = withoutBF16(v.getType()))
        v.setType(type);
  });
  func.setType(FunctionType::get(func.getContext(),
                                 func.getBody().front().getArgumentTypes(),
                                 func.getFunctionType().getResults()));

  // Other readers of a bf16 buffer (cooperative-matrix loads) would now
  // read integers; the checks after emulation refuse them.
  func.walk([&](Operation *op) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    auto bitsOf = [&](Value v) {
      return arith::BitcastOp::create(b, loc, withoutBF16(v.getType()), v).getResult();
    };
    // A read: its result becomes bits, bitcast back for its users.
    auto readBits = [&](Value result) {
      Type bf16 = result.getType();
      result.setType(withoutBF16(bf16));
      b.setInsertionPointAfter(op);
      auto value = arith::BitcastOp::create(b, loc, bf16, result);
      result.replaceAllUsesExcept(value, value);
    };
    if (auto load = dyn_cast<memref::LoadOp>(op); load && holdsBF16(load.getType()))
      readBits(load.getResult());
    else if (auto load = dyn_cast<vector::LoadOp>(op); load && holdsBF16(load.getType()))
      readBits(load.getResult());
    else if (auto load = dyn_cast<vector::MaskedLoadOp>(op); load && holdsBF16(load.getType())) {
      load.getPassThruMutable().assign(bitsOf(load.getPassThru()));
      readBits(load.getResult());
    } else if (auto store = dyn_cast<vector::MaskedStoreOp>(op);
               store && holdsBF16(store.getValueToStore().getType()))
      store.getValueToStoreMutable().assign(bitsOf(store.getValueToStore()));
    else if (auto store = dyn_cast<memref::StoreOp>(op); store && holdsBF16(store.getValue().getType()))
      store.getValueMutable().assign(bitsOf(store.getValue()));
    else if (auto store = dyn_cast<vector::StoreOp>(op); store && holdsBF16(store.getValueToStore().getType()))
      store.getValueToStoreMutable().assign(bitsOf(store.getValueToStore()));
  });
}
/// Ops that only move bf16 values (selects, vector shuffling): the same op on
/// the bits, so no bf16 is left where nothing computes.
struct MoveBits : RewritePattern {
  MoveBits(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (!isa<arith::SelectOp, vector::BroadcastOp, vector::ExtractOp, vector::InsertOp,
             vector::FromElementsOp, vector::ShuffleOp, vector::ExtractStridedSliceOp,
             vector::InsertStridedSliceOp, vector::ShapeCastOp>(op) ||
        op->getNumRegions() ||
        (llvm::none_of(op->getResultTypes(), holdsBF16) &&
         llvm::none_of(op->getOperandTypes(), holdsBF16)))
      return failure();
    SmallVector<Value> operands;
    for (Value v : op->getOperands())
      operands.push_back(holdsBF16(v.getType())
                             ? arith::BitcastOp::create(rewriter, op->getLoc(),
                                                        withoutBF16(v.getType()), v)
                                   .getResult()
                             : v);
    SmallVector<Type> types;
    for (Type t : op->getResultTypes())
      types.push_back(holdsBF16(t) ? withoutBF16(t) : t);
    OperationState state(op->getLoc(), op->getName(), operands, types, op->getAttrs());
    Operation *bits = rewriter.create(state);
    SmallVector<Value> results;
    for (auto [old, now] : llvm::zip(op->getResults(), bits->getResults()))
      results.push_back(old.getType() == now.getType()
                            ? now
                            : arith::BitcastOp::create(rewriter, op->getLoc(), old.getType(), now)
                                  .getResult());
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct EmulateBF16StoragePass
    : public kiln::impl::KilnEmulateBF16StorageBase<EmulateBF16StoragePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    bool any = false;
    forEachValue(func, [&](Value v) { any |= holdsBF16(v.getType()); });
    if (!any)
      return;
    retypeBuffers(func);
    OpPassManager emulate(func::FuncOp::getOperationName());
    arith::ArithEmulateUnsupportedFloatsOptions options;
    options.sourceTypeStrs = {"bf16"};
    options.targetTypeStr = "f32";
    emulate.addPass(arith::createArithEmulateUnsupportedFloats(options));
    if (failed(runPipeline(emulate, func)))
      return signalPassFailure();
    // The casts as bits; a bitcast of a bitcast folds, so the loads' and
    // stores' bf16 disappears with them.
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    arith::BitcastOp::getCanonicalizationPatterns(patterns, &getContext());
    patterns.add<MoveBits>(&getContext());
    if (failed(applyPatternsGreedily(func, std::move(patterns))))
      return signalPassFailure();
    // What is left computes on bf16 (the bitcasts only feed it): name it.
    WalkResult left = func.walk([](Operation *op) {
      if (isa<arith::BitcastOp>(op) || (llvm::none_of(op->getResultTypes(), holdsBF16) &&
                                        llvm::none_of(op->getOperandTypes(), holdsBF16)))
        return WalkResult::advance();
      op->emitOpError("still computes on bf16 after emulation: kiln cannot run this kernel "
                      "on a device without bf16");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
