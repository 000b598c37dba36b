// Benchmarks of the placement analysis, kiln::placeDevices, and a fuzz
// driver for its property check (the generator and oracle of
// test/unit/placement/RandomGraph.h).
//
//   BM_PlaceDevices/1000    one random 1,000-op graph, placed per iteration
//   BM_PlaceDevices/10000   the same with 10,000 ops
//
// The graphs are built once (no conflicts; committed and uncommitted values
// over several devices); each iteration places a fresh clone of the
// function, and only placeDevices is timed. Reported in ms per graph.
//
//   kiln-bench-placement --fuzz=N [--fuzz-base=S] [--fuzz-min-nodes=A]
//                        [--fuzz-max-nodes=B]
//       checks N random graphs (seeds S, S+1, ...) against the oracle and
//       exits 1 at the first mismatch, printing its seed
//   kiln-bench-placement --dump-seed=S [--fuzz-min-nodes=A] [--fuzz-max-nodes=B]
//       prints the graph of seed S as kiln-opt input, with the oracle's
//       verdict and the check's result (seeds from kiln-placement-tests use
//       the default sizes)

#include "../test/unit/placement/RandomGraph.h"

#include "mlir/IR/MLIRContext.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

using namespace kiln;
using namespace kiln::placement_test;

namespace {

struct BenchGraph {
  mlir::MLIRContext ctx;
  Graph graph;
  BuiltGraph built;
  size_t committed = 0, uncommitted = 0, copies = 0;
};

/// A clean graph of `nodes` ops over at least two devices with both
/// committed and uncommitted values in good measure; the same every run.
BenchGraph &graphOf(int nodes) {
  static std::map<int, std::unique_ptr<BenchGraph>> cache;
  std::unique_ptr<BenchGraph> &slot = cache[nodes];
  if (slot)
    return *slot;
  slot = std::make_unique<BenchGraph>();
  prepareContext(slot->ctx);
  GenOptions options;
  options.mode = GraphMode::Clean;
  options.minNodes = options.maxNodes = nodes;
  for (uint64_t seed = 0x62656e6368ull;; ++seed) { // "bench"
    Graph g = generateGraph(seed, options);
    Oracle oracle(g);
    if (!oracle.conflicts().empty())
      continue; // cannot happen for clean graphs; be safe
    oracle.warmPlacements();
    size_t committed = 0, copies = 0;
    std::set<std::string> devices;
    for (size_t id = 0; id < g.nodes.size(); ++id) {
      committed += oracle.committedDevice(static_cast<int>(id)).has_value();
      const std::set<std::string> &where = oracle.placements(static_cast<int>(id));
      copies += where.size() - 1;
      devices.insert(where.begin(), where.end());
    }
    double share = static_cast<double>(committed) / g.nodes.size();
    if (devices.size() < 3 || share < 0.3 || share > 0.7 || copies == 0)
      continue;
    slot->graph = std::move(g);
    slot->committed = committed;
    slot->uncommitted = slot->graph.nodes.size() - committed;
    slot->copies = copies;
    break;
  }
  slot->built = buildGraph(slot->ctx, slot->graph);
  return *slot;
}

void BM_PlaceDevices(benchmark::State &state) {
  BenchGraph &bench = graphOf(static_cast<int>(state.range(0)));
  PlacementOptions options;
  options.defaultDevice = deviceAttr(bench.ctx, bench.graph.defaultDevice);
  for (auto _ : state) {
    state.PauseTiming();
    mlir::func::FuncOp clone = bench.built.func.clone();
    state.ResumeTiming();
    if (mlir::failed(placeDevices(clone, options))) {
      state.SkipWithError("placeDevices reported a conflict");
      clone->erase();
      break;
    }
    state.PauseTiming();
    clone->erase();
    state.ResumeTiming();
  }
  double ops = static_cast<double>(bench.graph.nodes.size());
  state.counters["ops"] = ops;
  state.counters["committed"] = static_cast<double>(bench.committed);
  state.counters["uncommitted"] = static_cast<double>(bench.uncommitted);
  state.counters["clones"] = static_cast<double>(bench.copies);
  state.counters["ops/s"] = benchmark::Counter(
      ops * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PlaceDevices)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

//===----------------------------------------------------------------------===//
// Fuzz driver
//===----------------------------------------------------------------------===//

bool flagValue(const char *arg, const char *name, uint64_t &value) {
  size_t length = std::strlen(name);
  if (std::strncmp(arg, name, length) != 0 || arg[length] != '=')
    return false;
  char *end = nullptr;
  value = std::strtoull(arg + length + 1, &end, 0);
  if (!end || *end) {
    std::fprintf(stderr, "bad value in %s\n", arg);
    std::exit(2);
  }
  return true;
}

int fuzz(uint64_t count, uint64_t base, const GenOptions &options) {
  mlir::MLIRContext ctx;
  prepareContext(ctx);
  CheckStats stats;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t seed = base + i;
    Graph g = generateGraph(seed, options);
    std::string mismatch = checkGraph(ctx, g, OracleMutant::None, &stats);
    if (!mismatch.empty()) {
      std::fprintf(stderr,
                   "MISMATCH in graph #%llu, seed %llu (%zu ops, default "
                   "%s):\n%sreproduce: kiln-bench-placement --dump-seed=%llu "
                   "--fuzz-min-nodes=%d --fuzz-max-nodes=%d\n",
                   static_cast<unsigned long long>(i),
                   static_cast<unsigned long long>(seed), g.nodes.size(),
                   identityOf(g.defaultDevice).c_str(), mismatch.c_str(),
                   static_cast<unsigned long long>(seed), options.minNodes,
                   options.maxNodes);
      return 1;
    }
    if ((i + 1) % 10000 == 0)
      std::fprintf(stderr, "%llu graphs ok\n",
                   static_cast<unsigned long long>(i + 1));
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start).count();
  std::printf("%zu graphs (%zu ops) agree with the oracle in %.1f s: %zu "
              "with conflicts (%zu conflicting ops), %zu clean; %zu clones, "
              "%zu silent transfers\n",
              stats.graphs, stats.ops, seconds, stats.conflictedGraphs,
              stats.conflicts, stats.cleanGraphs, stats.copies,
              stats.silentTransfers);
  return 0;
}

int dump(uint64_t seed, const GenOptions &options) {
  mlir::MLIRContext ctx;
  prepareContext(ctx);
  Graph g = generateGraph(seed, options);
  std::printf("%s", printGraph(ctx, g).c_str());
  Oracle oracle(g);
  std::vector<int> conflicts = oracle.conflicts();
  std::printf("// oracle: %s\n",
              conflicts.empty()
                  ? "no conflict"
                  : ("conflicts at test.id " + join(conflicts)).c_str());
  std::string mismatch = checkGraph(ctx, g);
  std::printf("// check: %s\n%s", mismatch.empty() ? "the pass agrees" : "MISMATCH",
              mismatch.c_str());
  return mismatch.empty() ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  uint64_t fuzzCount = 0, base = 1, dumpSeed = 0, minNodes = 0, maxNodes = 0;
  bool doFuzz = false, doDump = false;
  std::vector<char *> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (flagValue(argv[i], "--fuzz", fuzzCount))
      doFuzz = true;
    else if (flagValue(argv[i], "--dump-seed", dumpSeed))
      doDump = true;
    else if (!flagValue(argv[i], "--fuzz-base", base) &&
             !flagValue(argv[i], "--fuzz-min-nodes", minNodes) &&
             !flagValue(argv[i], "--fuzz-max-nodes", maxNodes))
      rest.push_back(argv[i]);
  }
  GenOptions options;
  if (minNodes)
    options.minNodes = static_cast<int>(minNodes);
  if (maxNodes)
    options.maxNodes = static_cast<int>(maxNodes);
  options.maxNodes = std::max(options.maxNodes, options.minNodes);
  if (doDump)
    return dump(dumpSeed, options);
  if (doFuzz)
    return fuzz(fuzzCount, base, options);

  int restCount = static_cast<int>(rest.size());
  benchmark::Initialize(&restCount, rest.data());
  if (benchmark::ReportUnrecognizedArguments(restCount, rest.data()))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
