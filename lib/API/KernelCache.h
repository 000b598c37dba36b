//===- KernelCache.h - compiled kernels, least recently used first out -*- C++ -*-===//
//
// The session's compiled kernels (SPIR-V, CPU engines), keyed by kernel
// text and bounded by an estimate of the memory they hold, so a service
// that sees ever new shapes reaches a steady state. The budget is
// KILN_KERNEL_CACHE_MB (default 512). Evicting calls `onEvict` (which drops
// the pipelines built from a SPIR-V kernel). An entry larger than the whole
// budget is still kept while it is the newest: the kernel being run.
// Threading: guarded by the session lock, like everything in Session.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_API_KERNELCACHE_H
#define KILN_LIB_API_KERNELCACHE_H

#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>

namespace kiln {

/// The cache budget in bytes: KILN_KERNEL_CACHE_MB, else 512 MiB. Throws
/// Error for a value that is not a positive number of MiB.
uint64_t kernelCacheBudget();

template <typename Value> class KernelCache {
public:
  /// The entry for `key`, now the most recent; null when absent.
  Value *find(const std::string &key) {
    auto it = index.find(key);
    if (it == index.end())
      return nullptr;
    order.splice(order.begin(), order, it->second);
    return &it->second->value;
  }

  /// Stores `value` (charged `bytes`), then evicts from the least recently
  /// used end until the cache fits `budget` again.
  Value &insert(const std::string &key, Value value, uint64_t bytes, uint64_t budget,
                const std::function<void(Value &)> &onEvict) {
    order.push_front(Entry{key, std::move(value), bytes});
    index[key] = order.begin();
    total += bytes;
    while (total > budget && order.size() > 1) {
      Entry &oldest = order.back();
      if (onEvict)
        onEvict(oldest.value);
      total -= oldest.bytes;
      index.erase(oldest.key);
      order.pop_back();
      ++evicted;
    }
    return order.front().value;
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
  };
  std::list<Entry> order; // most recent first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index;
  uint64_t total = 0, evicted = 0;
};

} // namespace kiln

#endif // KILN_LIB_API_KERNELCACHE_H
