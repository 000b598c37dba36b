//===- Stats.h - what the compiler and runtime did --------------*- C++ -*-===//

#ifndef KILN_STATS_H
#define KILN_STATS_H

#include <cstdint>

namespace kiln {

struct Stats {
  uint64_t graphs_compiled = 0;   // realizations that built a graph (MLIR)
  uint64_t graph_cache_hits = 0;  // realizations that reused the Program of
                                  // a graph of the same structure
  uint64_t kernels_compiled = 0;  // kernels lowered (SPIR-V or CPU JIT)
  uint64_t kernel_cache_hits = 0; // kernels found already compiled
  uint64_t kernels_loaded = 0;    // kernels read from the cache's store
                                  // instead of compiled
  uint64_t tuning_hits = 0;       // kernels configured by a tuned record
  uint64_t tuning_misses = 0;     // kernels the store had no record for
  uint64_t kernels_tuned = 0;     // kernels tuned (KILN_AUTOTUNE=on)
  uint64_t pipeline_cache_hits = 0; // Vulkan pipelines the driver's cache,
                                    // read from the store, already held
  uint64_t kernels_dispatched = 0;
  uint64_t transfers = 0;         // device-to-device copies executed
  uint64_t bytes_uploaded = 0;
  uint64_t bytes_downloaded = 0;
  double compile_seconds = 0;     // graph passes + codegen
  double run_seconds = 0;         // uploads, dispatches and the final read
  // The buffer plan of the last graph realized: the most bytes of
  // intermediates (kernel results that are not outputs) alive at once, and
  // the bytes they would take with a buffer each.
  uint64_t last_graph_peak_bytes = 0;
  uint64_t last_graph_unplanned_bytes = 0;
  // The compiled-kernel cache now (not reset by reset_stats): its entries,
  // their estimated bytes (bounded by KILN_KERNEL_CACHE_MB, default 512),
  // and the kernels evicted to stay within that budget since the start.
  uint64_t kernel_cache_entries = 0;
  uint64_t kernel_cache_bytes = 0;
  uint64_t kernel_cache_evictions = 0;
};

/// Counters since the process started or the last reset_stats().
Stats stats();
void reset_stats();

} // namespace kiln

#endif // KILN_STATS_H
