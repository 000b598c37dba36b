//===- Realize.cpp - from recorded nodes to results on a device -----------===//
//
// realizeNodes builds one graph function for everything the roots need,
// runs placement (all device conflicts become one DeviceMismatchError,
// before any kernel is compiled) and fusion, then walks the fused function
// in order: inputs are uploaded or moved, transfers copied, kernels compiled
// (cached) and dispatched. Roots keep their buffers and drop their operands.
//
//===----------------------------------------------------------------------===//

#include "ConflictReport.h"
#include "Devices.h"
#include "Graph.h"
#include "CpuCompiler.h"
#include "KernelCompiler.h"
#include "Session.h"

#include "kiln/Codegen/Pipelines.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Placement.h"
#include "kiln/runtime/ThreadPool.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <chrono>
#include <cstring>
#include <cstdlib>
#include <iostream>
#include <unordered_map>

using namespace mlir;
using namespace kiln;

Session::Session() { registerKilnPasses(); }

MLIRContext &Session::contextForGraph() {
  if (context && ++graphsOnContext <= kGraphsPerContext)
    return *context;
  graphsOnContext = 1;
  context.reset(); // first: no two contexts' interned data at once
  context = std::make_unique<MLIRContext>();
  DialectRegistry registry;
  registerKilnDialects(registry);
  context->appendDialectRegistry(registry);
  context->loadAllAvailableDialects();
  // Kernels are small and compiled one at a time; MLIR's thread pool would
  // only compete with the devices' own threads.
  context->disableMultithreading();
  // Users get their own lines in diagnostics, not a dump of the graph op.
  context->printOpOnDiagnostic(false);
  return *context;
}

Session &kiln::session() {
  // Leaked on purpose: kernels and contexts must outlive static destructors
  // of user code that may still hold tensors.
  static Session *instance = new Session();
  return *instance;
}

Stats kiln::stats() {
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  Stats out = s.stats;
  out.kernel_cache_entries = s.kernels.size() + s.cpuKernels.size();
  out.kernel_cache_bytes = s.kernels.bytes() + s.cpuKernels.bytes();
  out.kernel_cache_evictions = s.kernels.evictions() + s.cpuKernels.evictions();
  return out;
}

void kiln::reset_stats() {
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats = Stats();
}

std::string SourceLocation::str() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

namespace {
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Type elementType(MLIRContext *ctx, DType dtype) {
  Builder b(ctx);
  switch (dtype) {
  case DType::f32: return b.getF32Type();
  case DType::f16: return b.getF16Type();
  case DType::i32: return b.getI32Type();
  case DType::boolean: return b.getI1Type();
  }
  return b.getF32Type();
}

RankedTensorType tensorType(MLIRContext *ctx, const Node &node) {
  return RankedTensorType::get(node.shape, elementType(ctx, node.dtype));
}

Location locationOf(MLIRContext *ctx, std::source_location loc) {
  return FileLineColLoc::get(ctx, loc.file_name(), loc.line(), loc.column());
}

DeviceAttr deviceAttr(MLIRContext *ctx, const Device &device) {
  return DeviceAttr::get(ctx, device.api(), device.index(), device.adapter_uuid(),
                         device.written());
}

Device deviceOf(Operation *op) {
  DeviceAttr attr = cast<PlacedOpInterface>(op).getPlacement();
  return Device::parse(attr.getName());
}

SourceLocation sourceOf(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return {file.getFilename().str(), file.getLine(), file.getColumn()};
  return {};
}

std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// The graph function of everything `roots` need, in topological order.
struct GraphBuilder {
  MLIRContext *ctx;
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  std::vector<Node *> inputs;
  llvm::DenseMap<Node *, Value> values;

  explicit GraphBuilder(MLIRContext *ctx) : ctx(ctx) {}

  static std::vector<Node *> topologicalOrder(const std::vector<std::shared_ptr<Node>> &roots) {
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

  Value emit(OpBuilder &b, Node *node) {
    Location loc = locationOf(ctx, node->loc);
    RankedTensorType type = tensorType(ctx, *node);
    if (node->realized() || node->kind == OpKind::Input) {
      // A realized uncommitted value stays uncommitted: it follows its users.
      auto op = InputOp::create(b, loc, type, inputs.size(),
                                node->device ? deviceAttr(ctx, *node->device)
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
                                node->device ? deviceAttr(ctx, *node->device)
                                             : DeviceAttr());
    }
    case OpKind::Transfer:
      return TransferOp::create(b, loc, type, operands[0],
                                deviceAttr(ctx, *node->device));
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

  void build(const std::vector<std::shared_ptr<Node>> &roots) {
    OpBuilder b(ctx);
    module = ModuleOp::create(b.getUnknownLoc());
    SmallVector<Type> resultTypes;
    for (const auto &root : roots)
      resultTypes.push_back(tensorType(ctx, *root));
    b.setInsertionPointToEnd(module->getBody());
    func = func::FuncOp::create(b, b.getUnknownLoc(), "graph",
                                b.getFunctionType({}, resultTypes));
    b.setInsertionPointToStart(func.addEntryBlock());
    for (Node *node : topologicalOrder(roots))
      values[node] = emit(b, node);
    SmallVector<Value> results;
    for (const auto &root : roots)
      results.push_back(values.lookup(root.get()));
    func::ReturnOp::create(b, b.getUnknownLoc(), results);
  }
};

std::string formatDiagnostic(Diagnostic &diag) {
  auto line = [](Location loc, DiagnosticSeverity severity, const std::string &msg) {
    SourceLocation src = sourceOf(loc);
    const char *kind = severity == DiagnosticSeverity::Error     ? "error"
                       : severity == DiagnosticSeverity::Warning ? "warning"
                       : severity == DiagnosticSeverity::Remark  ? "remark"
                                                                 : "note";
    return (src.file.empty() ? std::string() : src.str() + ": ") + kind + ": " + msg + "\n";
  };
  std::string text = line(diag.getLocation(), diag.getSeverity(), diag.str());
  for (Diagnostic &note : diag.getNotes())
    text += line(note.getLocation(), DiagnosticSeverity::Note, note.str());
  return text;
}

/// Buffers of values in the executing graph, with their devices.
struct Placed {
  std::shared_ptr<rt::Buffer> buffer;
  rt::Device *device = nullptr;
};

std::vector<uint8_t> readBytes(const Placed &value, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  check(value.device->download(*value.buffer, host.data(), bytes), "download");
  return host;
}

Placed upload(rt::Device &device, const void *data, size_t bytes, Stats &stats) {
  std::shared_ptr<rt::Buffer> buffer = allocateOn(device, bytes, "uploading an input");
  check(device.upload(*buffer, data, bytes), "upload");
  stats.bytes_uploaded += bytes;
  return {buffer, &device};
}

/// Between two devices: one copy each way through host memory. A CPU
/// buffer is host memory, so to or from the CPU it is a single copy.
Placed moveTo(const Placed &value, rt::Device &target, size_t bytes, Stats &stats) {
  if (value.device == &target)
    return value;
  ++stats.transfers;
  stats.bytes_downloaded += bytes;
  if (void *source = rt::CpuDevice::data(*value.buffer)) {
    check(value.device->flush(), "waiting for the device");
    return upload(target, source, bytes, stats);
  }
  if (&target == &rt::CpuDevice::get()) {
    std::shared_ptr<rt::Buffer> buffer = allocateOn(target, bytes, "moving a tensor");
    check(value.device->download(*value.buffer, rt::CpuDevice::data(*buffer), bytes),
          "download");
    return {buffer, &target};
  }
  std::vector<uint8_t> host = readBytes(value, bytes);
  return upload(target, host.data(), bytes, stats);
}

std::vector<uint8_t> hostBytes(const Node &node) {
  if (node.dtype == DType::i32 && node.hostInts) {
    std::vector<uint8_t> bytes(node.hostInts->size() * 4);
    std::memcpy(bytes.data(), node.hostInts->data(), bytes.size());
    return bytes;
  }
  const std::vector<float> &values = *node.host;
  size_t n = values.size();
  std::vector<uint8_t> bytes(n * elementBytes(node.dtype));
  if (node.dtype == DType::f32) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else if (node.dtype == DType::boolean) {
    for (size_t i = 0; i < n; ++i)
      bytes[i] = values[i] != 0;
  } else {
    throw Error(std::string("host data of dtype ") + dtype_name(node.dtype) +
                " is not supported yet");
  }
  return bytes;
}

/// KILN_POISON_OUTPUTS=1 (the tests set it): fill every kernel result with
/// NaN before the kernel runs.
bool poisonOutputs() {
  static const bool poison = [] {
    const char *env = std::getenv("KILN_POISON_OUTPUTS");
    return env && std::string(env) == "1";
  }();
  return poison;
}

class Executor {
public:
  Executor(Session &session, GraphBuilder &graph) : session(session), graph(graph) {}

  std::vector<Placed> run() {
    for (Operation &op : graph.func.getBody().front()) {
      if (auto input = dyn_cast<InputOp>(op))
        values[input] = materialize(graph.inputs[input.getIndex()], deviceOf(input));
      else if (auto constant = dyn_cast<ConstantOp>(op))
        values[constant] = runConstant(constant);
      else if (auto transfer = dyn_cast<TransferOp>(op))
        values[transfer] = moveTo(values.at(transfer.getInput()),
                                  runtimeDevice(deviceOf(transfer)),
                                  tensorBytes(transfer.getType()), session.stats);
      else if (auto kernel = dyn_cast<KernelOp>(op))
        runKernel(kernel);
      else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        std::vector<Placed> results;
        for (Value v : ret.getOperands())
          results.push_back(values.at(v));
        return results;
      } else
        throw CompileError("internal error: unexpected op after fusion: " +
                           op.getName().getStringRef().str());
    }
    return {};
  }

private:
  Placed materialize(Node *node, const Device &device) {
    rt::Device &target = runtimeDevice(device);
    size_t bytes = numElements(node->shape) * elementBytes(node->dtype);
    if (node->realized())
      return moveTo({node->buffer, &runtimeDevice(*node->bufferDevice)}, target,
                    bytes, session.stats);
    auto it = uploads.find({node, &target});
    if (it != uploads.end())
      return it->second;
    std::vector<uint8_t> data = hostBytes(*node);
    Placed placed = upload(target, data.data(), data.size(), session.stats);
    uploads[{node, &target}] = placed;
    // Keep it: later graphs read this input from the device instead of
    // uploading it again (the host copy stays for other devices).
    node->buffer = placed.buffer;
    node->bufferDevice = device;
    return placed;
  }

  /// Kiln's constants are splats (full, zeros, scalars): one element's
  /// bytes, repeated straight into the buffer (host memory on the CPU).
  Placed runConstant(ConstantOp constant) {
    auto type = cast<RankedTensorType>(constant.getType());
    auto dense = cast<DenseElementsAttr>(constant.getValue());
    Type element = type.getElementType();
    std::vector<uint8_t> one;
    if (!dense.isSplat())
      throw CompileError("internal error: a constant that is not a splat");
    if (element.isInteger(1)) {
      one.push_back(dense.getSplatValue<bool>());
    } else if (element.isF32()) {
      float v = dense.getSplatValue<float>();
      one.resize(4);
      std::memcpy(one.data(), &v, 4);
    } else if (element.isF16()) {
      uint16_t raw = static_cast<uint16_t>(
          dense.getSplatValue<APFloat>().bitcastToAPInt().getZExtValue());
      one = {uint8_t(raw & 0xFF), uint8_t(raw >> 8)};
    } else {
      throw CompileError("constants of type " + typeText(type) + " are not supported yet");
    }
    size_t bytes = tensorBytes(type);
    rt::Device &target = runtimeDevice(deviceOf(constant));
    auto fill = [&](uint8_t *out) {
      if (one.size() == 1 || llvm::all_of(one, [](uint8_t b) { return b == 0; })) {
        std::memset(out, one[0], bytes);
        return;
      }
      for (size_t at = 0; at < bytes; at += one.size())
        std::memcpy(out + at, one.data(), one.size());
    };
    std::shared_ptr<rt::Buffer> buffer = allocateOn(target, bytes, "materializing a constant");
    if (void *data = rt::CpuDevice::data(*buffer)) {
      fill(static_cast<uint8_t *>(data));
      session.stats.bytes_uploaded += bytes;
      return {buffer, &target};
    }
    std::vector<uint8_t> host;
    try {
      host.resize(bytes);
    } catch (const std::bad_alloc &) {
      throw hostOutOfMemory(bytes, "staging a constant for " + apiDevice(target).name());
    }
    fill(host.data());
    check(target.upload(*buffer, host.data(), bytes), "upload");
    session.stats.bytes_uploaded += bytes;
    return {buffer, &target};
  }

  void runKernel(KernelOp kernel) {
    Device device = deviceOf(kernel);
    rt::Device &target = runtimeDevice(device);
    std::vector<Placed> keep;
    std::vector<rt::Buffer *> bindings;
    for (Value input : kernel.getInputs()) {
      keep.push_back(values.at(input));
      bindings.push_back(keep.back().buffer.get());
    }
    for (Value result : kernel.getResults()) {
      std::shared_ptr<rt::Buffer> buffer =
          allocateOn(target, tensorBytes(result.getType()), "allocating a kernel result");
      if (poisonOutputs()) {
        // All-ones bytes: NaN as f32/f16, so an element a kernel forgets
        // to write fails the test that reads it (buffers are reused).
        std::vector<uint8_t> poison(tensorBytes(result.getType()), 0xFF);
        check(target.upload(*buffer, poison.data(), poison.size()), "poisoning a result");
      }
      values[result] = {buffer, &target};
      bindings.push_back(buffer.get());
    }
    int64_t elements =
        cast<RankedTensorType>(kernel.getResult(0).getType()).getNumElements();
    if (elements == 0)
      return;
    auto compileStart = Clock::now();
    if (device.api() == "cpu") {
      const CompiledCpuKernel &compiled = compileCpuKernel(session, kernel);
      session.stats.compile_seconds += secondsSince(compileStart);
      // Chunks of at least ~16K elements: below that, waking a thread costs
      // more than it saves.
      int64_t grain = std::max<int64_t>(1, 16384 / compiled.innerIterations);
      // An outer iteration that is itself a loop (a row, a panel of a
      // matmul) needs no vector-aligned chunk boundaries: a 16-panel matmul
      // would otherwise run on one thread.
      int64_t alignment =
          compiled.innerIterations > 1 ? 1 : rt::ThreadPool::kChunkAlignment;
      check(rt::CpuDevice::get().dispatch(compiled.fn, bindings, compiled.outerIterations, grain,
                                          alignment),
            "running a kernel");
      ++session.stats.kernels_dispatched;
      return;
    }
    auto &gpu = static_cast<rt::VulkanDevice &>(target);
    const CompiledKernel &compiled = compileKernel(session, kernel, gpu.adapter());
    session.stats.compile_seconds += secondsSince(compileStart);
    rt::KernelBinary binary;
    binary.hash = compiled.hash;
    binary.spirv = &compiled.spirv;
    binary.entryPoint = compiled.entryPoint;
    binary.numBindings = compiled.numBindings;
    rt::StatusOr<rt::Pipeline *> pipeline = gpu.pipeline(binary);
    check(pipeline.status(), "creating a compute pipeline");
    std::vector<rt::Buffer *> ordered;
    for (uint32_t arg : compiled.bindingOrder)
      ordered.push_back(bindings[arg]);
    check(gpu.dispatch(*pipeline, ordered, compiled.groups[0], compiled.groups[1],
                          compiled.groups[2]),
          "dispatch");
    ++session.stats.kernels_dispatched;
  }

  struct PairHash {
    size_t operator()(const std::pair<Node *, rt::Device *> &p) const {
      return std::hash<void *>()(p.first) ^ (std::hash<void *>()(p.second) << 1);
    }
  };

  Session &session;
  GraphBuilder &graph;
  llvm::DenseMap<Value, Placed> values;
  std::unordered_map<std::pair<Node *, rt::Device *>, Placed, PairHash> uploads;
};

std::optional<TransferPolicy> programPolicy;

PlacementPolicy toPlacement(TransferPolicy policy) {
  switch (policy) {
  case TransferPolicy::error: return PlacementPolicy::Error;
  case TransferPolicy::log: return PlacementPolicy::Log;
  case TransferPolicy::allow: return PlacementPolicy::Allow;
  }
  return PlacementPolicy::Error;
}

/// RealizeOptions, then KILN_TRANSFER_POLICY, then set_transfer_policy.
PlacementPolicy resolvePolicy(const RealizeOptions &realize) {
  if (realize.transfer_policy)
    return toPlacement(*realize.transfer_policy);
  if (const char *env = std::getenv("KILN_TRANSFER_POLICY"); env && *env) {
    std::optional<PlacementPolicy> policy = parsePlacementPolicy(env);
    if (!policy)
      throw Error(std::string("KILN_TRANSFER_POLICY=") + env +
                  " is not a policy: use error, log or allow");
    return *policy;
  }
  return programPolicy ? toPlacement(*programPolicy) : PlacementPolicy::Error;
}

/// The fewest buffers a kernel may bind on any Vulkan device here (the CPU
/// has no such limit); 0 without Vulkan.
int maxKernelBindings() {
  static const int limit = [] {
    rt::StatusOr<rt::VulkanContext *> context = rt::VulkanContext::get();
    if (!context.isOk())
      return 0;
    uint32_t fewest = 0;
    for (const rt::AdapterInfo &adapter : (*context)->adapters())
      if (adapter.maxStorageBuffersPerStage &&
          (!fewest || adapter.maxStorageBuffersPerStage < fewest))
        fewest = adapter.maxStorageBuffersPerStage;
    return static_cast<int>(std::min<uint32_t>(fewest, 1u << 20));
  }();
  return limit;
}

void placeAndFuse(Session &session, GraphBuilder &graph, const RealizeOptions &realize,
                  bool fuse = true) {
  MLIRContext *ctx = graph.ctx;
  PlacementOptions options;
  options.defaultDevice = deviceAttr(ctx, Device::default_device());
  options.policy = resolvePolicy(realize);

  std::string report;
  ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
    std::string text = formatDiagnostic(diag);
    if (diag.getSeverity() == DiagnosticSeverity::Remark) {
      if (options.policy == PlacementPolicy::Log)
        std::cerr << "kiln: " << text;
      return success();
    }
    report += text;
    return success();
  });
  if (failed(verify(*graph.module)))
    throw CompileError("internal error: the recorded graph does not verify:\n" + report);

  SmallVector<PlacementConflict> found;
  CommittedPlacements committed;
  if (failed(placeDevices(graph.func, options, &found, &committed)))
    throw conflictError(found, graph.values, committed);
  if (!fuse)
    return;
  PassManager pm(ctx, ModuleOp::getOperationName());
  KilnFuseElementwiseOptions fusion;
  fusion.maxBindings = maxKernelBindings();
  pm.nest<func::FuncOp>().addPass(createKilnFuseElementwise(fusion));
  if (failed(pm.run(*graph.module)))
    throw CompileError("fusion failed:\n" + report);
}
} // namespace

Device kiln::placedDevice(const std::shared_ptr<Node> &root) {
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Placement itself, on the graph the read would build: its answer cannot
  // differ from the realization's.
  GraphBuilder graph(&s.contextForGraph());
  graph.build({root});
  placeAndFuse(s, graph, RealizeOptions(), /*fuse=*/false);
  return deviceOf(graph.values.lookup(root.get()).getDefiningOp());
}

void kiln::set_transfer_policy(TransferPolicy policy) {
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  programPolicy = policy;
}

namespace {
void realizeLocked(Session &s, const std::vector<std::shared_ptr<Node>> &roots,
                   const RealizeOptions &options);
} // namespace

std::optional<Device> kiln::realizedOn(const Node &node) {
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  return node.realized() ? node.bufferDevice : std::nullopt;
}

std::pair<const void *, Device> kiln::hostDataOf(const Node &node) {
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  return {rt::CpuDevice::data(*node.buffer), *node.bufferDevice};
}

void kiln::realizeNodes(const std::vector<std::shared_ptr<Node>> &all,
                        const RealizeOptions &options) {
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Another thread may have realized some meanwhile.
  std::vector<std::shared_ptr<Node>> roots;
  llvm::DenseSet<Node *> seen;
  for (const auto &root : all)
    if (!root->realized() && seen.insert(root.get()).second)
      roots.push_back(root);
  if (roots.empty())
    return;
  try {
    realizeLocked(s, roots, options);
  } catch (const std::bad_alloc &) {
    // A host allocation (a constant, a staging copy) failed: the graph is
    // untouched (roots keep their operands) and can be realized again.
    uint64_t bytes = 0;
    for (const auto &root : roots)
      bytes += uint64_t(numElements(root->shape)) * elementBytes(root->dtype);
    throw hostOutOfMemory(bytes, "computing results");
  }
}

namespace {
void realizeLocked(Session &s, const std::vector<std::shared_ptr<Node>> &roots,
                   const RealizeOptions &options) {
  auto compileStart = Clock::now();
  GraphBuilder graph(&s.contextForGraph());
  graph.build(roots);
  placeAndFuse(s, graph, options);
  ++s.stats.graphs_compiled;
  s.stats.compile_seconds += secondsSince(compileStart);

  auto runStart = Clock::now();
  double kernelCompileBefore = s.stats.compile_seconds;
  Executor executor(s, graph);
  std::vector<Placed> results = executor.run();
  // Synchronous: when realize returns the results are computed.
  for (const Placed &result : results)
    check(result.device->flush(), "waiting for the device");
  for (size_t i = 0; i < roots.size(); ++i) {
    Node &root = *roots[i];
    root.buffer = results[i].buffer;
    root.bufferDevice = apiDevice(*results[i].device);
    root.operands.clear();
  }
  // Kernel compilation inside the run is counted as compile time only.
  s.stats.run_seconds +=
      secondsSince(runStart) - (s.stats.compile_seconds - kernelCompileBefore);
}

} // namespace

void kiln::readNodeInto(Node &node, void *out) {
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto start = Clock::now();
  size_t bytes = numElements(node.shape) * elementBytes(node.dtype);
  // Straight into the caller's memory: from a CPU buffer this is the one copy.
  check(runtimeDevice(*node.bufferDevice).download(*node.buffer, out, bytes), "download");
  s.stats.bytes_downloaded += bytes;
  s.stats.run_seconds += secondsSince(start);
}
