//===- FuseElementwise.cpp - maximal elementwise chains into kernels ------===//
//
// Views (transpose, reshape, broadcast_to, slice) fuse like elementwise ops:
// codegen folds them into the indexing of the kernel's loads. A reduction
// takes its elementwise producers (prologue) and joins the kernel of its
// consumers (epilogue) when they read it per row: at its own shape, or
// broadcast back over the reduced dimensions. Reductions over the same
// input shape and axes share a kernel that way, so softmax and layer norm
// are one kernel each (a "row kernel", RowKernel.cpp). Arg reductions and
// pooling root a kernel of their own.
// A contraction (matmul) joins the kernel of its elementwise consumers (the
// epilogue: bias, activation, residual) and takes only views in front.
//
// Greedy, from the results upwards: an op joins its users' kernel when every
// user is in that one kernel on the same device. Only a kernel's first-made
// op (its root) can then have users outside the kernel, so no two kernels
// depend on each other in a cycle. Values the host reads (func.return) are
// extra kernel results when they have the kernel's iteration shape.
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEELEMENTWISE
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {
struct Group {
  DeviceAttr device;
  ArrayRef<int64_t> shape;
  bool reduction = false; // rooted at an arg reduction or pooling: only prologue ops join
  /// A row kernel: its reductions' input shape, result shape and axes.
  bool row = false;
  SmallVector<int64_t> rowFull, rowShape, rowAxes;
  Operation *contraction = nullptr; // at most one per kernel
  /// Rooted at a kiln.attention (CPU): only views join, in front of it.
  bool attention = false;
  /// Members feeding the contraction's operands: only views may join there
  /// (an elementwise producer would be recomputed for every product term).
  llvm::SmallPtrSet<Operation *, 8> prologue;
  SmallVector<Operation *> ops; // reverse program order while building
  /// Values the members read from outside the kernel, and members read
  /// outside it: the buffers the kernel will bind.
  llvm::SetVector<Value> external;
  int results = 0;
  DenseSet<Operation *> members; // group.ops as a set
};

/// Splat constants copied into kernels. Rank-0 ones (the scalars of
/// `x * 2.0f`) stay kernel operands instead: a 4-byte buffer, so a kernel's
/// code does not depend on a scalar's value and a new value (a schedule, a
/// step size) reuses the compiled kernel. A program compiled ahead of time
/// has fixed scalars (kInlineScalarAttr): copied in, LLVM folds them
/// (ReLU6's bounds: no NaN check per vector).
bool isSplatConstant(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant || (cast<RankedTensorType>(constant.getType()).getRank() == 0 &&
                    !constant->hasAttr(kInlineScalarAttr)))
    return false;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  return dense && dense.isSplat();
}

/// Whether `operand` of `user` is a splat constant copied into the kernel.
/// A convolution reads its operands from buffers (guarded loads at computed
/// positions): a constant input or filter stays a kernel input.
bool copiedIn(Operation *user, Value operand) {
  // (So is a concat's operand when a convolution reads the concat: it
  // gathers each input's channels from that input's buffer.)
  return isSplatConstant(operand) && !isa<Conv2dOp, AttentionOp>(user) &&
         !(isa<ConcatOp>(user) &&
           llvm::any_of(user->getUsers(), [](Operation *u) { return isa<Conv2dOp>(u); }));
}

ArrayRef<int64_t> shapeOf(Operation *op) {
  return cast<RankedTensorType>(op->getResult(0).getType()).getShape();
}

DeviceAttr deviceOf(Operation *op) {
  return cast<PlacedOpInterface>(op).getPlacement();
}

/// The group every user of `op` belongs to, or -1 when they are not all in
/// one group (or a user is not fusible).
int commonUserGroup(Operation *op, const DenseMap<Operation *, int> &groupOf,
                    bool &readByHost) {
  int common = -1;
  readByHost = false;
  for (Operation *user : op->getUsers()) {
    if (isa<func::ReturnOp>(user)) {
      readByHost = true;
      continue;
    }
    auto it = groupOf.find(user);
    if (it == groupOf.end())
      return -1;
    if (common != -1 && common != it->second)
      return -1;
    common = it->second;
  }
  return common;
}

/// A long elementwise kernel computed from splat constants (and scalars)
/// alone: LLVM 22's loop vectorizer asks whether each value is uniform by
/// walking its operand DAG without memoization, which takes exponential
/// time when every path is uniform (a 64-op tanh/abs chain from
/// Tensor::full ran for minutes). Reading one constant from a buffer makes
/// the chain vary per element, and the walk stops at the first such value.
/// Returns that constant, or null.
Value uniformChainAnchor(const Group &group, ArrayRef<Operation *> ops) {
  constexpr size_t kLongChain = 16;
  if (ops.size() < kLongChain || group.row || group.contraction || group.reduction ||
      group.device.kind() != TargetApi::cpu)
    return Value(); // (GPU kernels are not loop-vectorized)
  Value anchor;
  for (Operation *op : ops)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && group.members.contains(def))
        continue;
      if (!copiedIn(op, operand)) {
        if (cast<RankedTensorType>(operand.getType()).getRank() > 0)
          return Value(); // a varying input already
        continue;
      }
      if (!anchor && cast<RankedTensorType>(operand.getType()).getShape() == group.shape)
        anchor = operand;
    }
  return anchor;
}

void materialize(Group &group) {
  SmallVector<Operation *> ops(llvm::reverse(group.ops));
  llvm::SmallPtrSet<Operation *, 16> members(ops.begin(), ops.end());
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs;
  Value anchor = uniformChainAnchor(group, ops);
  for (Operation *op : ops) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if ((def && members.contains(def)) || (copiedIn(op, operand) && operand != anchor))
        continue;
      inputs.insert(operand);
    }
    if (llvm::any_of(op->getUsers(),
                     [&](Operation *user) { return !members.contains(user); }))
      outputs.push_back(op->getResult(0));
  }

  Operation *root = ops.back();
  OpBuilder builder(root);
  SmallVector<Type> resultTypes;
  SmallVector<Location> locs;
  for (Value v : outputs) {
    resultTypes.push_back(v.getType());
    locs.push_back(v.getLoc());
  }
  auto kernel = KernelOp::create(builder, builder.getFusedLoc(locs), resultTypes,
                                 inputs.getArrayRef(), group.device);
  Block &body = kernel.getBody().front();
  IRMapping mapping;
  for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
    mapping.map(input, arg);
  builder.setInsertionPointToStart(&body);
  for (Operation *op : ops) {
    for (Value operand : op->getOperands())
      if (!mapping.contains(operand) && copiedIn(op, operand) && operand != anchor) {
        Operation *copy = builder.clone(*operand.getDefiningOp());
        cast<PlacedOpInterface>(copy).setPlacement(DeviceAttr());
        mapping.map(operand, copy->getResult(0));
      }
    Operation *copy = builder.clone(*op, mapping);
    // Inside a kernel the kernel's device is the placement.
    cast<PlacedOpInterface>(copy).setPlacement(DeviceAttr());
  }
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(mapping.lookup(v));
  YieldOp::create(builder, root->getLoc(), yielded);

  for (auto [output, result] : llvm::zip(outputs, kernel.getResults()))
    output.replaceUsesWithIf(result, [&](OpOperand &use) {
      return !members.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(ops))
    op->erase();
}

/// Whether a view of `group` consumes `op`'s result, directly or through
/// other members (views on other inputs, such as reshaped parameters, are
/// fine).
bool viewAfter(const Group &group, Operation *op) {
  const DenseSet<Operation *> &members = group.members;
  SmallVector<Operation *> work(op->getUsers().begin(), op->getUsers().end());
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *user = work.pop_back_val();
    if (!members.contains(user) || !seen.insert(user).second)
      continue;
    if (user->hasTrait<View>())
      return true;
    work.append(user->getUsers().begin(), user->getUsers().end());
  }
  return false;
}

/// The buffers `group` binds once `op` (whose users are visited) is in it.
int bindingsWith(const Group &group, Operation *op) {
  const DenseSet<Operation *> &members = group.members;
  int count = static_cast<int>(group.external.size()) + group.results;
  if (group.external.contains(op->getResult(0)))
    --count;
  llvm::SmallPtrSet<Value, 4> added;
  for (Value operand : op->getOperands())
    if (!copiedIn(op, operand) && !group.external.contains(operand) &&
        added.insert(operand).second)
      ++count;
  if (llvm::any_of(op->getUsers(), [&](Operation *user) { return !members.contains(user); }))
    ++count;
  return count;
}

/// Records `op`, now a member, in the group's binding count.
void trackBindings(Group &group, Operation *op) {
  const DenseSet<Operation *> &members = group.members;
  group.external.remove(op->getResult(0));
  for (Value operand : op->getOperands())
    if (!copiedIn(op, operand))
      group.external.insert(operand);
  if (llvm::any_of(op->getUsers(), [&](Operation *user) { return !members.contains(user); }))
    ++group.results;
}

void addMember(Group &group, Operation *op) {
  trackBindings(group, op);
  group.members.insert(op);
  if (op->hasTrait<Contraction>())
    group.contraction = op;
  if (llvm::any_of(op->getUsers(), [&](Operation *user) {
        return user == group.contraction || group.prologue.contains(user);
      }))
    group.prologue.insert(op);
  group.ops.push_back(op);
}

bool joins(const Group &group, Operation *op, bool readByHost);

/// A concat along the channels read only as the input of the group's dense
/// convolution (16 or more filters: the tiled forms of both devices) or
/// pooling folds into that kernel: the convolution gathers each channel
/// from the input holding it, the pool sweeps each plane from its input.
/// One kernel instead of two, and the concatenation is never written
/// (SqueezeNet's fire modules).
bool foldsIntoWindow(const Group &group, Operation *op) {
  auto concat = dyn_cast<ConcatOp>(op);
  if (!concat || concat.getAxisAttr().getInt() != 1 || shapeOf(op).size() != 4)
    return false;
  Operation *root = group.contraction ? group.contraction
                    : group.reduction ? group.ops.front()
                                      : nullptr;
  if (auto conv = dyn_cast_or_null<Conv2dOp>(root)) {
    if (conv.getGroupsAttr().getInt() != 1 || conv.getFilter().getType().getShape()[0] < 16)
      return false;
  } else if (!isa_and_nonnull<Pool2dOp>(root)) {
    return false;
  }
  return llvm::all_of(op->getUses(), [&](OpOperand &use) {
    return use.getOwner() == root && use.getOperandNumber() == 0;
  });
}

/// An elementwise op (or view) whose users are in several kernels is copied
/// into each of them instead of being written out and read back: it is
/// cheaper to recompute than a round trip through memory (softmax's
/// exp(x - max) feeds both its sum and its division; layer norm's centered
/// input both its variance and its normalization). Its operands then have
/// several users in turn and are considered the same way. When a user's
/// kernel refuses the copy (a matmul or convolution reads its operands as
/// they are), the value is written out anyway: then nobody gets a copy, and
/// every user reads the one result. So the op stays fusible with its own
/// producers (a residual's `linear(x) + x` is one kernel, not two), and
/// nothing is computed twice.
bool recomputeInUsers(Operation *op, SmallVector<Group, 0> &groups,
                      DenseMap<Operation *, int> &groupOf,
                      function_ref<bool(const Group &, Operation *)> fits) {
  if ((!op->hasTrait<Elementwise>() && !op->hasTrait<View>()) ||
      llvm::any_of(op->getUsers(), [](Operation *user) { return isa<GatherOp>(user); }))
    return false; // (not pad/concat: they read several inputs per element)
  llvm::SetVector<int> targets;
  for (Operation *user : op->getUsers()) {
    auto it = groupOf.find(user);
    if (it == groupOf.end())
      return false; // read by the host or by an op outside every kernel
    targets.insert(it->second);
  }
  if (targets.size() < 2 || targets.size() > 4)
    return false;
  for (int target : targets)
    if (!fits(groups[target], op) || !joins(groups[target], op, /*readByHost=*/false))
      return false;
  for (int target : targets) {
    Group &group = groups[target];
    OpBuilder builder(op);
    Operation *copy = builder.clone(*op);
    op->getResult(0).replaceUsesWithIf(copy->getResult(0), [&](OpOperand &use) {
      auto it = groupOf.find(use.getOwner());
      return it != groupOf.end() && it->second == target;
    });
    group.external.remove(op->getResult(0)); // the copy computes it inside now
    addMember(group, copy);
    groupOf[copy] = target;
  }
  op->erase();
  return true;
}

/// Whether `op`, all of whose users are in `group`, joins it.
/// Whether `op` ends a chain of single-use elementwise ops and views one of
/// whose operands is computed by a matmul or convolution: the chain can be
/// that contraction's epilogue.
bool endsContractionChain(Operation *op, int depth = 0) {
  if ((!op->hasTrait<Elementwise>() && !op->hasTrait<View>()) || depth > 12)
    return false;
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (!def || !def->hasOneUse())
      continue;
    if (def->hasTrait<Contraction>() ||
        ((def->hasTrait<Elementwise>() || def->hasTrait<View>()) &&
         endsContractionChain(def, depth + 1)))
      return true;
  }
  return false;
}

/// A pool whose windows overlap (a window larger than its stride) reads
/// each input element several times: a prologue there is evaluated that
/// many times (2.25 at 3x3/2, ResNet's stem).
bool overlappingPool(const Group &group) {
  auto pool = group.reduction ? dyn_cast<Pool2dOp>(group.ops.front()) : Pool2dOp();
  if (!pool)
    return false;
  ArrayRef<int64_t> kernel = pool.getKernel(), strides = pool.getStrides();
  return kernel[0] > strides[0] || kernel[1] > strides[1];
}

bool joins(const Group &group, Operation *op, bool readByHost) {
  if (!group.device.isSameDevice(deviceOf(op)) || isa<AttentionOp>(op))
    return false;
  if (group.attention) // its kernel reads q, k, v and the mask through views
    return op->hasTrait<View>() && !readByHost;
  bool sameShape = shapeOf(op) == group.shape;
  // pad and concat read with bounds checks: only plain elementwise kernels
  // (their own loop form) take them.
  auto guarded = [](Operation *m) { return m->hasTrait<GuardedView>(); };
  // gather reads its data operand at computed positions: a kernel input.
  if (llvm::any_of(op->getUses(), [](OpOperand &use) {
        return isa<GatherOp>(use.getOwner()) && use.getOperandNumber() == 0;
      }))
    return false;
  if (foldsIntoWindow(group, op))
    return !readByHost;
  if (guarded(op) && (group.reduction || group.row || group.contraction))
    return false;
  // One concat per kernel: nested ones (a roll is two slice+concat pairs,
  // often over a transposed view) compose their bounds checks and index
  // arithmetic into expressions that took the CPU lowering minutes (Swin's
  // shifted windows).
  auto isConcat = [](Operation *m) { return isa<ConcatOp>(m); };
  if (isConcat(op) && llvm::any_of(group.ops, isConcat))
    return false;
  if (group.row && op->hasTrait<Contraction>())
    return false; // it would be recomputed in every phase
  if (op->hasTrait<Contraction>() && llvm::any_of(group.ops, guarded))
    return false;
  // A contraction's elementwise consumers before an overlapping pool are
  // its epilogue, computed once per element, not the pool's prologue,
  // computed once per window reading it.
  if (overlappingPool(group) && endsContractionChain(op))
    return false;
  if (group.reduction) // one root per kernel: no contraction in a prologue
    return !readByHost && !op->hasTrait<Contraction>();
  bool feedsContraction = llvm::any_of(op->getUsers(), [&](Operation *user) {
    return user == group.contraction || group.prologue.contains(user);
  });
  if (feedsContraction) // a convolution reads its operands as they are
    return op->hasTrait<View>() && !readByHost && !isa<Conv2dOp>(group.contraction);
  if (op->hasTrait<Contraction>()) {
    // The epilogue must read the product at the iteration point: same shape,
    // consumers of that shape, and no view between it and the results.
    return !group.contraction && sameShape && !viewAfter(group, op) &&
           llvm::all_of(op->getUsers(), [&](Operation *user) {
             return isa<func::ReturnOp>(user) || shapeOf(user) == group.shape;
           });
  }
  return sameShape || !readByHost;
}

void makeRow(Group &group, ReduceOp reduce) {
  auto shape = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  group.row = true;
  group.rowFull.assign(shape(reduce.getInput()).begin(), shape(reduce.getInput()).end());
  group.rowShape.assign(shape(reduce.getResult()).begin(), shape(reduce.getResult()).end());
  group.rowAxes.assign(reduce.getAxes().begin(), reduce.getAxes().end());
}

/// Whether `reduce`, all of whose users are in `group` (index `target`),
/// joins it: same device, no contraction or guarded view there, the same
/// iteration space as the group's other reductions, and every value computed
/// from the result inside the group read per row (RowKernel.cpp's contract).
bool reductionJoins(const Group &group, int target, ReduceOp reduce, bool readByHost,
                    const DenseMap<Operation *, int> &groupOf) {
  auto shape = [](Value v) { return cast<RankedTensorType>(v.getType()).getShape(); };
  ArrayRef<int64_t> full = shape(reduce.getInput()), rowShape = shape(reduce.getResult());
  if (!group.device.isSameDevice(deviceOf(reduce)) || group.reduction || group.contraction ||
      llvm::any_of(group.ops, [](Operation *m) { return m->hasTrait<GuardedView>(); }) ||
      (readByHost && rowShape != group.shape))
    return false;
  if (group.row ? (full != ArrayRef<int64_t>(group.rowFull) ||
                   rowShape != ArrayRef<int64_t>(group.rowShape) ||
                   reduce.getAxes() != ArrayRef<int64_t>(group.rowAxes))
                : (group.shape != full && group.shape != rowShape))
    return false;
  // Everything computed from the result inside the group: per-row values
  // (row shape) and per-element ones (full shape), never through a view,
  // which would read another row's value.
  bool keepdims = rowShape.size() == full.size();
  SmallVector<std::pair<Value, bool>> work = {{reduce.getResult(), true}};
  while (!work.empty()) {
    auto [v, perRow] = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      auto it = groupOf.find(user);
      if (it == groupOf.end() || it->second != target)
        continue; // the host or another kernel reads the kernel's result
      if (isa<ReduceOp>(user)) {
        if (perRow && full != rowShape)
          return false;
        continue; // a later reduction of the group, checked when it joined
      }
      if (!user->hasTrait<Elementwise>())
        return false;
      ArrayRef<int64_t> at = shapeOf(user);
      if (perRow && at == rowShape)
        work.push_back({user->getResult(0), true});
      else if (at == full && (keepdims || !perRow))
        work.push_back({user->getResult(0), false});
      else
        return false;
    }
  }
  return true;
}

/// One operand per scalar value: 31 `+ 1.0f` are one buffer, not 31.
void shareScalars(func::FuncOp func) {
  DenseMap<std::pair<Attribute, Attribute>, ConstantOp> first;
  SmallVector<ConstantOp> duplicates;
  func.walk([&](ConstantOp constant) {
    if (cast<RankedTensorType>(constant.getType()).getRank() != 0 ||
        constant->getParentOfType<KernelOp>())
      return;
    auto [it, inserted] =
        first.try_emplace({constant.getValue(), cast<PlacedOpInterface>(*constant).getPlacement()},
                          constant);
    if (!inserted) {
      constant.replaceAllUsesWith(it->second.getResult());
      duplicates.push_back(constant);
    }
  });
  for (ConstantOp constant : duplicates)
    constant.erase();
}

/// A concat of more parts than a kernel may bind becomes concats of at
/// most `maxBindings - 1` parts each, joined the same way: 40 parts on
/// lavapipe (32 buffers a kernel) are a concat of 31 and one of the rest.
void splitWideConcats(func::FuncOp func, int maxBindings) {
  if (maxBindings <= 0)
    return;
  size_t perKernel = std::max(2, maxBindings - 1);
  SmallVector<ConcatOp> wide;
  func.walk([&](ConcatOp concat) {
    if (concat.getInputs().size() > perKernel && !concat->getParentOfType<KernelOp>())
      wide.push_back(concat);
  });
  for (ConcatOp concat : wide) {
    OpBuilder b(concat);
    DeviceAttr device = deviceOf(concat);
    SmallVector<Value> parts(concat.getInputs());
    while (parts.size() > perKernel) {
      SmallVector<Value> joined;
      for (size_t i = 0; i < parts.size(); i += perKernel) {
        ArrayRef<Value> chunk = ArrayRef<Value>(parts).slice(i, std::min(perKernel, parts.size() - i));
        if (chunk.size() == 1) {
          joined.push_back(chunk.front());
          continue;
        }
        auto part = ConcatOp::create(b, concat.getLoc(), chunk, concat.getAxisAttr(), device);
        joined.push_back(part.getResult());
      }
      parts = std::move(joined);
    }
    concat->setOperands(parts);
  }
}

struct FuseElementwisePass
    : public kiln::impl::KilnFuseElementwiseBase<FuseElementwisePass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // A value nothing reads (a graph written by hand or imported) would root
    // a kernel without results: drop it and what only it reads, keeping the
    // graph's inputs (their numbering is the program's signature).
    for (Block &block : func.getBody())
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
        if (!isa<InputOp>(op) && isOpTriviallyDead(&op))
          op.erase();
    shareScalars(func);
    splitWideConcats(func, maxBindings);
    // A kernel stops growing at the device's binding limit and at a size
    // that keeps compile time linear in the graph.
    auto fits = [&](const Group &group, Operation *op) {
      return (maxOps <= 0 || static_cast<int>(group.ops.size()) < maxOps) &&
             (maxBindings <= 0 || bindingsWith(group, op) <= maxBindings);
    };
    SmallVector<Group, 0> groups;
    DenseMap<Operation *, int> groupOf;
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if ((op->hasTrait<Elementwise>() || op->hasTrait<View>() || op->hasTrait<GuardedView>() ||
           op->hasTrait<Reduction>() || op->hasTrait<Contraction>() || isa<AttentionOp>(op)) &&
          !op->getParentOfType<KernelOp>())
        ops.push_back(op);
    });
    for (Operation *op : llvm::reverse(ops)) {
      if (!deviceOf(op)) {
        op->emitError("is not placed: run kiln-place-devices before fusion");
        return signalPassFailure();
      }
      bool readByHost;
      auto reduce = dyn_cast<ReduceOp>(op);
      // Arg reductions and pooling root their own kernel (their consumers
      // are a new kernel).
      int target = op->hasTrait<Reduction>() && !reduce
                       ? -1
                       : commonUserGroup(op, groupOf, readByHost);
      if (target != -1 && fits(groups[target], op) &&
          (reduce ? reductionJoins(groups[target], target, reduce, readByHost, groupOf)
                  : joins(groups[target], op, readByHost))) {
        addMember(groups[target], op);
        groupOf[op] = target;
        if (reduce)
          makeRow(groups[target], reduce);
        continue;
      }
      if (target == -1 && recomputeInUsers(op, groups, groupOf, fits))
        continue;
      groupOf[op] = groups.size();
      Group group{deviceOf(op), shapeOf(op), op->hasTrait<Reduction>() && !reduce};
      if (reduce)
        makeRow(group, reduce);
      group.attention = isa<AttentionOp>(op);
      trackBindings(group, op);
      group.members.insert(op);
      group.ops.push_back(op);
      if (op->hasTrait<Contraction>())
        group.contraction = op;
      groups.push_back(std::move(group));
    }
    for (Group &group : groups)
      materialize(group);
    // Splat constants were copied into the kernels that use them: the
    // originals are dead and would otherwise be uploaded on every run.
    SmallVector<ConstantOp> dead;
    func.walk([&](ConstantOp constant) {
      if (constant->use_empty() && !constant->getParentOfType<KernelOp>())
        dead.push_back(constant);
    });
    for (ConstantOp constant : dead)
      constant.erase();
  }
};
} // namespace
