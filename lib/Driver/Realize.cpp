//===- Realize.cpp - from recorded nodes to results on a device -----------===//
//
// realizeNodes builds one graph function for everything the roots need
// (GraphBuilder), compiles it to a Program (Compile: placement, where every
// device conflict becomes one DeviceMismatchError before any kernel is
// compiled; fusion; kernels), and runs the Program (runtime/lib/Program.cpp).
// Roots keep their buffers and drop their operands.
//
//===----------------------------------------------------------------------===//

#include "lib/Driver/CompileGraph.h"
#include "lib/Tune/Tuner.h"
#include "lib/Frontend/Devices.h"
#include "lib/Frontend/Graph.h"
#include "lib/Frontend/GraphBuilder.h"
#include "lib/Frontend/GraphCache.h"
#include "lib/Driver/ProcessSession.h"
#include "lib/Driver/Environment.h"

#include "kiln/Codegen/Pipelines.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/Transforms/Placement.h"
#include "kiln/runtime/Profile.h"
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
#include <fstream>
#include <optional>
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

std::unique_lock<std::mutex> kiln::lockForCompile(Session &session) {
  std::unique_lock<std::mutex> lock(session.mutex);
  session.options = CompilerOptions::fromEnvironment();
  return lock;
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


/// KILN_POISON_OUTPUTS=1 (the tests set it): fill every kernel result with
/// NaN before the kernel runs.
bool poisonOutputs() { return environment::poisonOutputs(); }

} // namespace

std::vector<uint8_t> kiln::hostBytes(const Node &node) {
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
  } else if (node.dtype == DType::f16 || node.dtype == DType::bf16) {
    // (Folded f16 weights, FoldBatchNorm.cpp.)
    for (size_t i = 0; i < n; ++i) {
      uint16_t bits = halfBitsOf(values[i], node.dtype);
      std::memcpy(&bytes[2 * i], &bits, 2);
    }
  } else {
    throw Error(std::string("host data of dtype ") + dtype_name(node.dtype) +
                " is not supported yet");
  }
  return bytes;
}

Device kiln::placedDevice(const std::shared_ptr<Node> &root) {
  Session &s = session();
  auto lock = lockForCompile(s);
  // Placement itself, on the graph the read would build: its answer cannot
  // differ from the realization's.
  GraphBuilder graph(&s.contextForGraph());
  graph.build({root});
  placeAndFuse(s, graph, RealizeOptions(), /*fuse=*/false);
  return deviceOf(graph.values.lookup(root.get()).getDefiningOp());
}

namespace {
void realizeLocked(Session &s, const std::vector<std::shared_ptr<Node>> &roots,
                   const RealizeOptions &options, ProfileRequest *profile);
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
                        const RealizeOptions &options, ProfileRequest *profile) {
  Session &s = session();
  auto lock = lockForCompile(s);
  // Another thread may have realized some meanwhile.
  std::vector<std::shared_ptr<Node>> roots;
  llvm::DenseSet<Node *> seen;
  for (const auto &root : all)
    if (!root->realized() && seen.insert(root.get()).second)
      roots.push_back(root);
  if (roots.empty())
    return;
  try {
    realizeLocked(s, roots, options, profile);
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
/// Per graph input (in `order`, as GraphBuilder numbers them), what the
/// Program reads: the node's buffer if it has one, else its host data in
/// the stored form (kept alive in `staged`).
std::vector<rt::ProgramInput> programInputs(const std::vector<Node *> &order,
                                            std::vector<std::vector<uint8_t>> &staged) {
  std::vector<rt::ProgramInput> inputs;
  for (Node *node : order) {
    if (!isGraphInput(*node))
      continue;
    rt::ProgramInput input;
    if (node->realized())
      input.buffer = node->buffer;
    else if (node->dtype == DType::f32 && node->host)
      input.host = node->host->data();
    else if (node->dtype == DType::i32 && node->hostInts)
      input.host = node->hostInts->data();
    else
      input.host = staged.emplace_back(hostBytes(*node)).data();
    inputs.push_back(std::move(input));
  }
  return inputs;
}

/// Programs by graph structure, guarded by the session's mutex.
GraphCache &graphCache() {
  static GraphCache *cache = new GraphCache();
  return *cache;
}

/// The Program for `structure`: the cached one, else compiled (and cached).
const CachedGraph &programFor(Session &s, const std::vector<std::shared_ptr<Node>> &roots,
                              const GraphStructure &structure, const RealizeOptions &options,
                              CachedGraph &uncached) {
  bool caching = graphCacheCapacity() > 0;
  if (caching)
    if (const CachedGraph *cached = graphCache().find(structure.key)) {
      ++s.stats.graph_cache_hits;
      return *cached;
    }
  GraphBuilder graph(&s.contextForGraph());
  graph.build(roots, structure.order);
  placeAndFuse(s, graph, options);
  // KILN_AUTOTUNE=on: tune what the store lacks first; compiling then finds it.
  tuneUntunedKernels(s, graph.func);
  CachedGraph compiled;
  compiled.program = compileProgram(s, graph, &compiled.constantNodes);
  for (const std::string &name : compiled.program->devices)
    compiled.devices.push_back(&runtimeDevice(Device::parse(name)));
  ++s.stats.graphs_compiled;
  if (caching)
    return graphCache().insert(structure.key, std::move(compiled));
  uncached = std::move(compiled);
  return uncached;
}

/// KILN_PROFILE=1: every realize is profiled, its table printed to stderr.
bool profileEveryRealize() { return environment::profileEveryRealize(); }

/// KILN_PROFILE_TRACE=trace.json: every profiled realize, end to end, in one
/// Chrome trace, rewritten after each (so a crash keeps what came before).
void appendToTrace(const rt::Program &program, const rt::ProgramProfile &profile) {
  static const std::string path = environment::profileTracePath();
  if (path.empty())
    return;
  static std::string events;
  static double endMicroseconds = 0;
  events += (events.empty() ? "" : ",\n") +
            rt::chromeTraceEvents(program, profile, endMicroseconds);
  endMicroseconds += profile.totalNanoseconds() / 1e3;
  std::ofstream out(path, std::ios::trunc);
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n" << events << "\n]}\n";
  if (!out)
    std::fprintf(stderr, "kiln: cannot write the profile trace to %s (KILN_PROFILE_TRACE)\n",
                 path.c_str());
}

void realizeLocked(Session &s, const std::vector<std::shared_ptr<Node>> &roots,
                   const RealizeOptions &options, ProfileRequest *profile) {
  auto compileStart = Clock::now();
  // Everything that decides placement besides the graph itself.
  std::string context = std::to_string(static_cast<int>(resolvePolicy(options))) +
                        Device::default_device().name();
  GraphStructure structure = graphStructure(roots, context);
  CachedGraph uncached;
  const CachedGraph &compiled = programFor(s, roots, structure, options, uncached);
  const rt::Program &program = *compiled.program;
  s.stats.last_graph_peak_bytes = program.peakBytes;
  s.stats.last_graph_unplanned_bytes = program.unplannedBytes;
  s.stats.compile_seconds += secondsSince(compileStart);

  auto runStart = Clock::now();
  std::vector<std::vector<uint8_t>> staged;
  std::vector<rt::ProgramInput> inputs = programInputs(structure.order, staged);
  // This graph's constant values (a reused Program was compiled for others).
  std::vector<std::vector<uint8_t>> constants;
  for (size_t i = 0; i < compiled.constantNodes.size(); ++i) {
    uint32_t at = compiled.constantNodes[i];
    constants.push_back(at == kCompiledConstant ? program.constants[i]
                                                : splatBytesOf(*structure.order[at]));
  }
  rt::RunOptions run;
  run.poisonResults = poisonOutputs();
  run.constants = &constants;
  run.allocate = [](rt::Device &device, size_t bytes,
                    const char *what) -> rt::StatusOr<std::shared_ptr<rt::Buffer>> {
    return allocateOn(device, bytes, what); // throws the typed errors
  };
  std::optional<rt::RunResult> result;
  if (profile || profileEveryRealize()) {
    rt::RunResult last;
    rt::StatusOr<rt::ProgramProfile> timed = rt::profile(
        program, compiled.devices, inputs, profile ? profile->runs : 1, run, &last);
    check(timed.status(), "profiling the graph");
    if (profileEveryRealize())
      std::fprintf(stderr, "%s", rt::profileTable(program, *timed).c_str());
    appendToTrace(program, *timed);
    if (profile) {
      profile->program = compiled.program;
      profile->profile = std::make_shared<rt::ProgramProfile>(std::move(*timed));
    }
    result = std::move(last);
  } else {
    rt::StatusOr<rt::RunResult> ran = rt::run(program, compiled.devices, inputs, run);
    check(ran.status(), "running the graph");
    result = std::move(*ran);
  }
  // Pipelines created by this run go to the store for the next process.
  for (rt::Device *device : compiled.devices)
    if (rt::VulkanDevice *vulkan = device->replayDevice())
      vulkan->savePipelineCache();
  const rt::RunCounters &counters = result->counters;
  s.stats.kernels_dispatched += counters.dispatches;
  s.stats.transfers += counters.transfers;
  s.stats.bytes_uploaded += counters.bytesUploaded;
  s.stats.bytes_downloaded += counters.bytesMoved;
  // Host data stays on the device it was first uploaded to: later graphs
  // read it from there instead of uploading it again.
  size_t input = 0;
  for (Node *node : structure.order) {
    if (!isGraphInput(*node))
      continue;
    if (const std::shared_ptr<rt::Buffer> &uploaded = result->uploaded[input++];
        uploaded && !node->realized()) {
      node->buffer = uploaded;
      node->bufferDevice = apiDevice(uploaded->device());
    }
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    Node &root = *roots[i];
    root.buffer = result->outputs[i];
    root.bufferDevice = apiDevice(root.buffer->device());
    root.operands.clear();
  }
  s.stats.run_seconds += secondsSince(runStart);
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
