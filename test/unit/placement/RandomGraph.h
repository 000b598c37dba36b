//===- RandomGraph.h - random kiln graphs and a placement oracle -*- C++ -*-===//
//
// Shared by the placement property test (kiln-placement-tests) and the
// benchmark / fuzz driver (kiln-bench-placement).
//
//   Graph          a plain description of a DAG of kiln ops (no MLIR)
//   generateGraph  a random Graph from a seed (SplitMix64, same everywhere)
//   buildGraph     the Graph as a func.func of kiln ops; every op carries
//                  `test.id` (its node id, kept by clones) and a location
//                  graph:<id + 1>:1, so diagnostics map back to nodes
//   Oracle         the placement rules, stated independently of the pass:
//                  memoized recursion, "pull" over operands for commitment
//                  and over users for demand
//   checkGraph     runs kiln::placeDevices on the built graph and compares
//                  everything observable with the oracle
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_PLACEMENT_RANDOMGRAPH_H
#define KILN_TEST_UNIT_PLACEMENT_RANDOMGRAPH_H

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Transforms/Placement.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace kiln::placement_test {

//===----------------------------------------------------------------------===//
// Randomness
//===----------------------------------------------------------------------===//

/// SplitMix64: tiny and identical on every platform and standard library,
/// so a seed printed on one machine reproduces the graph on another.
class Rng {
public:
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform-enough integer in [0, n); 0 when n is 0.
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
  /// Uniform double in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }
  template <typename T> const T &pick(const std::vector<T> &items) {
    return items[below(items.size())];
  }

private:
  uint64_t state;
};

//===----------------------------------------------------------------------===//
// The graph description
//===----------------------------------------------------------------------===//

/// A device as a user may spell it. Only (api, ordinal) is identity; the
/// adapter and the spelling vary to prove that they are not.
struct DeviceSpec {
  std::string api;
  int64_t ordinal = 0;
  std::string adapter;
  std::string written;
};

/// The identity the spec defines: execution context and ordinal.
inline std::string identityOf(const std::string &api, int64_t ordinal) {
  return api + ":" + std::to_string(ordinal);
}
inline std::string identityOf(const DeviceSpec &spec) {
  return identityOf(spec.api, spec.ordinal);
}

enum class NodeKind { Input, Constant, Transfer, Unary, Binary, Cmp, Select };

inline bool isSource(NodeKind kind) {
  return kind == NodeKind::Input || kind == NodeKind::Constant ||
         kind == NodeKind::Transfer;
}

struct Node {
  NodeKind kind = NodeKind::Input;
  std::string opName;        // "kiln.add", ...
  std::vector<int> operands; // node ids, all smaller than this node's id
  /// Input/constant: the commitment, if any. Transfer: the target.
  std::optional<DeviceSpec> device;
  std::vector<int64_t> shape; // empty: rank 0
  bool isBool = false;        // i1 elements (else f32)
  int64_t predicate = 0;      // kiln.cmp only
  int64_t inputIndex = 0;     // kiln.input only
};

struct Graph {
  uint64_t seed = 0;
  DeviceSpec defaultDevice;
  std::vector<Node> nodes;
  std::vector<int> results; // node ids returned by the function, in order

  bool isScalar(int id) const { return nodes[id].shape.empty(); }
};

inline const std::vector<std::string> &unaryOpNames() {
  static const std::vector<std::string> names = {
      "kiln.neg",  "kiln.abs",  "kiln.exp",     "kiln.log",  "kiln.sqrt",
      "kiln.rsqrt", "kiln.tanh", "kiln.sigmoid", "kiln.relu", "kiln.gelu", "kiln.erf",
      "kiln.sin", "kiln.cos", "kiln.floor", "kiln.ceil", "kiln.round",
      "kiln.cast"}; // an f32 -> f32 cast: placement does not look at types
  return names;
}
inline const std::vector<std::string> &binaryOpNames() {
  static const std::vector<std::string> names = {
      "kiln.add", "kiln.sub", "kiln.mul", "kiln.div",
      "kiln.max", "kiln.min", "kiln.pow"};
  return names;
}

/// Numpy broadcasting of two shapes that are known to be compatible.
inline std::vector<int64_t> broadcast(const std::vector<int64_t> &a,
                                      const std::vector<int64_t> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// The generator
//===----------------------------------------------------------------------===//

/// Clean: values live in lanes (one per device, plus a lane that is never
/// committed), ops read their own lane and the free lane, and other lanes
/// only through transfers or as a scalar next to a committed operand, so
/// the graph never conflicts. FewConflicts: the same with a few stray
/// operands. Wild: any operand from anywhere.
enum class GraphMode { Clean, FewConflicts, Wild };

struct GenOptions {
  int minNodes = 20;
  int maxNodes = 400;
  std::optional<GraphMode> mode; // chosen from the seed when unset
  int maxDevices = 4;            // 1..5
};

namespace detail {
struct Lane {
  std::vector<int> floats;  // f32 values of the lane (any rank)
  std::vector<int> bools;   // i1 values
  std::vector<int> anchors; // committed f32 sources of the lane
};

inline std::string adapterOf(const std::string &api, int64_t ordinal) {
  // Vulkan and Metal reach the same GPU: same adapter, two contexts.
  if ((api == "vulkan" || api == "metal") && ordinal == 0)
    return "gpu-0-uuid";
  if (api == "cpu")
    return "host";
  return "gpu-" + api + "-" + std::to_string(ordinal) + "-uuid";
}
} // namespace detail

inline Graph generateGraph(uint64_t seed, const GenOptions &options = {}) {
  Rng rng(seed);
  Graph g;
  g.seed = seed;

  // Devices: 1..4 identities out of five, each use spelled at random.
  std::vector<std::pair<std::string, int64_t>> pool = {
      {"vulkan", 0}, {"vulkan", 1}, {"vulkan", 2}, {"metal", 0}, {"cpu", 0}};
  for (size_t i = pool.size(); i > 1; --i)
    std::swap(pool[i - 1], pool[rng.below(i)]);
  size_t numDevices =
      1 + rng.below(std::clamp(options.maxDevices, 1, 5));
  std::vector<std::pair<std::string, int64_t>> devices(
      pool.begin(), pool.begin() + numDevices);
  auto spell = [&](const std::pair<std::string, int64_t> &id) {
    DeviceSpec spec{id.first, id.second, "", ""};
    if (rng.chance(0.4))
      spec.adapter = detail::adapterOf(id.first, id.second);
    switch (rng.below(6)) {
    case 0: spec.written = "default"; break;
    case 1: spec.written = id.first; break;
    case 2: spec.written = identityOf(id.first, id.second); break;
    case 3: spec.written = "cuda-like:" + std::to_string(id.second); break;
    default: break;
    }
    return spec;
  };
  g.defaultDevice = spell(rng.chance(0.7) ? devices[rng.below(numDevices)]
                                          : pool[rng.below(pool.size())]);

  GraphMode mode = options.mode ? *options.mode
                   : rng.chance(0.5) ? GraphMode::Clean
                   : rng.chance(0.5) ? GraphMode::FewConflicts
                                     : GraphMode::Wild;
  double commitRate = 0.1 + 0.8 * rng.unit();
  double scalarRate = 0.05 + 0.25 * rng.unit();
  double freeLaneRate = 0.1 + 0.4 * rng.unit();
  double strayRate = mode == GraphMode::FewConflicts ? 0.002 + 0.02 * rng.unit()
                                                     : 0.0;
  int span = std::max(0, options.maxNodes - options.minNodes);
  int numNodes = options.minNodes + static_cast<int>(rng.below(span + 1));

  static const std::vector<std::vector<int64_t>> shapes = {
      {4}, {1}, {3, 1}, {3, 4}, {1, 4}, {2, 1, 4}, {2, 3, 4}};

  // Lane 0 is never committed; lane i > 0 is devices[i - 1].
  std::vector<detail::Lane> lanes(numDevices + 1);
  std::vector<int> allFloats, allBools, allScalarFloats;
  std::vector<int> laneOf;
  int64_t nextInput = 0;

  // An operand for an op of `lane`: mostly the most recent values, so
  // chains get deep; from the own lane or the free lane, or (Wild, strays)
  // from anywhere. -1 when there is none.
  auto fromList = [&](const std::vector<int> &list) -> int {
    if (list.empty())
      return -1;
    if (rng.chance(0.6)) {
      size_t recent = std::min<size_t>(list.size(), 6);
      return list[list.size() - 1 - rng.below(recent)];
    }
    return rng.pick(list);
  };
  auto operand = [&](size_t lane, bool wantBool) -> int {
    auto listOf = [&](const detail::Lane &l) -> const std::vector<int> & {
      return wantBool ? l.bools : l.floats;
    };
    if (mode == GraphMode::Wild || rng.chance(strayRate))
      return fromList(wantBool ? allBools : allFloats);
    bool own = lane == 0 || rng.chance(1.0 - freeLaneRate);
    int v = fromList(listOf(lanes[own ? lane : 0]));
    if (v < 0)
      v = fromList(listOf(lanes[own ? 0 : lane]));
    return v;
  };

  auto add = [&](Node node, size_t lane) {
    int id = static_cast<int>(g.nodes.size());
    bool committedSource =
        (node.kind == NodeKind::Input || node.kind == NodeKind::Constant ||
         node.kind == NodeKind::Transfer) &&
        node.device.has_value();
    if (node.isBool) {
      lanes[lane].bools.push_back(id);
      allBools.push_back(id);
    } else {
      lanes[lane].floats.push_back(id);
      allFloats.push_back(id);
      if (node.shape.empty())
        allScalarFloats.push_back(id);
      if (committedSource)
        lanes[lane].anchors.push_back(id);
    }
    laneOf.push_back(static_cast<int>(lane));
    g.nodes.push_back(std::move(node));
  };

  while (static_cast<int>(g.nodes.size()) < numNodes) {
    size_t lane = rng.chance(freeLaneRate) ? 0 : 1 + rng.below(numDevices);
    const std::pair<std::string, int64_t> *laneDevice =
        lane ? &devices[lane - 1] : nullptr;
    // In Wild graphs sources are committed to any device.
    auto commitTo = [&]() -> std::optional<DeviceSpec> {
      if (mode == GraphMode::Wild)
        return rng.chance(commitRate)
                   ? std::optional(spell(devices[rng.below(numDevices)]))
                   : std::nullopt;
      if (laneDevice && rng.chance(commitRate))
        return spell(*laneDevice);
      return std::nullopt;
    };

    unsigned roll = static_cast<unsigned>(rng.below(100));
    // Sources until the lane (or, in Wild graphs, the graph) has values.
    if (allFloats.size() < 2 ||
        (mode != GraphMode::Wild && lanes[lane].floats.empty() &&
         lanes[0].floats.empty()))
      roll = 0;
    Node node;
    if (roll < 10) { // input
      node.kind = NodeKind::Input;
      node.opName = "kiln.input";
      node.isBool = rng.chance(0.08);
      node.shape = rng.chance(scalarRate) ? std::vector<int64_t>{}
                                          : rng.pick(shapes);
      node.inputIndex = nextInput++;
      node.device = commitTo();
    } else if (roll < 17) { // constant
      node.kind = NodeKind::Constant;
      node.opName = "kiln.constant";
      node.isBool = rng.chance(0.05);
      node.shape = rng.chance(scalarRate) ? std::vector<int64_t>{}
                                          : rng.pick(shapes);
      node.device = commitTo();
    } else if (roll < 24) { // transfer: crosses lanes on purpose
      if (!laneDevice && mode != GraphMode::Wild)
        laneDevice = &devices[(lane = 1 + rng.below(numDevices)) - 1];
      int from = rng.chance(0.1) && !allBools.empty() ? fromList(allBools)
                                                       : fromList(allFloats);
      node.kind = NodeKind::Transfer;
      node.opName = "kiln.transfer";
      node.operands = {from};
      node.shape = g.nodes[from].shape;
      node.isBool = g.nodes[from].isBool;
      node.device = spell(laneDevice ? *laneDevice
                                     : devices[rng.below(numDevices)]);
    } else if (roll < 46) { // unary
      int x = operand(lane, false);
      node.kind = NodeKind::Unary;
      node.opName = rng.pick(unaryOpNames());
      node.operands = {x};
      node.shape = g.nodes[x].shape;
    } else if (roll < 80) { // binary
      int a = operand(lane, false), b = operand(lane, false);
      // Sometimes a scalar from elsewhere next to a committed operand of
      // this lane: never a conflict, a silent transfer when it is committed.
      if (lane && !lanes[lane].anchors.empty() && rng.chance(0.15) &&
          !allScalarFloats.empty()) {
        a = fromList(lanes[lane].anchors);
        b = fromList(allScalarFloats);
        // A scalar anchor must come first: it decides by position.
        if (!g.nodes[a].shape.empty() && rng.chance(0.5))
          std::swap(a, b);
      }
      node.kind = NodeKind::Binary;
      node.opName = rng.pick(binaryOpNames());
      node.operands = {a, b};
      node.shape = broadcast(g.nodes[a].shape, g.nodes[b].shape);
    } else if (roll < 88 || operand(lane, true) < 0) { // cmp
      int a = operand(lane, false), b = operand(lane, false);
      node.kind = NodeKind::Cmp;
      node.opName = "kiln.cmp";
      node.operands = {a, b};
      node.shape = broadcast(g.nodes[a].shape, g.nodes[b].shape);
      node.isBool = true;
      node.predicate = static_cast<int64_t>(rng.below(6));
    } else { // select
      int c = operand(lane, true);
      if (c < 0)
        c = fromList(allBools);
      int a = operand(lane, false), b = operand(lane, false);
      node.kind = NodeKind::Select;
      node.opName = "kiln.select";
      node.operands = {c, a, b};
      node.shape = broadcast(broadcast(g.nodes[c].shape, g.nodes[a].shape),
                             g.nodes[b].shape);
    }
    add(std::move(node), lane);
  }

  // Return most values nobody uses (the rest stay unused) and a few others.
  std::vector<int> uses(g.nodes.size(), 0);
  for (const Node &node : g.nodes)
    for (int o : node.operands)
      ++uses[o];
  for (size_t id = 0; id < g.nodes.size(); ++id)
    if (uses[id] == 0 ? rng.chance(0.6) : rng.chance(0.03))
      g.results.push_back(static_cast<int>(id));
  return g;
}

//===----------------------------------------------------------------------===//
// Building the graph as MLIR
//===----------------------------------------------------------------------===//

inline DeviceAttr deviceAttr(mlir::MLIRContext &ctx, const DeviceSpec &spec) {
  return DeviceAttr::get(&ctx, spec.api, spec.ordinal, spec.adapter,
                         spec.written);
}

inline mlir::RankedTensorType typeOf(mlir::MLIRContext &ctx, const Node &node) {
  mlir::Type element = node.isBool ? mlir::Type(mlir::IntegerType::get(&ctx, 1))
                                   : mlir::Type(mlir::Float32Type::get(&ctx));
  return mlir::RankedTensorType::get(node.shape, element);
}

struct BuiltGraph {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
};

inline constexpr llvm::StringLiteral kIdAttr = "test.id";

/// The node id of an op built by buildGraph (clones keep it), or -1.
inline int nodeIdOf(mlir::Operation *op) {
  if (auto id = op->getAttrOfType<mlir::IntegerAttr>(kIdAttr))
    return static_cast<int>(id.getInt());
  return -1;
}

inline BuiltGraph buildGraph(mlir::MLIRContext &ctx, const Graph &g) {
  mlir::OpBuilder builder(&ctx);
  BuiltGraph built;
  built.module = mlir::ModuleOp::create(mlir::UnknownLoc::get(&ctx));
  llvm::SmallVector<mlir::Type> resultTypes;
  for (int id : g.results)
    resultTypes.push_back(typeOf(ctx, g.nodes[id]));
  builder.setInsertionPointToEnd(built.module->getBody());
  built.func = mlir::func::FuncOp::create(
      builder, mlir::UnknownLoc::get(&ctx), "graph",
      builder.getFunctionType({}, resultTypes));
  builder.setInsertionPointToEnd(built.func.addEntryBlock());

  std::vector<mlir::Value> values;
  values.reserve(g.nodes.size());
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const Node &node = g.nodes[id];
    mlir::Location loc = mlir::FileLineColLoc::get(
        &ctx, "graph", static_cast<unsigned>(id + 1), 1);
    mlir::OperationState state(loc, node.opName);
    mlir::RankedTensorType type = typeOf(ctx, node);
    state.addTypes(type);
    for (int o : node.operands)
      state.addOperands(values[o]);
    switch (node.kind) {
    case NodeKind::Input:
      state.addAttribute("index", builder.getI64IntegerAttr(node.inputIndex));
      break;
    case NodeKind::Constant:
      if (node.isBool) {
        bool splat = true;
        state.addAttribute("value",
                           mlir::DenseElementsAttr::get(type, llvm::ArrayRef(splat)));
      } else {
        float splat = 1.5f;
        state.addAttribute("value",
                           mlir::DenseElementsAttr::get(type, llvm::ArrayRef(splat)));
      }
      break;
    case NodeKind::Cmp:
      state.addAttribute("predicate",
                         builder.getI64IntegerAttr(node.predicate));
      break;
    default:
      break;
    }
    if (node.device)
      state.addAttribute("device", deviceAttr(ctx, *node.device));
    state.addAttribute(kIdAttr, builder.getI64IntegerAttr(id));
    values.push_back(builder.create(state)->getResult(0));
  }
  llvm::SmallVector<mlir::Value> returned;
  for (int id : g.results)
    returned.push_back(values[id]);
  mlir::func::ReturnOp::create(builder, mlir::UnknownLoc::get(&ctx), returned);
  return built;
}

/// The graph as kiln-opt input: a reproducer for a failing seed.
inline std::string printGraph(mlir::MLIRContext &ctx, const Graph &g) {
  BuiltGraph built = buildGraph(ctx, g);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "// seed " << g.seed << "\n// RUN: kiln-opt %s -verify-diagnostics "
        "-pass-pipeline='builtin.module(func.func(kiln-place-devices{"
        "default-device="
     << identityOf(g.defaultDevice) << "}))'\n";
  built.module->print(os);
  return text;
}

//===----------------------------------------------------------------------===//
// The oracle
//===----------------------------------------------------------------------===//

/// Deliberately wrong variants of a rule, used to prove that the property
/// check notices when the pass implements one of them.
enum class OracleMutant {
  None,
  ScalarsConflict,     // rank-0 operands count like any other
  LastScalar,          // the last committed scalar decides, not the first
  ConflictsCascade,    // an op reading a conflicting result conflicts too
  SpellingIsIdentity,  // the written spelling / adapter distinguish devices
  ReturnDemandsNothing, // func.return does not demand the default device
  TransferDemandsDefault, // a transfer's operand is demanded on the default
  NotesAtOperand,      // a conflict note points at the operand, not at the
                       // source that committed it
};

/// The placement rules, written from the spec rather than from the pass:
/// a value's commitment is a function of its operands' commitments, and an
/// uncommitted value's devices are a function of its users' devices, both
/// memoized over the DAG.
class Oracle {
public:
  explicit Oracle(const Graph &g, OracleMutant mutant = OracleMutant::None)
      : g(g), mutant(mutant), commit(g.nodes.size()),
        demand(g.nodes.size()), users(g.nodes.size()) {
    for (size_t id = 0; id < g.nodes.size(); ++id)
      for (int o : g.nodes[id].operands)
        users[o].push_back(static_cast<int>(id));
    for (int id : g.results)
      ++returnUses[id];
    // Warm the memo in dependency order so the recursion stays shallow on
    // long chains; the answers do not depend on the order.
    for (size_t id = 0; id < g.nodes.size(); ++id)
      commitment(static_cast<int>(id));
  }

  /// The device (identity) a node's result is committed to; nullopt when
  /// uncommitted, which includes conflicting ops.
  std::optional<std::string> committedDevice(int id) {
    const Commitment &c = commitment(id);
    if (!c.device)
      return std::nullopt;
    return identityOf(*c.device);
  }

  bool isConflict(int id) { return commitment(id).conflict; }

  /// Fills the demand memo from the last node up, so that the recursion
  /// over users stays shallow however long the chains are.
  void warmPlacements() {
    for (size_t n = g.nodes.size(); n > 0; --n)
      placements(static_cast<int>(n - 1));
  }

  std::vector<int> conflicts() {
    std::vector<int> ids;
    for (size_t id = 0; id < g.nodes.size(); ++id)
      if (isConflict(static_cast<int>(id)))
        ids.push_back(static_cast<int>(id));
    return ids;
  }

  /// For a conflicting op: the operand indices the report must list (the
  /// first committed non-scalar operand and every one off its device).
  std::vector<unsigned> conflictOperands(int id) {
    std::vector<unsigned> out;
    const Node &node = g.nodes[id];
    const DeviceSpec *first = nullptr;
    for (unsigned i = 0; i < node.operands.size(); ++i) {
      int o = node.operands[i];
      const Commitment &c = commitment(o);
      if (!c.device || g.isScalar(o))
        continue;
      if (!first) {
        first = &*c.device;
        out.push_back(i);
      } else if (!same(*first, *c.device)) {
        out.push_back(i);
      }
    }
    return out;
  }

  /// Every device (identity) node `id` is materialized on, assuming the
  /// graph has no conflict.
  const std::set<std::string> &placements(int id) {
    std::optional<std::set<std::string>> &memo = demand[id];
    if (memo)
      return *memo;
    std::set<std::string> devices;
    if (std::optional<std::string> device = committedDevice(id)) {
      devices.insert(*device);
    } else {
      bool demanded = false;
      if (returnUses.count(id) && mutant != OracleMutant::ReturnDemandsNothing) {
        devices.insert(identityOf(g.defaultDevice));
        demanded = true;
      }
      for (int user : users[id]) {
        demanded = true;
        const Node &u = g.nodes[user];
        if (u.kind == NodeKind::Transfer)
          devices.insert(mutant == OracleMutant::TransferDemandsDefault
                             ? identityOf(g.defaultDevice)
                             : identityOf(*u.device));
        else if (std::optional<std::string> device = committedDevice(user))
          devices.insert(*device);
        else {
          // An uncommitted user is materialized once per device, and each
          // copy reads this value there.
          const std::set<std::string> &there = placements(user);
          devices.insert(there.begin(), there.end());
        }
      }
      if (!demanded || (devices.empty() &&
                        mutant == OracleMutant::ReturnDemandsNothing))
        devices.insert(identityOf(g.defaultDevice));
    }
    memo = std::move(devices);
    return *memo;
  }

  /// Silent transfers the pass inserts in front of node `id`: one per
  /// committed rank-0 operand that is not on the op's device.
  int silentTransfers(int id) {
    const Node &node = g.nodes[id];
    if (isSource(node.kind) || isConflict(id))
      return 0;
    const Commitment &self = commitment(id);
    if (!self.device)
      return 0;
    int count = 0;
    for (int o : node.operands) {
      const Commitment &c = commitment(o);
      if (g.isScalar(o) && c.device && !same(*c.device, *self.device))
        ++count;
    }
    return count;
  }

  /// The source (input, constant or transfer) whose commitment decided a
  /// committed node's device: the line a conflict note points at.
  std::optional<int> originOf(int id) {
    const Commitment &c = commitment(id);
    if (!c.device)
      return std::nullopt;
    return mutant == OracleMutant::NotesAtOperand ? id : c.origin;
  }

  /// How many ops got their device from the scalar rule (for coverage).
  int committedByScalar() {
    int count = 0;
    for (size_t id = 0; id < g.nodes.size(); ++id)
      count += commitment(static_cast<int>(id)).byScalar;
    return count;
  }

private:
  struct Commitment {
    bool known = false;
    bool conflict = false;
    bool byScalar = false;
    std::optional<DeviceSpec> device;
    int origin = -1; // see originOf
  };

  bool same(const DeviceSpec &a, const DeviceSpec &b) const {
    if (mutant == OracleMutant::SpellingIsIdentity)
      return a.api == b.api && a.ordinal == b.ordinal &&
             a.adapter == b.adapter && a.written == b.written;
    return identityOf(a) == identityOf(b);
  }

  const Commitment &commitment(int id) {
    Commitment &memo = commit[id];
    if (memo.known)
      return memo;
    const Node &node = g.nodes[id];
    Commitment c;
    c.known = true;
    if (isSource(node.kind)) {
      c.device = node.device; // a transfer's device is its target
      c.origin = id;
    } else {
      std::vector<DeviceSpec> tensors; // distinct devices of non-scalars
      std::vector<DeviceSpec> scalars; // committed scalars, in operand order
      int tensorOrigin = -1, scalarOrigin = -1; // of the first of each
      bool poisoned = false;
      for (int o : node.operands) {
        const Commitment &oc = commitment(o);
        poisoned |= oc.conflict;
        if (!oc.device)
          continue;
        bool scalar = g.isScalar(o) && mutant != OracleMutant::ScalarsConflict;
        int &firstOrigin = scalar ? scalarOrigin : tensorOrigin;
        if (firstOrigin < 0)
          firstOrigin = oc.origin;
        if (scalar) {
          scalars.push_back(*oc.device);
        } else if (std::none_of(tensors.begin(), tensors.end(),
                                [&](const DeviceSpec &d) {
                                  return same(d, *oc.device);
                                })) {
          tensors.push_back(*oc.device);
        }
      }
      if (tensors.size() > 1 ||
          (poisoned && mutant == OracleMutant::ConflictsCascade)) {
        c.conflict = true; // and the result stays uncommitted
      } else if (tensors.size() == 1) {
        c.device = tensors.front();
        c.origin = tensorOrigin;
      } else if (!scalars.empty()) {
        c.device = mutant == OracleMutant::LastScalar ? scalars.back()
                                                      : scalars.front();
        c.origin = scalarOrigin;
        c.byScalar = true;
      }
    }
    commit[id] = std::move(c);
    return commit[id];
  }

  const Graph &g;
  OracleMutant mutant;
  std::vector<Commitment> commit;
  std::vector<std::optional<std::set<std::string>>> demand;
  std::vector<std::vector<int>> users;
  std::map<int, int> returnUses;
};

//===----------------------------------------------------------------------===//
// Running the pass and comparing
//===----------------------------------------------------------------------===//

/// What placeDevices did, read back from the IR and its outputs.
struct Observed {
  bool succeeded = false;
  std::vector<int> conflictIds;                  // from the returned list
  std::map<int, std::vector<unsigned>> conflictOperands;
  std::map<int, std::vector<std::string>> conflictOperandDevices;
  std::map<int, std::vector<int>> conflictOperandOrigins; // committedAt ids
  std::vector<int> errorIds;                     // from error diagnostics
  size_t otherDiagnostics = 0;                   // warnings, remarks, ...
  std::map<int, std::vector<std::string>> placements; // id -> its copies
  std::map<int, int> silentTransfers;            // user id -> count
  std::vector<std::string> problems;             // malformed output
};

inline std::string identityOf(DeviceAttr attr) {
  return identityOf(attr.getApi().str(), attr.getOrdinal());
}

/// Runs kiln::placeDevices on the built graph and reads back the result.
/// `oracle` is used only to check the rewiring of uses (which copy of a
/// producer each use reads).
inline Observed runPlacement(mlir::MLIRContext &ctx, const Graph &g,
                             Oracle &oracle) {
  Observed seen;
  BuiltGraph built = buildGraph(ctx, g);
  if (mlir::failed(mlir::verify(*built.module))) {
    seen.problems.push_back("the generated graph does not verify");
    return seen;
  }

  PlacementOptions options;
  options.defaultDevice = deviceAttr(ctx, g.defaultDevice);
  llvm::SmallVector<PlacementConflict> conflicts;
  mlir::LogicalResult result = mlir::success();
  {
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
      if (diag.getSeverity() != mlir::DiagnosticSeverity::Error) {
        ++seen.otherDiagnostics;
        return mlir::success();
      }
      auto loc = mlir::dyn_cast<mlir::FileLineColLoc>(diag.getLocation());
      seen.errorIds.push_back(loc ? static_cast<int>(loc.getLine()) - 1 : -1);
      return mlir::success();
    });
    result = placeDevices(built.func, options, &conflicts);
  }
  seen.succeeded = mlir::succeeded(result);
  for (const PlacementConflict &conflict : conflicts) {
    int id = nodeIdOf(conflict.op);
    seen.conflictIds.push_back(id);
    for (const OperandPlacement &operand : conflict.operands) {
      seen.conflictOperands[id].push_back(operand.index);
      seen.conflictOperandDevices[id].push_back(identityOf(operand.device));
      auto at = mlir::dyn_cast<mlir::FileLineColLoc>(operand.committedAt);
      seen.conflictOperandOrigins[id].push_back(
          at ? static_cast<int>(at.getLine()) - 1 : -1);
    }
  }
  if (!seen.succeeded)
    return seen;

  if (mlir::failed(mlir::verify(*built.module)))
    seen.problems.push_back("the placed graph does not verify");

  // Where each op runs; for a silent transfer, its target.
  auto deviceOf = [&](mlir::Operation *op) -> std::optional<std::string> {
    if (auto placed = mlir::dyn_cast_or_null<PlacedOpInterface>(op))
      if (DeviceAttr device = placed.getPlacement())
        return identityOf(device);
    return std::nullopt;
  };
  // The node a value comes from, looking through silent transfers.
  auto originOf = [&](mlir::Value v) -> int {
    mlir::Operation *def = v.getDefiningOp();
    if (def && nodeIdOf(def) < 0 && mlir::isa<TransferOp>(def))
      def = def->getOperand(0).getDefiningOp();
    return def ? nodeIdOf(def) : -1;
  };
  std::string defaultId = identityOf(g.defaultDevice);
  auto problem = [&](int id, const std::string &what) {
    seen.problems.push_back("node " + std::to_string(id) + " (" +
                            (id >= 0 ? g.nodes[id].opName : "?") + "): " +
                            what);
  };

  for (mlir::Operation &op : built.func.getBody().front()) {
    if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        int origin = originOf(v);
        if (i >= g.results.size() || origin != g.results[i]) {
          problem(origin, "returned in place of result #" + std::to_string(i));
          continue;
        }
        if (!oracle.committedDevice(origin) &&
            deviceOf(v.getDefiningOp()) != defaultId)
          problem(origin, "returned from a copy that is not on the default "
                          "device " + defaultId);
      }
      continue;
    }
    int id = nodeIdOf(&op);
    std::optional<std::string> device = deviceOf(&op);
    if (id < 0) {
      // Only silent transfers may appear: a rank-0 value moved to the one
      // op that reads it.
      auto transfer = mlir::dyn_cast<TransferOp>(op);
      if (!transfer || !transfer.getResult().hasOneUse() ||
          mlir::cast<mlir::RankedTensorType>(transfer.getType()).getRank() != 0) {
        seen.problems.push_back("unexpected op without an id: " +
                                op.getName().getStringRef().str());
        continue;
      }
      mlir::Operation *user = *transfer.getResult().getUsers().begin();
      int userId = nodeIdOf(user);
      ++seen.silentTransfers[userId];
      if (deviceOf(user) != device)
        problem(userId, "a silent transfer targets another device than the op");
      if (deviceOf(transfer.getInput().getDefiningOp()) == device)
        problem(userId, "a silent transfer moves a value to where it is");
      continue;
    }
    if (!device) {
      problem(id, "left without a device");
      continue;
    }
    seen.placements[id].push_back(*device);

    // Each copy reads copies of the right producers, placed where it runs.
    const Node &node = g.nodes[id];
    if (op.getNumOperands() != node.operands.size()) {
      problem(id, "operand count changed");
      continue;
    }
    for (unsigned i = 0; i < op.getNumOperands(); ++i) {
      mlir::Value v = op.getOperand(i);
      int origin = originOf(v);
      if (origin != node.operands[i]) {
        problem(id, "operand #" + std::to_string(i) + " reads node " +
                        std::to_string(origin) + " instead of node " +
                        std::to_string(node.operands[i]));
        continue;
      }
      std::optional<std::string> there = deviceOf(v.getDefiningOp());
      if (node.kind == NodeKind::Transfer) {
        if (!oracle.committedDevice(origin) && there != device)
          problem(id, "reads an uncommitted operand from " +
                          there.value_or("nowhere") + ", not from its target " +
                          *device);
      } else if (there != device) {
        problem(id, "on " + *device + " reads operand #" + std::to_string(i) +
                        " from " + there.value_or("nowhere"));
      }
    }
  }
  return seen;
}

struct CheckStats {
  size_t graphs = 0;
  size_t ops = 0;
  size_t conflictedGraphs = 0;
  size_t conflicts = 0;
  size_t fewConflictGraphs = 0; // 1 to 3 conflicting ops
  size_t cleanGraphs = 0;
  size_t cleanMultiDeviceGraphs = 0; // clean, and ops on >= 2 devices
  size_t copies = 0;                 // extra copies made by cloning
  size_t opsOnThreeOrMore = 0;
  size_t silentTransfers = 0;
  size_t committedByScalar = 0;
  size_t onDefaultOnly = 0;          // uncommitted ops placed on the default
};

template <typename T>
std::string join(const T &items) {
  std::ostringstream os;
  os << "{";
  bool first = true;
  for (const auto &item : items) {
    os << (first ? "" : ", ") << item;
    first = false;
  }
  os << "}";
  return os.str();
}

/// Runs the pass on `g` and compares with the oracle. Returns every
/// mismatch, one per line (at most a screenful); empty when they agree.
inline std::string checkGraph(mlir::MLIRContext &ctx, const Graph &g,
                              OracleMutant mutant = OracleMutant::None,
                              CheckStats *stats = nullptr) {
  Oracle oracle(g, mutant);
  Observed seen = runPlacement(ctx, g, oracle);
  std::vector<std::string> out = seen.problems;
  auto mismatch = [&](const std::string &line) { out.push_back(line); };

  std::vector<int> expectedConflicts = oracle.conflicts();
  std::vector<int> gotConflicts = seen.conflictIds;
  std::sort(gotConflicts.begin(), gotConflicts.end());
  std::vector<int> errorIds = seen.errorIds;
  std::sort(errorIds.begin(), errorIds.end());

  if (seen.otherDiagnostics)
    mismatch(std::to_string(seen.otherDiagnostics) +
             " diagnostics that are not errors");
  if (!expectedConflicts.empty()) {
    if (seen.succeeded)
      mismatch("placeDevices succeeded, expected conflicts at " +
               join(expectedConflicts));
    if (gotConflicts != expectedConflicts)
      mismatch("conflicts returned at " + join(gotConflicts) +
               ", expected at " + join(expectedConflicts));
    if (errorIds != expectedConflicts)
      mismatch(std::to_string(errorIds.size()) + " errors at " +
               join(errorIds) + ", expected " +
               std::to_string(expectedConflicts.size()) + " at " +
               join(expectedConflicts));
    for (int id : expectedConflicts) {
      std::vector<unsigned> want = oracle.conflictOperands(id);
      if (seen.conflictOperands.count(id) &&
          seen.conflictOperands[id] != want)
        mismatch("conflict at node " + std::to_string(id) +
                 " reports operands " + join(seen.conflictOperands[id]) +
                 ", expected " + join(want));
      std::vector<std::string> devices;
      std::vector<int> origins;
      for (unsigned i : want) {
        devices.push_back(*oracle.committedDevice(g.nodes[id].operands[i]));
        origins.push_back(*oracle.originOf(g.nodes[id].operands[i]));
      }
      if (seen.conflictOperandOrigins.count(id) &&
          seen.conflictOperandOrigins[id] != origins)
        mismatch("conflict at node " + std::to_string(id) +
                 " says its operands were committed at nodes " +
                 join(seen.conflictOperandOrigins[id]) + ", expected " +
                 join(origins));
      if (seen.conflictOperandDevices.count(id) &&
          seen.conflictOperandDevices[id] != devices)
        mismatch("conflict at node " + std::to_string(id) +
                 " reports devices " + join(seen.conflictOperandDevices[id]) +
                 ", expected " + join(devices));
    }
  } else {
    oracle.warmPlacements();
    if (!seen.succeeded)
      mismatch("placeDevices failed with conflicts at " + join(gotConflicts) +
               " (errors at " + join(errorIds) + "), expected none");
    else {
      if (!errorIds.empty())
        mismatch("succeeded but emitted errors at " + join(errorIds));
      for (size_t n = 0; n < g.nodes.size(); ++n) {
        int id = static_cast<int>(n);
        const std::set<std::string> &want = oracle.placements(id);
        std::vector<std::string> got = seen.placements[id];
        std::sort(got.begin(), got.end());
        std::vector<std::string> wantList(want.begin(), want.end());
        if (got != wantList)
          mismatch("node " + std::to_string(id) + " (" + g.nodes[id].opName +
                   ") placed on " + join(got) + ", expected " +
                   join(wantList));
        int transfers = seen.silentTransfers.count(id)
                            ? seen.silentTransfers[id] : 0;
        if (transfers != oracle.silentTransfers(id))
          mismatch("node " + std::to_string(id) + " (" + g.nodes[id].opName +
                   ") got " + std::to_string(transfers) +
                   " silent transfers, expected " +
                   std::to_string(oracle.silentTransfers(id)));
      }
      for (const auto &[id, count] : seen.silentTransfers)
        if (id < 0 || id >= static_cast<int>(g.nodes.size()))
          mismatch(std::to_string(count) + " silent transfers feed no node");
    }
  }

  if (stats) {
    ++stats->graphs;
    stats->ops += g.nodes.size();
    stats->conflicts += expectedConflicts.size();
    stats->committedByScalar += oracle.committedByScalar();
    if (!expectedConflicts.empty()) {
      ++stats->conflictedGraphs;
      stats->fewConflictGraphs += expectedConflicts.size() <= 3;
    } else {
      ++stats->cleanGraphs;
      std::set<std::string> used;
      for (size_t n = 0; n < g.nodes.size(); ++n) {
        int id = static_cast<int>(n);
        const std::set<std::string> &where = oracle.placements(id);
        used.insert(where.begin(), where.end());
        stats->copies += where.size() - 1;
        stats->opsOnThreeOrMore += where.size() >= 3;
        stats->silentTransfers += oracle.silentTransfers(id);
        stats->onDefaultOnly +=
            !oracle.committedDevice(id) && where.size() == 1 &&
            *where.begin() == identityOf(g.defaultDevice);
      }
      stats->cleanMultiDeviceGraphs += used.size() >= 2;
    }
  }

  if (out.empty())
    return {};
  std::string text;
  for (size_t i = 0; i < out.size() && i < 20; ++i)
    text += "  " + out[i] + "\n";
  if (out.size() > 20)
    text += "  ... and " + std::to_string(out.size() - 20) + " more\n";
  return text;
}

/// A context with the dialects the graphs use, ready for many graphs.
inline void prepareContext(mlir::MLIRContext &ctx) {
  ctx.loadDialect<KilnDialect, mlir::func::FuncDialect>();
  ctx.disableMultithreading();
  // test.id is a discardable attribute of an unloaded dialect.
  ctx.allowUnregisteredDialects();
}

} // namespace kiln::placement_test

#endif // KILN_TEST_UNIT_PLACEMENT_RANDOMGRAPH_H
