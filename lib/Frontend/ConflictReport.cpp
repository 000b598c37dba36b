//===- ConflictReport.cpp - device conflicts in the API's terms ----------===//

#include "lib/Frontend/ConflictReport.h"

#include "lib/Frontend/CallStack.h"

#include "llvm/ADT/DenseSet.h"

using namespace kiln;
using namespace mlir;

namespace {
struct Arg {
  std::string name;
  std::shared_ptr<Node> node;
  CommittedPlacement placement; // null device: uncommitted
};

/// An API call as the user wrote it, with its tensor arguments.
struct Call {
  const void *key; // one report per call, however many of its ops conflict
  std::string name;
  std::source_location loc;
  std::vector<Arg> args;
  const CallStack *stack;
  /// The OpLabel its ops were recorded under (a Python line), if any.
  const std::string *label = nullptr;
};

/// The kiln/Tensor.h function that records a node of this kind by itself.
std::string apiName(const Node &node) {
  const std::string &op = node.op;
  switch (node.kind) {
  case OpKind::Unary: return op == "cast" ? "to" : op;
  case OpKind::Binary: return op == "max" ? "maximum" : op == "min" ? "minimum" : op;
  case OpKind::Select: return "where";
  case OpKind::Transfer: return "to";
  case OpKind::View: return op == "transpose" ? "permute" : op;
  case OpKind::Reduce: return op == "max" ? "amax" : op == "min" ? "amin" : op;
  case OpKind::ArgReduce: return op == "max" ? "argmax" : "argmin";
  case OpKind::Conv2d: return "conv2d";
  case OpKind::Pool2d: return op == "max" ? "max_pool2d" : "avg_pool2d";
  case OpKind::Pad: return "pad";
  case OpKind::Concat: return "concat";
  case OpKind::Gather: return "index_select";
  case OpKind::Attention: return "scaled_dot_product_attention";
  case OpKind::Input: return "Tensor::from";
  case OpKind::Constant: return "full";
  case OpKind::Compare: return op;
  }
  return op;
}

/// The parameter names kiln/Tensor.h gives a node's operands.
std::string argName(const Node &node, size_t i) {
  switch (node.kind) {
  case OpKind::Select: return i == 0 ? "cond" : i == 1 ? "a" : "b";
  case OpKind::Binary:
  case OpKind::Compare: return i == 0 ? "a" : "b";
  case OpKind::Conv2d: return i == 0 ? "x" : "filter";
  case OpKind::Gather: return i == 0 ? "x" : "indices";
  case OpKind::Concat: return "tensors[" + std::to_string(i) + "]";
  case OpKind::Attention: return i == 0 ? "q" : i == 1 ? "k" : i == 2 ? "v" : "mask";
  default: return i == 0 ? "x" : "operand #" + std::to_string(i);
  }
}

std::string shapeText(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string mlirTypeText(const Node &node) {
  std::string s = "tensor<";
  for (int64_t d : node.shape)
    s += std::to_string(d) + "x";
  const char *element = node.dtype == DType::boolean ? "i1" : dtype_name(node.dtype);
  return s + element + ">";
}

/// "[16, 8] f32": the shape and dtype the user made.
std::string userType(const Node &node) {
  return shapeText(node.shape) + " " + dtype_name(node.dtype);
}

SourceLocation sourceOf(std::source_location loc) {
  return {loc.file_name(), static_cast<unsigned>(loc.line()), static_cast<unsigned>(loc.column())};
}

std::string fileLine(std::source_location loc) {
  return std::string(loc.file_name()) + ":" + std::to_string(loc.line());
}

/// Where the user wrote it: the Python line a node was recorded from (the
/// Python module labels its ops "file.py:line"), else the C++ source line
/// (with its column when `column`).
std::string placeOf(std::source_location loc, const std::string *label, bool column) {
  if (label) {
    size_t colon = label->rfind(':');
    if (colon != std::string::npos && colon >= 3 && label->compare(colon - 3, 3, ".py") == 0)
      return *label;
  }
  return fileLine(loc) + (column ? ":" + std::to_string(loc.column()) : "");
}

std::string placeOf(const Node &node, bool column = false) {
  return placeOf(node.loc, node.label.get(), column);
}

std::string quoted(DeviceAttr device) {
  std::string text = "\"";
  text += device.getName();
  text += '"';
  if (!device.getWritten().empty() && device.getWritten() != device.getName())
    text += " (written \"" + device.getWritten().str() + "\")";
  return text;
}

int64_t bytesOf(const Node &node) {
  return numElements(node.shape) * static_cast<int64_t>(elementBytes(node.dtype));
}

class Reporter {
public:
  Reporter(const llvm::DenseMap<Node *, Value> &values, const CommittedPlacements &committed)
      : values(values), committed(committed) {
    for (const auto &[node, value] : values)
      nodes[value] = node;
  }

  void add(const PlacementConflict &conflict);

  std::string text;
  std::vector<DeviceConflict> conflicts;
  bool printedStacks = false;

private:
  Node *nodeOf(Value value) const { return nodes.lookup(value); }
  Node *nodeOf(Operation *op) const {
    return op && op->getNumResults() ? nodeOf(op->getResult(0)) : nullptr;
  }

  Arg argOf(std::string name, std::shared_ptr<Node> node) const {
    Value value = values.lookup(node.get());
    CommittedPlacement placement = value ? committed.lookup(value) : CommittedPlacement();
    return {std::move(name), std::move(node), placement};
  }

  std::optional<Call> compoundCall(Node &node) const;
  Call directCall(Node &node) const;
  void note(const std::string &where, const std::string &message) {
    text += where + ": note: " + message + "\n";
  }
  void stackLines(const CallStack *stack, const std::string &what);
  std::string fixFor(const Call &call, const Arg &move, const Arg &keep) const;

  const llvm::DenseMap<Node *, Value> &values;
  const CommittedPlacements &committed;
  llvm::DenseMap<Value, Node *> nodes;
  llvm::DenseSet<const void *> reported;
};

size_t distinctDevices(const std::vector<Arg> &args) {
  std::vector<DeviceAttr> seen;
  for (const Arg &arg : args)
    if (arg.placement.device &&
        llvm::none_of(seen, [&](DeviceAttr d) { return d.isSameDevice(arg.placement.device); }))
      seen.push_back(arg.placement.device);
  return seen.size();
}

std::optional<Call> Reporter::compoundCall(Node &node) const {
  if (!node.call)
    return std::nullopt;
  const ApiCall &api = *node.call;
  Call call{&api, api.name, api.loc, {}, api.stack.get(), node.label.get()};
  for (const CallArg &arg : api.args)
    if (std::shared_ptr<Node> argNode = arg.node.lock(); argNode && values.count(argNode.get()))
      call.args.push_back(argOf(arg.name, std::move(argNode)));
  // The call explains the conflict only if its own arguments disagree.
  if (distinctDevices(call.args) < 2)
    return std::nullopt;
  return call;
}

Call Reporter::directCall(Node &node) const {
  Call call{&node, apiName(node), node.loc, {}, node.stack.get(), node.label.get()};
  for (size_t i = 0; i < node.operands.size(); ++i)
    call.args.push_back(argOf(argName(node, i), node.operands[i]));
  return call;
}

void Reporter::stackLines(const CallStack *stack, const std::string &what) {
  if (!stack)
    return;
  std::vector<std::string> frames = userFrames(*stack);
  if (frames.empty())
    return;
  text += "    " + what + ":\n";
  printedStacks = true;
  for (const std::string &frame : frames)
    text += "      " + frame + "\n";
}

std::string Reporter::fixFor(const Call &call, const Arg &move, const Arg &keep) const {
  DeviceAttr from = move.placement.device, to = keep.placement.device;
  std::string bytes = std::to_string(bytesOf(*move.node));
  std::string toCall = "`.to(" + keep.name + ".device())`";
  if (!to.getAdapter().empty() && from.getAdapter() == to.getAdapter() &&
      from.getApi() != to.getApi())
    return "fix: use one execution context for both: create " + move.name + " on \"" +
           to.getName() + "\" (or set KILN_DEVICE=" + to.getApi().str() + "), or move it with " +
           toCall + " (" + bytes + " bytes, copied through the host)";
  std::string text = "fix: move " + move.name + " to \"" + to.getName() + "\" with " + toCall;
  Node *origin = nodeOf(move.placement.origin);
  if (origin == move.node.get())
    return text + " at " + placeOf(*move.node) + " (" + bytes +
           " bytes to transfer), or create it without a device so it follows";
  text += " before '" + call.name + "' (" + bytes + " bytes to transfer)";
  if (origin)
    text += ", or create the tensor it is computed from (" + placeOf(*origin) +
            ") without a device so it follows";
  return text;
}

void Reporter::add(const PlacementConflict &conflict) {
  Node *node = nodeOf(conflict.op);
  if (!node)
    return;
  Call call = compoundCall(*node).value_or(directCall(*node));
  if (!reported.insert(call.key).second)
    return;

  DeviceConflict out;
  out.op = call.name;
  out.location = sourceOf(call.loc);
  DeviceAttr keepDevice = conflict.operands[conflict.keep].device;
  const Arg *keep = nullptr;
  for (const Arg &arg : call.args)
    if (!keep && arg.placement.device && arg.placement.device.isSameDevice(keepDevice))
      keep = &arg;
  const Arg *first = nullptr, *otherContext = nullptr;
  for (const Arg &arg : call.args) {
    DeviceAttr d = arg.placement.device;
    if (!d)
      continue;
    if (!first)
      first = &arg;
    else if (!otherContext && !d.getAdapter().empty() &&
             d.getAdapter() == first->placement.device.getAdapter() &&
             d.getApi() != first->placement.device.getApi())
      otherContext = &arg;
  }

  std::string header;
  if (otherContext) {
    // One GPU, two runtimes (Burn's "Auto" vs "Metal" handle): not a generic
    // mismatch, and the fix is to pick one context.
    header = "operands of '" + call.name + "' are on the same physical adapter (" +
             first->placement.device.getAdapter().str() + ") through two execution contexts: " +
             first->name + " through \"" + first->placement.device.getName() + "\", " +
             otherContext->name + " through \"" + otherContext->placement.device.getName() +
             "\"; they are separate runtimes whose memory cannot be shared";
  } else {
    header = "operands of '" + call.name + "' are on different devices: ";
    for (size_t i = 0; i < call.args.size(); ++i) {
      const Arg &arg = call.args[i];
      header += (i ? ", " : "") + arg.name +
                (arg.placement.device ? " is on \"" + arg.placement.device.getName() + "\""
                                      : std::string(" has no device (it follows)"));
    }
  }
  text += placeOf(call.loc, call.label, true) + ": error: " + header + "\n";

  for (size_t i = 0; i < call.args.size(); ++i) {
    const Arg &arg = call.args[i];
    DeviceConflict::Operand operand;
    operand.index = static_cast<unsigned>(i);
    operand.name = arg.name;
    operand.type = mlirTypeText(*arg.node);
    operand.createdAt = sourceOf(arg.node->loc);
    std::string what = arg.name + " (" + userType(*arg.node) + ")";
    DeviceAttr device = arg.placement.device;
    Node *origin = nodeOf(arg.placement.origin);
    if (!device) {
      note(placeOf(*arg.node, true), what + " has no device: it follows the others");
    } else if (origin == arg.node.get() || !origin) {
      operand.device = device.getName();
      operand.written = device.getWritten().str();
      operand.committedAt = sourceOf(arg.node->loc);
      note(placeOf(*arg.node, true), what + " is committed to " + quoted(device) + " here");
    } else {
      operand.device = device.getName();
      operand.written = device.getWritten().str();
      operand.committedAt = sourceOf(origin->loc);
      operand.computedBy = arg.node->call ? arg.node->call->name : apiName(*arg.node);
      note(placeOf(*arg.node, true), what + " was computed here by '" + operand.computedBy + "' from a " +
                              userType(*origin) + " tensor committed to " + quoted(device) +
                              " at " + placeOf(*origin));
    }
    out.operands.push_back(std::move(operand));
  }
  if (keep)
    for (const Arg &arg : call.args)
      if (arg.placement.device && !arg.placement.device.isSameDevice(keep->placement.device)) {
        std::string fix = fixFor(call, arg, *keep);
        note(placeOf(call.loc, call.label, true), fix);
        out.fix += (out.fix.empty() ? "" : "\n") + fix;
      }
  {
    stackLines(call.stack, "call stack of '" + call.name + "'");
    for (const Arg &arg : call.args) {
      Node *origin = nodeOf(arg.placement.origin);
      auto stackOf = [](const Node &n) { return n.call ? n.call->stack.get() : n.stack.get(); };
      if (!origin || origin == arg.node.get()) {
        stackLines(stackOf(*arg.node), "call stack creating " + arg.name);
        continue;
      }
      stackLines(stackOf(*arg.node), "call stack computing " + arg.name);
      stackLines(stackOf(*origin), "call stack creating the tensor " + arg.name +
                                       " is computed from");
    }
  }
  conflicts.push_back(std::move(out));
}
} // namespace

DeviceMismatchError kiln::conflictError(ArrayRef<PlacementConflict> conflicts,
                                        const llvm::DenseMap<Node *, Value> &values,
                                        const CommittedPlacements &committed) {
  Reporter reporter(values, committed);
  for (const PlacementConflict &conflict : conflicts)
    reporter.add(conflict);
  std::string text = std::move(reporter.text);
  // Stacks print whenever they were recorded (ops made while tracing).
  if (!reporter.printedStacks && !kiln::tracing())
    text += "(KILN_TRACE=1 adds the call stack of each call and tensor above)\n";
  else if (!reporter.printedStacks && !tracingAvailable())
    text += "(KILN_TRACE is set, but this build of Kiln has no libbacktrace to record "
            "call stacks)\n";
  return DeviceMismatchError(std::move(text), std::move(reporter.conflicts));
}
