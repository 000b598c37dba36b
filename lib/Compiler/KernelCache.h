//===- KernelCache.h - compiled kernels, least recently used first out -*- C++ -*-===//
//
// The session's compiled kernels (SPIR-V, CPU engines), keyed by kernel
// text and bounded by an estimate of the memory they hold, so a service
// that sees ever new shapes reaches a steady state. The budget is
// KILN_KERNEL_CACHE_MB (default 512), shared by the SPIR-V and the CPU
// caches: the least recently used kernel of either goes first (evicting a
// SPIR-V kernel drops the pipelines built from it). The newest kernel, the
// one about to run, is never evicted, even alone past the budget.
// Threading: guarded by the session lock, like everything in Session.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_KERNELCACHE_H
#define KILN_LIB_COMPILER_KERNELCACHE_H

#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>

namespace kiln {


/// One cache of compiled kernels. Entries carry the tick of their last use
/// from a clock shared by all caches of the session, so trimKernelCaches
/// (Session.h) evicts the oldest kernel of any kind.
template <typename Value> class KernelCache {
public:
  explicit KernelCache(uint64_t &clock) : clock(clock) {}

  /// The entry for `key`, now the most recent; null when absent.
  Value *find(const std::string &key) {
    auto it = index.find(key);
    if (it == index.end())
      return nullptr;
    order.splice(order.begin(), order, it->second);
    order.front().used = ++clock;
    return &it->second->value;
  }

  /// Stores `value`, charged `bytes`; trimming is the caller's (the newest
  /// entry is the kernel about to run).
  Value &insert(const std::string &key, Value value, uint64_t bytes) {
    order.push_front(Entry{key, std::move(value), bytes, ++clock});
    index[key] = order.begin();
    total += bytes;
    return order.front().value;
  }

  /// The last use of the least recently used entry; UINT64_MAX when empty.
  uint64_t oldestUse() const { return order.empty() ? UINT64_MAX : order.back().used; }

  /// Drops the least recently used entry, calling `onEvict` on it first.
  void evictOldest(const std::function<void(Value &)> &onEvict) {
    Entry &oldest = order.back();
    if (onEvict)
      onEvict(oldest.value);
    total -= oldest.bytes;
    index.erase(oldest.key);
    order.pop_back();
    ++evicted;
  }

  /// Every entry as (key, value), most recent first (tests inspect them).
  template <typename F> void forEach(F f) {
    for (Entry &entry : order)
      f(entry.key, entry.value);
  }

  uint64_t bytes() const { return total; }
  uint64_t size() const { return order.size(); }
  uint64_t evictions() const { return evicted; }

private:
  struct Entry {
    std::string key;
    Value value;
    uint64_t bytes;
    uint64_t used;
  };
  uint64_t &clock;
  std::list<Entry> order; // most recent first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index;
  uint64_t total = 0, evicted = 0;
};

} // namespace kiln

#endif // KILN_LIB_COMPILER_KERNELCACHE_H
