//===- GraphCache.h - reuse a Program for a graph of the same structure -*- C++ -*-===//
//
// A training loop or a server records the same graph again and again with
// new data. Its structure (ops, shapes, dtypes, committed devices, view and
// window attributes, which operand is which, the placement policy and the
// default device) decides placement, fusion and every kernel, so the
// Program compiled for it the first time is run again without building
// MLIR. Scalars (rank-0 constants: a learning rate, `x * 2.0f`) are slots:
// their values are read from the new graph's nodes at each run, and only
// which of them are equal is part of the structure (equal scalars share one
// buffer). Larger splat constants are copied into kernels, so their values
// are part of the key.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_GRAPHCACHE_H
#define KILN_LIB_FRONTEND_GRAPHCACHE_H

#include "lib/Frontend/Graph.h"

#include "kiln/runtime/Program.h"

#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

/// The nodes a realization of `roots` needs, in the order GraphBuilder
/// emits them, and the structure that decides its Program.
struct GraphStructure {
  std::vector<Node *> order;
  std::string key;
};
GraphStructure graphStructure(const std::vector<std::shared_ptr<Node>> &roots,
                              const std::string &context);

/// Whether GraphBuilder makes `node` a graph input (a kiln.input).
inline bool isGraphInput(const Node &node) {
  return node.realized() || node.kind == OpKind::Input;
}

/// One compiled graph: its Program, the runtime devices it runs on, and
/// per Program constant the position in `order` of the node it reads.
struct CachedGraph {
  std::shared_ptr<const rt::Program> program;
  std::vector<rt::Device *> devices;
  std::vector<uint32_t> constantNodes;
};

/// Least recently used out past `capacity` entries (KILN_GRAPH_CACHE,
/// default 64): a Program keeps its kernels' code alive, so the bound keeps
/// a process that sees ever new graphs from pinning evicted kernels.
class GraphCache {
public:
  const CachedGraph *find(const std::string &key);
  const CachedGraph &insert(const std::string &key, CachedGraph graph);
  size_t size() const { return entries.size(); }

private:
  using Entry = std::pair<std::string, CachedGraph>;
  std::list<Entry> order; // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> entries;
};

/// KILN_GRAPH_CACHE (default 64); 0 turns the cache off.
size_t graphCacheCapacity();

/// The bytes of a splat constant node's element as stored.
std::vector<uint8_t> splatBytesOf(const Node &node);

/// `value` as an f16 or bf16 (`dtype`) stores it: rounded to nearest, ties
/// to even, as the graph's constant attributes round.
uint16_t halfBitsOf(double value, DType dtype);

/// The value of f16 or bf16 (`dtype`) `bits` (exact in f32).
float halfBitsToFloat(uint16_t bits, DType dtype);

} // namespace kiln

#endif // KILN_LIB_FRONTEND_GRAPHCACHE_H
