//===- PlacementPropertyTest.cpp - kiln::placeDevices against an oracle ---===//
//
// Thousands of random graphs (RandomGraph.h), each placed by the pass and
// compared exactly with an independent statement of the rules: the set of
// conflicting ops (returned list and error diagnostics), and, without
// conflicts, the devices every op is materialized on and the silent scalar
// transfers. A failure prints the seed; `kiln-bench-placement --dump-seed=S`
// prints that graph as kiln-opt input.
//
// Also: hand-written graphs with the expected answer spelled out, mutants
// of the oracle that the check must catch, and a check that no kiln op kind
// bypasses PlacedOpInterface.
//
//===----------------------------------------------------------------------===//

#include "RandomGraph.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <chrono>

using namespace kiln;
using namespace kiln::placement_test;

namespace {

constexpr uint64_t kBaseSeed = 0x6b696c6e0000ull; // "kiln" << 16
constexpr int kGraphs = 10000;

class PlacementProperty : public ::testing::Test {
protected:
  void SetUp() override { prepareContext(ctx); }
  mlir::MLIRContext ctx;
};

//===----------------------------------------------------------------------===//
// Random graphs
//===----------------------------------------------------------------------===//

TEST_F(PlacementProperty, RandomGraphsMatchOracle) {
  CheckStats stats;
  int failures = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kGraphs && failures < 3; ++i) {
    uint64_t seed = kBaseSeed + i;
    Graph g = generateGraph(seed);
    std::string mismatch = checkGraph(ctx, g, OracleMutant::None, &stats);
    if (!mismatch.empty()) {
      ++failures;
      ADD_FAILURE() << "graph #" << i << ", seed " << seed << " ("
                    << g.nodes.size() << " ops, default "
                    << identityOf(g.defaultDevice)
                    << "): the pass disagrees with the oracle\n"
                    << mismatch
                    << "reproduce: kiln-bench-placement --dump-seed=" << seed;
    }
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start).count();
  std::printf("[ stats    ] %zu graphs, %zu ops in %.2f s: %zu with conflicts "
              "(%zu of them with 1-3; %zu conflicting ops), %zu clean (%zu "
              "over 2+ devices); "
              "%zu extra copies, %zu ops on 3+ devices, %zu silent "
              "transfers, %zu ops committed by a scalar, %zu uncommitted ops "
              "on the default device only\n",
              stats.graphs, stats.ops, seconds, stats.conflictedGraphs,
              stats.fewConflictGraphs, stats.conflicts, stats.cleanGraphs,
              stats.cleanMultiDeviceGraphs, stats.copies,
              stats.opsOnThreeOrMore, stats.silentTransfers,
              stats.committedByScalar, stats.onDefaultOnly);

  // The generator must exercise every rule, or the comparison proves little.
  if (failures == 0) {
    EXPECT_EQ(stats.graphs, static_cast<size_t>(kGraphs));
    EXPECT_GT(stats.cleanGraphs, stats.graphs / 3);
    EXPECT_GT(stats.conflictedGraphs, stats.graphs / 5);
    EXPECT_GT(stats.fewConflictGraphs, stats.graphs / 20);
    EXPECT_GT(stats.cleanMultiDeviceGraphs, stats.graphs / 5);
    EXPECT_GT(stats.copies, stats.graphs);
    EXPECT_GT(stats.opsOnThreeOrMore, 100u);
    EXPECT_GT(stats.silentTransfers, 100u);
    EXPECT_GT(stats.committedByScalar, 100u);
    EXPECT_GT(stats.onDefaultOnly, 100u);
  }
}

/// The placed function up to device spellings: each op's name, id, device
/// identity and operands (by position), one line each.
std::string fingerprint(mlir::func::FuncOp func) {
  std::map<mlir::Operation *, size_t> position;
  std::string text;
  for (mlir::Operation &op : func.getBody().front()) {
    position[&op] = position.size();
    text += op.getName().getStringRef().str() + " #" +
            std::to_string(nodeIdOf(&op));
    if (auto placed = mlir::dyn_cast<PlacedOpInterface>(op))
      text += placed.getPlacement() ? " on " + identityOf(placed.getPlacement())
                                    : " unplaced";
    for (mlir::Value v : op.getOperands())
      text += " %" + std::to_string(position[v.getDefiningOp()]);
    text += "\n";
  }
  return text;
}

// Placing a placed graph changes nothing: every value is committed now.
// (Which spelling of a device an op ends up with may change; identity not.)
TEST_F(PlacementProperty, PlacingTwiceChangesNothing) {
  int checked = 0;
  for (int i = 0; i < 1000; ++i) {
    Graph g = generateGraph(kBaseSeed + i);
    if (!Oracle(g).conflicts().empty())
      continue;
    ++checked;
    BuiltGraph built = buildGraph(ctx, g);
    PlacementOptions options;
    options.defaultDevice = deviceAttr(ctx, g.defaultDevice);
    ASSERT_TRUE(mlir::succeeded(placeDevices(built.func, options)))
        << "seed " << g.seed;
    std::string once = fingerprint(built.func);
    ASSERT_TRUE(mlir::succeeded(placeDevices(built.func, options)))
        << "seed " << g.seed;
    ASSERT_EQ(once, fingerprint(built.func)) << "seed " << g.seed;
  }
  EXPECT_GT(checked, 500);
}

// Clean graphs never conflict by construction (the benchmark relies on it).
TEST_F(PlacementProperty, CleanGraphsHaveNoConflict) {
  GenOptions options;
  options.mode = GraphMode::Clean;
  for (int i = 0; i < 300; ++i) {
    Graph g = generateGraph(kBaseSeed + 1000000 + i, options);
    EXPECT_TRUE(Oracle(g).conflicts().empty()) << "seed " << g.seed;
  }
}

// The check has teeth: an oracle with one rule changed disagrees with the
// pass on some graph, so a pass that implemented that change would fail.
TEST_F(PlacementProperty, OracleMutantsAreCaught) {
  const std::pair<OracleMutant, const char *> mutants[] = {
      {OracleMutant::ScalarsConflict, "rank-0 operands conflict"},
      {OracleMutant::LastScalar, "the last committed scalar decides"},
      {OracleMutant::ConflictsCascade, "conflicts cascade"},
      {OracleMutant::SpellingIsIdentity, "spelling is identity"},
      {OracleMutant::ReturnDemandsNothing, "return demands nothing"},
      {OracleMutant::TransferDemandsDefault, "transfer demands the default"},
      {OracleMutant::NotesAtOperand, "notes point at the operand"},
  };
  for (auto [mutant, what] : mutants) {
    int caughtAt = -1;
    for (int i = 0; i < 1000 && caughtAt < 0; ++i)
      if (!checkGraph(ctx, generateGraph(kBaseSeed + i), mutant).empty())
        caughtAt = i;
    EXPECT_GE(caughtAt, 0) << "mutant '" << what << "' survived 1000 graphs";
    std::printf("[ mutant   ] '%s' caught at graph #%d\n", what, caughtAt);
  }
}

//===----------------------------------------------------------------------===//
// Hand-written graphs, expected answers spelled out
//===----------------------------------------------------------------------===//

DeviceSpec dev(const std::string &api, int64_t ordinal,
               const std::string &adapter = "", const std::string &written = "") {
  return DeviceSpec{api, ordinal, adapter, written};
}

struct GraphText {
  Graph g;
  explicit GraphText(DeviceSpec defaultDevice) {
    g.defaultDevice = std::move(defaultDevice);
  }
  int push(Node node) {
    g.nodes.push_back(std::move(node));
    return static_cast<int>(g.nodes.size()) - 1;
  }
  int input(std::vector<int64_t> shape, std::optional<DeviceSpec> device = {}) {
    Node n;
    n.kind = NodeKind::Input;
    n.opName = "kiln.input";
    n.shape = std::move(shape);
    n.device = std::move(device);
    n.inputIndex = static_cast<int64_t>(g.nodes.size());
    return push(std::move(n));
  }
  int constant(std::vector<int64_t> shape, std::optional<DeviceSpec> device = {}) {
    Node n;
    n.kind = NodeKind::Constant;
    n.opName = "kiln.constant";
    n.shape = std::move(shape);
    n.device = std::move(device);
    return push(std::move(n));
  }
  int transfer(int x, DeviceSpec to) {
    Node n;
    n.kind = NodeKind::Transfer;
    n.opName = "kiln.transfer";
    n.operands = {x};
    n.shape = g.nodes[x].shape;
    n.isBool = g.nodes[x].isBool;
    n.device = std::move(to);
    return push(std::move(n));
  }
  int unary(const char *name, int x) {
    Node n;
    n.kind = NodeKind::Unary;
    n.opName = name;
    n.operands = {x};
    n.shape = g.nodes[x].shape;
    return push(std::move(n));
  }
  int binary(const char *name, int a, int b) {
    Node n;
    n.kind = NodeKind::Binary;
    n.opName = name;
    n.operands = {a, b};
    n.shape = broadcast(g.nodes[a].shape, g.nodes[b].shape);
    return push(std::move(n));
  }
  int cmp(int a, int b) {
    Node n;
    n.kind = NodeKind::Cmp;
    n.opName = "kiln.cmp";
    n.operands = {a, b};
    n.shape = broadcast(g.nodes[a].shape, g.nodes[b].shape);
    n.isBool = true;
    return push(std::move(n));
  }
  int select(int c, int a, int b) {
    Node n;
    n.kind = NodeKind::Select;
    n.opName = "kiln.select";
    n.operands = {c, a, b};
    n.shape = broadcast(broadcast(g.nodes[c].shape, g.nodes[a].shape),
                        g.nodes[b].shape);
    return push(std::move(n));
  }
  void ret(int id) { g.results.push_back(id); }
};

class PlacementCases : public PlacementProperty {
protected:
  /// Places `g`, checks the output is well formed, and that the oracle
  /// agrees; the test then checks the answer itself.
  Observed place(const Graph &g) {
    Oracle oracle(g);
    Observed seen = runPlacement(ctx, g, oracle);
    EXPECT_EQ(join(seen.problems), "{}");
    EXPECT_EQ(checkGraph(ctx, g), "");
    return seen;
  }
  static std::vector<std::string> on(Observed &seen, int id) {
    std::vector<std::string> where = seen.placements[id];
    std::sort(where.begin(), where.end());
    return where;
  }
  using Devices = std::vector<std::string>;
};

TEST_F(PlacementCases, EveryConflictReportedNoneCascades) {
  GraphText t(dev("vulkan", 0));
  int a = t.input({8}, dev("vulkan", 0));
  int a2 = t.input({8}, dev("vulkan", 0));
  int b = t.input({8}, dev("vulkan", 1, "", "cuda-like:1"));
  int c = t.constant({8}, dev("vulkan", 2));
  int d = t.binary("kiln.mul", a, b);
  int e = t.binary("kiln.max", a2, c);
  int f = t.binary("kiln.add", d, e); // reads two conflicts: not one itself
  int h = t.binary("kiln.add", f, a); // f is uncommitted: no conflict
  t.ret(h);
  Observed seen = place(t.g);
  EXPECT_FALSE(seen.succeeded);
  EXPECT_EQ(seen.conflictIds, (std::vector<int>{d, e}));
  EXPECT_EQ(seen.errorIds, (std::vector<int>{d, e}));
  EXPECT_EQ(seen.conflictOperands[d], (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(seen.conflictOperandDevices[e], (Devices{"vulkan:0", "vulkan:2"}));
}

TEST_F(PlacementCases, ThreeDevicesInOneSelect) {
  GraphText t(dev("cpu", 0));
  int x = t.input({4}, dev("vulkan", 0));
  int y = t.input({4}, dev("vulkan", 1));
  int z = t.input({4}, dev("vulkan", 0, "other-adapter"));
  int w = t.input({4}, dev("metal", 0));
  int m = t.cmp(x, y);              // conflict
  int m2 = t.cmp(x, x);             // vulkan:0
  int s = t.select(m2, z, w);       // vulkan:0 twice, metal:0: conflict
  int s2 = t.select(m2, y, w);      // three devices
  t.ret(m);
  t.ret(s);
  t.ret(s2);
  Observed seen = place(t.g);
  EXPECT_EQ(seen.conflictIds, (std::vector<int>{m, s, s2}));
  EXPECT_EQ(seen.conflictOperands[s], (std::vector<unsigned>{0, 2}));
  EXPECT_EQ(seen.conflictOperands[s2], (std::vector<unsigned>{0, 1, 2}));
}

TEST_F(PlacementCases, ScalarNeverConflicts) {
  GraphText t(dev("vulkan", 0));
  int a = t.input({4}, dev("vulkan", 0));
  int s = t.constant({}, dev("vulkan", 1));
  int c = t.binary("kiln.mul", a, s);
  int d = t.binary("kiln.mul", s, c); // scalar first, tensor decides
  t.ret(d);
  Observed seen = place(t.g);
  ASSERT_TRUE(seen.succeeded);
  EXPECT_EQ(on(seen, s), (Devices{"vulkan:1"}));
  EXPECT_EQ(on(seen, c), (Devices{"vulkan:0"}));
  EXPECT_EQ(on(seen, d), (Devices{"vulkan:0"}));
  EXPECT_EQ(seen.silentTransfers[c], 1);
  EXPECT_EQ(seen.silentTransfers[d], 1);
}

TEST_F(PlacementCases, FirstCommittedScalarDecides) {
  GraphText t(dev("vulkan", 0));
  int x = t.input({2, 3, 4});        // uncommitted tensor
  int u = t.input({});               // uncommitted scalar
  int s1 = t.input({}, dev("vulkan", 2));
  int s0 = t.input({}, dev("vulkan", 0));
  int r = t.binary("kiln.add", u, s1);  // scalar rule: vulkan:2
  int q = t.binary("kiln.sub", r, s0);  // first committed scalar: vulkan:2
  int y = t.binary("kiln.pow", x, q);   // tensor uncommitted: vulkan:2
  t.ret(y);
  Observed seen = place(t.g);
  ASSERT_TRUE(seen.succeeded);
  EXPECT_EQ(on(seen, u), (Devices{"vulkan:2"}));
  EXPECT_EQ(on(seen, r), (Devices{"vulkan:2"}));
  EXPECT_EQ(on(seen, q), (Devices{"vulkan:2"}));
  EXPECT_EQ(on(seen, x), (Devices{"vulkan:2"}));
  EXPECT_EQ(on(seen, y), (Devices{"vulkan:2"}));
  EXPECT_EQ(seen.silentTransfers[q], 1);
  EXPECT_EQ(seen.silentTransfers[y], 0);
}

TEST_F(PlacementCases, SpellingAndAdapterAreNotIdentity) {
  GraphText t(dev("cpu", 0));
  int a = t.input({4}, dev("vulkan", 0, "", "default"));
  int b = t.input({4}, dev("vulkan", 0, "gpu-0-uuid", "vulkan"));
  int c = t.binary("kiln.add", a, b);
  t.ret(c);
  Observed seen = place(t.g);
  ASSERT_TRUE(seen.succeeded);
  EXPECT_EQ(on(seen, c), (Devices{"vulkan:0"}));
}

TEST_F(PlacementCases, SameAdapterTwoContextsConflicts) {
  GraphText t(dev("vulkan", 0));
  int a = t.input({4}, dev("vulkan", 0, "gpu-0-uuid", "default"));
  int b = t.input({4}, dev("metal", 0, "gpu-0-uuid", "metal:0"));
  int c = t.binary("kiln.add", a, b);
  t.ret(c);
  Observed seen = place(t.g);
  EXPECT_EQ(seen.conflictIds, (std::vector<int>{c}));
}

TEST_F(PlacementCases, UncommittedFollowsEveryUser) {
  GraphText t(dev("cpu", 0));
  int a = t.input({4}, dev("vulkan", 0));
  int b = t.input({4}, dev("vulkan", 1));
  int m = t.input({4});
  int n = t.unary("kiln.neg", m);
  int x = t.binary("kiln.add", a, n);
  int y = t.binary("kiln.add", b, n);
  int k = t.transfer(n, dev("metal", 0));
  int unused = t.unary("kiln.exp", n);
  t.ret(x);
  t.ret(y);
  t.ret(n);
  t.ret(k);
  Observed seen = place(t.g);
  ASSERT_TRUE(seen.succeeded);
  Devices all = {"cpu:0", "metal:0", "vulkan:0", "vulkan:1"};
  EXPECT_EQ(on(seen, m), all);
  EXPECT_EQ(on(seen, n), all);
  EXPECT_EQ(on(seen, k), (Devices{"metal:0"}));
  EXPECT_EQ(on(seen, unused), (Devices{"cpu:0"}));
}

TEST_F(PlacementCases, NothingCommittedRunsOnTheDefault) {
  GraphText t(dev("metal", 0));
  int a = t.input({3, 1});
  int b = t.constant({4});
  int c = t.binary("kiln.mul", a, b);
  int d = t.unary("kiln.exp", c); // unused
  t.ret(c);
  Observed seen = place(t.g);
  ASSERT_TRUE(seen.succeeded);
  for (int id : {a, b, c, d})
    EXPECT_EQ(on(seen, id), (Devices{"metal:0"})) << "node " << id;
}

TEST_F(PlacementCases, TransferOfUncommittedValue) {
  GraphText t(dev("vulkan", 0));
  int x = t.input({4});
  int e = t.unary("kiln.exp", x);
  int k = t.transfer(e, dev("vulkan", 2));
  int z = t.binary("kiln.add", k, e); // e also read on vulkan:2
  t.ret(z);
  Observed seen = place(t.g);
  ASSERT_TRUE(seen.succeeded);
  EXPECT_EQ(on(seen, x), (Devices{"vulkan:2"}));
  EXPECT_EQ(on(seen, e), (Devices{"vulkan:2"}));
  EXPECT_EQ(on(seen, z), (Devices{"vulkan:2"}));
}

//===----------------------------------------------------------------------===//
// No op kind bypasses the device check
//===----------------------------------------------------------------------===//

TEST(PlacementInterface, EveryKilnOpIsPlaced) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<KilnDialect>();
  std::vector<std::string> names;
  for (mlir::RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "kiln")
      continue;
    names.push_back(name.getStringRef().str());
    if (name.getStringRef() == "kiln.yield")
      continue; // a terminator inside kiln.kernel: no results to place
    EXPECT_TRUE(name.hasInterface<PlacedOpInterface>())
        << name.getStringRef().str()
        << " does not implement PlacedOpInterface: placement would skip it";
  }
  // Not vacuous: the dialect's ops were found.
  for (const char *known : {"kiln.input", "kiln.constant", "kiln.transfer",
                            "kiln.add", "kiln.select", "kiln.kernel",
                            "kiln.yield"})
    EXPECT_NE(std::find(names.begin(), names.end(), known), names.end())
        << known;
  EXPECT_GE(names.size(), 24u);
}

// Every elementwise op the dialect registers is one the generator makes, so
// a new op kind is fuzzed (or this fails and says which to add).
TEST(PlacementInterface, GeneratorCoversEveryElementwiseOp) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<KilnDialect>();
  std::set<std::string> generated(unaryOpNames().begin(), unaryOpNames().end());
  generated.insert(binaryOpNames().begin(), binaryOpNames().end());
  generated.insert({"kiln.cmp", "kiln.select"});
  size_t elementwise = 0;
  for (mlir::RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "kiln" ||
        !name.hasTrait<Elementwise>())
      continue;
    ++elementwise;
    EXPECT_TRUE(generated.count(name.getStringRef().str()))
        << name.getStringRef().str() << " is not generated by RandomGraph.h";
  }
  EXPECT_EQ(elementwise, generated.size());
}

} // namespace
