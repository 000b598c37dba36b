//===- DecomposeAttention.cpp - kiln.attention as matmuls and a softmax ---===//
//
// Only the CPU has a fused attention kernel (an online softmax over blocks
// of keys, KernelToLinalg's attention form). Elsewhere the op becomes what
// it means, built from ops every device compiles: q k^T (the transpose is a
// view the matmul folds into its reads), the scale, the mask or the causal
// rule, softmax over the keys, and the product with v. Fusion then gives
// three kernels: the scores with their epilogue, the softmax, the product.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"

#include <limits>
#include <numeric>

namespace kiln {
#define GEN_PASS_DEF_KILNDECOMPOSEATTENTION
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {
/// The largest E and Ev the CPU attention kernel takes.
constexpr int64_t kMaxFusedHead = 256;

/// Builds placed kiln ops by name, as the graph builder does.
struct Emitter {
  OpBuilder &b;
  Location loc;
  DeviceAttr device;

  Value op(StringRef name, ValueRange operands, Type type,
           ArrayRef<NamedAttribute> attrs = {}) {
    OperationState state(loc, name);
    state.addOperands(operands);
    state.addTypes(type);
    state.addAttributes(attrs);
    state.addAttribute("device", device);
    return b.create(state)->getResult(0);
  }
  Value constant(RankedTensorType type, Attribute value) {
    return op("kiln.constant", {}, type, {b.getNamedAttr("value", value)});
  }
  Value scalar(Type element, double v) {
    auto type = RankedTensorType::get({}, element);
    return constant(type, DenseElementsAttr::get(type, b.getFloatAttr(element, v)));
  }
  /// softmax over the last axis: exp(x - max) / sum, as kiln::softmax.
  Value softmax(Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> kept(type.getShape());
    kept.back() = 1;
    auto rowType = RankedTensorType::get(kept, type.getElementType());
    auto reduce = [&](ReduceKind kind, Value v) {
      return op("kiln.reduce", v, rowType,
                {b.getNamedAttr("kind", ReduceKindAttr::get(b.getContext(), kind)),
                 b.getNamedAttr("axes", b.getDenseI64ArrayAttr({type.getRank() - 1})),
                 b.getNamedAttr("keepdims", b.getUnitAttr())});
    };
    Value e = op("kiln.exp", op("kiln.sub", {x, reduce(ReduceKind::max, x)}, type), type);
    return op("kiln.div", {e, reduce(ReduceKind::sum, e)}, type);
  }
};

void decompose(AttentionOp attention) {
  OpBuilder b(attention);
  Emitter emit{b, attention.getLoc(), attention.getPlacement()};
  auto shapeOf = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> q = shapeOf(attention.getQuery()), k = shapeOf(attention.getKey()),
                    y = shapeOf(attention.getResult());
  Type element = getElementTypeOrSelf(attention.getQuery().getType());
  const int64_t rank = static_cast<int64_t>(k.size());
  SmallVector<int64_t> permutation(rank);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::swap(permutation[rank - 1], permutation[rank - 2]);
  SmallVector<int64_t> kt(k);
  std::swap(kt[rank - 1], kt[rank - 2]);
  Value keyT = emit.op("kiln.transpose", attention.getKey(), RankedTensorType::get(kt, element),
                       {b.getNamedAttr("permutation", b.getDenseI64ArrayAttr(permutation))});
  // Scores [batch..., L, S]: the result's batch, q's rows, k's rows.
  SmallVector<int64_t> scores(y.drop_back(1));
  scores.push_back(k[rank - 2]);
  auto scoreType = RankedTensorType::get(scores, element);
  Value s = emit.op("kiln.matmul", {attention.getQuery(), keyT}, scoreType);
  s = emit.op("kiln.mul", {s, emit.scalar(element, attention.getScale().convertToDouble())},
              scoreType);
  const double minusInf = -std::numeric_limits<double>::infinity();
  auto keepWhere = [&](Value cond) {
    return emit.op("kiln.select", {cond, s, emit.scalar(element, minusInf)}, scoreType);
  };
  if (attention.getCausal()) {
    // Column j of row i is kept where j <= i: two index vectors, not an
    // L x S mask.
    int64_t l = q[q.size() - 2], n = k[rank - 2];
    auto index = [&](ArrayRef<int64_t> shape, int64_t count) {
      SmallVector<Attribute> values;
      for (int64_t i = 0; i < count; ++i)
        values.push_back(b.getFloatAttr(element, double(i)));
      auto type = RankedTensorType::get(shape, element);
      return emit.constant(type, DenseElementsAttr::get(type, values));
    };
    Value rows = index({l, 1}, l), cols = index({1, n}, n);
    auto boolType = RankedTensorType::get({l, n}, b.getI1Type());
    s = keepWhere(emit.op(
        "kiln.cmp", {cols, rows}, boolType,
        {b.getNamedAttr("predicate", CmpPredicateAttr::get(b.getContext(), CmpPredicate::le))}));
  } else if (Value mask = attention.getMask()) {
    s = getElementTypeOrSelf(mask.getType()).isInteger(1)
            ? keepWhere(mask)
            : emit.op("kiln.add", {s, mask}, scoreType);
  }
  Value out = emit.op("kiln.matmul", {emit.softmax(s), attention.getValue()},
                      attention.getResult().getType());
  attention.replaceAllUsesWith(out);
  attention.erase();
}

struct DecomposeAttentionPass
    : public kiln::impl::KilnDecomposeAttentionBase<DecomposeAttentionPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<AttentionOp> found;
    getOperation().walk([&](AttentionOp op) {
      DeviceAttr device = op.getPlacement();
      if (!device) {
        op.emitError("is not placed: run kiln-place-devices before kiln-decompose-attention");
        return signalPassFailure();
      }
      // The CPU kernel keeps a row of q, and of the output per query, in
      // unrolled vector code: head sizes past 256 take the decomposition.
      auto size = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape().back(); };
      if (all || device.kind() != TargetApi::cpu || size(op.getQuery()) > kMaxFusedHead ||
          size(op.getValue()) > kMaxFusedHead)
        found.push_back(op);
    });
    for (AttentionOp op : found)
      decompose(op);
  }
};
} // namespace
