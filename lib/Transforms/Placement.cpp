//===- Placement.cpp - resolve devices, report every conflict -------------===//
//
// Forward over the graph: committed values carry their device and the op
// that committed them; a compute op is committed to the device its committed
// operands share, and conflicts when they differ. Backward: uncommitted ops
// take the device of their users, cloned once per distinct device, so a
// literal used on two devices is materialized on each (as in JAX).
//
//===----------------------------------------------------------------------===//

#include "kiln/Transforms/Placement.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSwitch.h"


using namespace mlir;
using namespace kiln;

std::optional<PlacementPolicy> kiln::parsePlacementPolicy(StringRef text) {
  return llvm::StringSwitch<std::optional<PlacementPolicy>>(text)
      .Case("error", PlacementPolicy::Error)
      .Case("log", PlacementPolicy::Log)
      .Case("allow", PlacementPolicy::Allow)
      .Default(std::nullopt);
}

int64_t kiln::tensorBytes(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  int64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  return tensor.getNumElements() * std::max<int64_t>(1, bits / 8);
}

std::vector<std::string> kiln::suggestFixes(const PlacementConflict &conflict) {
  std::vector<std::string> fixes;
  const OperandPlacement &keep = conflict.operands[conflict.keep];
  auto others = llvm::make_filter_range(conflict.operands, [&](const OperandPlacement &o) {
    return !o.device.isSameDevice(keep.device);
  });
  if (!keep.device.getAdapter().empty())
    for (const OperandPlacement &other : others)
      if (other.device.getAdapter() == keep.device.getAdapter() &&
          other.device.getApi() != keep.device.getApi())
        fixes.push_back("fix: use one execution context for both: create operand #" +
                        std::to_string(other.index) + " on \"" +
                        keep.device.getName() + "\" (or set KILN_DEVICE=" +
                        keep.device.getApi().str() + "), or move it with `.to(<operand #" +
                        std::to_string(keep.index) + ">.device())` (" +
                        std::to_string(tensorBytes(other.value.getType())) +
                        " bytes, copied through the host)");
  if (!fixes.empty())
    return fixes;
  for (const OperandPlacement &move : others) {
    std::string text = "fix: move operand #" + std::to_string(move.index) +
                       " to \"" + keep.device.getName() + "\" with `.to(<operand #" +
                       std::to_string(keep.index) + ">.device())`";
    if (auto loc = dyn_cast<FileLineColLoc>(move.committedAt))
      text += " at " + loc.getFilename().str() + ":" + std::to_string(loc.getLine());
    text += " (" + std::to_string(tensorBytes(move.value.getType())) +
            " bytes to transfer), or create it without a device so it follows";
    fixes.push_back(text);
  }
  return fixes;
}

namespace {
bool isScalar(Value v) { return cast<RankedTensorType>(v.getType()).getRank() == 0; }

std::string describe(DeviceAttr device) {
  std::string text = "\"" + device.getName() + "\"";
  if (!device.getWritten().empty() && device.getWritten() != device.getName())
    text += " (written \"" + device.getWritten().str() + "\")";
  return text;
}

/// The operand that shares a physical adapter with the first operand but
/// reaches it through another execution context, if any.
const OperandPlacement *sameAdapterOtherContext(const PlacementConflict &conflict) {
  DeviceAttr first = conflict.operands.front().device;
  for (const OperandPlacement &operand : ArrayRef(conflict.operands).drop_front())
    if (!first.getAdapter().empty() && operand.device.getAdapter() == first.getAdapter() &&
        operand.device.getApi() != first.getApi())
      return &operand;
  return nullptr;
}

void emitConflict(const PlacementConflict &conflict) {
  Operation *op = conflict.op;
  InFlightDiagnostic diag = op->emitError();
  if (const OperandPlacement *other = sameAdapterOtherContext(conflict)) {
    // One GPU, two runtimes (Burn's "Auto" vs "Metal" handle): not a generic
    // mismatch, and the fix is to pick one context.
    const OperandPlacement &first = conflict.operands.front();
    diag << "operands of '" << op->getName() << "' are on the same physical adapter ("
         << first.device.getAdapter() << ") through two execution contexts: operand #"
         << first.index << " through \"" << first.device.getName() << "\", operand #"
         << other->index << " through \"" << other->device.getName()
         << "\"; they are separate runtimes whose memory cannot be shared";
  } else {
    diag << "operands of '" << op->getName() << "' are on different devices: ";
    for (auto [i, operand] : llvm::enumerate(conflict.operands))
      diag << (i ? ", " : "") << "operand #" << operand.index << " is on \""
           << operand.device.getName() << "\"";
  }
  for (const OperandPlacement &operand : conflict.operands) {
    diag.attachNote(operand.committedAt)
        << "operand #" << operand.index << " (" << operand.value.getType()
        << ") is committed to " << describe(operand.device) << " here";
  }
  for (const std::string &fix : suggestFixes(conflict))
    diag.attachNote(op->getLoc()) << fix;
}

class Placer {
public:
  Placer(func::FuncOp func, const PlacementOptions &options)
      : func(func), options(options) {}

  LogicalResult run(SmallVectorImpl<PlacementConflict> *conflicts,
                    CommittedPlacements *committed);

private:
  void placeForward(Operation &op, SmallVectorImpl<PlacementConflict> &found);
  void insertTransfer(Operation *op, unsigned index, DeviceAttr target,
                      bool remark);
  void placeUncommitted(Operation &op);
  /// The operand whose device to keep: the device more of the graph lives
  /// on (the model's); on a tie an accelerator over the host CPU, where
  /// people want the work to run; then the first.
  size_t keepIndex(ArrayRef<OperandPlacement> operands);

  func::FuncOp func;
  const PlacementOptions &options;
  CommittedPlacements placement; // null device: uncommitted
  /// Committed sources per device: where "the model" lives.
  llvm::DenseMap<std::pair<StringRef, int64_t>, unsigned> sourcesOn;
};
} // namespace

void Placer::insertTransfer(Operation *op, unsigned index, DeviceAttr target,
                            bool remark) {
  Value value = op->getOperand(index);
  OpBuilder builder(op);
  auto transfer = TransferOp::create(builder, op->getLoc(), value.getType(),
                                     value, target);
  placement[transfer.getResult()] = {target, transfer};
  if (remark) {
    DeviceAttr from = placement.lookup(value).device;
    op->emitRemark() << "inserted transfer of operand #" << index << " ("
                     << tensorBytes(value.getType()) << " bytes) from \""
                     << from.getName() << "\" to \"" << target.getName()
                     << "\"";
  }
  op->setOperand(index, transfer.getResult());
}

void Placer::placeForward(Operation &op,
                          SmallVectorImpl<PlacementConflict> &found) {
  auto placed = dyn_cast<PlacedOpInterface>(op);
  if (!placed)
    return;
  if (placed.isPlacementSource()) {
    DeviceAttr device = placed.getPlacement();
    for (Value result : op.getResults())
      placement[result] = {device, device ? &op : nullptr};
    return;
  }

  // Committed operands, tensors before scalars: rank-0 values never conflict.
  SmallVector<OperandPlacement> committed, scalars;
  for (OpOperand &use : op.getOpOperands()) {
    CommittedPlacement p = placement.lookup(use.get());
    if (!p.device)
      continue;
    OperandPlacement entry{use.getOperandNumber(), use.get(), p.device,
                           p.origin->getLoc()};
    (isScalar(use.get()) ? scalars : committed).push_back(entry);
  }
  SmallVector<OperandPlacement> distinct;
  for (const OperandPlacement &entry : committed)
    if (llvm::none_of(distinct, [&](const OperandPlacement &d) {
          return d.device.isSameDevice(entry.device);
        }))
      distinct.push_back(entry);

  if (distinct.size() > 1) {
    if (options.policy == PlacementPolicy::Error) {
      PlacementConflict conflict{&op, {}};
      // Report every operand that is off the first one's device, plus it.
      for (const OperandPlacement &entry : committed)
        if (&entry == &committed.front() ||
            !entry.device.isSameDevice(committed.front().device))
          conflict.operands.push_back(entry);
      conflict.keep = keepIndex(conflict.operands);
      found.push_back(conflict);
      // The result stays uncommitted so one conflict does not cascade.
      return;
    }
    // Move to the device the error's fix would keep (the model's).
    std::swap(distinct.front(), distinct[keepIndex(distinct)]);
    for (const OperandPlacement &entry : committed)
      if (!entry.device.isSameDevice(distinct.front().device))
        insertTransfer(&op, entry.index, distinct.front().device,
                       /*remark=*/true);
  }
  if (distinct.empty() && scalars.empty())
    return;
  DeviceAttr device = distinct.empty() ? scalars.front().device
                                       : distinct.front().device;
  // A committed scalar elsewhere moves silently: a few bytes, as PyTorch
  // lets CPU scalars meet GPU tensors.
  for (const OperandPlacement &entry : scalars)
    if (!entry.device.isSameDevice(device))
      insertTransfer(&op, entry.index, device, /*remark=*/false);
  Operation *origin = placement.lookup(op.getOperand(distinct.empty()
                                                         ? scalars.front().index
                                                         : distinct.front().index))
                          .origin;
  placed.setPlacement(device);
  for (Value result : op.getResults())
    placement[result] = {device, origin};
}

size_t Placer::keepIndex(ArrayRef<OperandPlacement> operands) {
  auto rank = [&](const OperandPlacement &o) {
    return std::make_pair(sourcesOn.lookup({o.device.getApi(), o.device.getOrdinal()}),
                          o.device.kind() != TargetApi::cpu);
  };
  size_t keep = 0;
  for (size_t i = 1; i < operands.size(); ++i)
    if (rank(operands[i]) > rank(operands[keep]))
      keep = i;
  return keep;
}

void Placer::placeUncommitted(Operation &op) {
  auto placed = dyn_cast<PlacedOpInterface>(op);
  if (!placed || placed.getPlacement())
    return;
  // Group the uses by the device their user runs on (few devices: a linear
  // search beats hashing names).
  SmallVector<std::pair<DeviceAttr, SmallVector<OpOperand *, 4>>, 2> demand;
  for (Value result : op.getResults())
    for (OpOperand &use : result.getUses()) {
      DeviceAttr device = options.defaultDevice;
      if (auto user = dyn_cast<PlacedOpInterface>(use.getOwner()))
        if (user.getPlacement())
          device = user.getPlacement();
      auto *entry = llvm::find_if(demand, [&](const auto &d) {
        return d.first.isSameDevice(device);
      });
      if (entry == demand.end()) {
        demand.push_back({device, {}});
        entry = &demand.back();
      }
      entry->second.push_back(&use);
    }
  if (demand.empty()) {
    placed.setPlacement(options.defaultDevice);
    return;
  }
  auto it = demand.begin();
  placed.setPlacement(it->first);
  for (++it; it != demand.end(); ++it) {
    OpBuilder builder(&op);
    Operation *clone = builder.clone(op);
    cast<PlacedOpInterface>(clone).setPlacement(it->first);
    for (OpOperand *use : it->second)
      use->set(clone->getResult(
          cast<OpResult>(use->get()).getResultNumber()));
  }
}

LogicalResult Placer::run(SmallVectorImpl<PlacementConflict> *conflicts,
                          CommittedPlacements *committed) {
  SmallVector<PlacementConflict> found;
  func.walk([&](PlacedOpInterface op) {
    if (op.isPlacementSource() && op.getPlacement())
      ++sourcesOn[{op.getPlacement().getApi(), op.getPlacement().getOrdinal()}];
  });
  for (Operation &op : llvm::make_early_inc_range(func.getBody().getOps()))
    placeForward(op, found);
  if (committed)
    for (const auto &[value, where] : placement)
      if (where.device)
        committed->insert({value, where});
  if (!found.empty()) {
    for (const PlacementConflict &conflict : found)
      emitConflict(conflict);
    if (conflicts)
      conflicts->append(found.begin(), found.end());
    return failure();
  }
  // Reverse order: users are placed before their operands' producers; clones
  // are inserted before the op and are visited next.
  Block &body = func.getBody().front();
  for (Operation *op = body.empty() ? nullptr : &body.back(); op;) {
    Operation *prev = op->getPrevNode();
    placeUncommitted(*op);
    op = prev;
  }
  return success();
}

LogicalResult kiln::placeDevices(func::FuncOp func,
                                 const PlacementOptions &options,
                                 SmallVectorImpl<PlacementConflict> *conflicts,
                                 CommittedPlacements *committed) {
  assert(options.defaultDevice && "a default device is required");
  return Placer(func, options).run(conflicts, committed);
}
