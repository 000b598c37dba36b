//===- Tune.h - tuning a graph's kernels ahead of time ----------*- C++ -*-===//
//
//   kiln::TuneReport r = kiln::tune_graph(text, "model.mlir", {.device = "vulkan:0"});
//
// Places and fuses the graph for the device as compile_graph does, then
// tunes every kernel the cache's store has no record for, on that device,
// and stores the winners; compile_graph and the JIT then build each kernel
// with its tuned config (KILN_AUTOTUNE=cached, the default). Docs:
// docs/tuning.md.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TUNE_H
#define KILN_TUNE_H

#include <functional>
#include <string>
#include <vector>

namespace kiln {

struct TuneProgress {
  int kernel = 0, kernels = 0;       // 1-based: kernel i of n
  std::string summary;               // "matmul+add -> [128, 512] f32"
  int tried = 0, candidates = 0;     // of this kernel
  double best_seconds = 0, default_seconds = 0;
  double eta_seconds = 0;            // for the whole graph, from the budget or the pace so far
};

struct TuneGraphOptions {
  /// "vulkan:0", "cpu:0"; empty: the default device.
  std::string device;
  /// Seconds for the whole graph (0: no limit); each kernel gets an equal
  /// share of what is left, and keeps the best config found in it.
  double budget_seconds = 0;
  /// Writes every candidate's measured time here (the JSON that
  /// KILN_AUTOTUNE_REPLAY reads).
  std::string record_path;
  std::function<void(const TuneProgress &)> progress;
  /// Instead of timing here: compiles every candidate of every kernel and
  /// writes it to this folder for a machine without the compiler to time
  /// (`<hash>-<i>.spv` and `.kernel` manifests as KILN_DUMP_SPIRV writes them,
  /// plus `candidates.json`: per kernel, its key and candidate configs).
  /// Compile for that GPU's limits with KILN_GPU_LIMITS. Vulkan only.
  std::string emit_candidates_dir;
  /// Only the candidates whose config line (as `TunedKernel::best` prints
  /// it) holds every space-separated word of this, e.g. "stages=2" or
  /// "tile=64x128x8 thread=8x8"; the default always runs. Empty: all.
  std::string only;
};

struct TunedKernel {
  std::string summary;
  std::string best, default_config; // KernelConfig lines: "gemm tile=64x128x16 thread=8x8"
  double best_seconds = 0, default_seconds = 0;
  int candidates = 0, tried = 0, wrong = 0;
  bool from_cache = false; // the store had a record: nothing was timed
};

struct TuneReport {
  std::vector<TunedKernel> kernels;
  /// Where the records went; empty when no cache directory is usable (the
  /// winners then only appear in this report).
  std::string store_path;
};

/// Throws CompileError for a graph that does not parse, place or fuse, and
/// Error for a device that does not exist.
TuneReport tune_graph(const std::string &mlir, const std::string &name,
                      const TuneGraphOptions &options = {});

/// Stores the records of timings measured elsewhere: a JSON file with
/// "kernels" (as KILN_AUTOTUNE_REPLAY reads, holding only candidates whose
/// output was right), "keys" (each kernel's full tuning key, from
/// candidates.json) and "defaults" (each kernel's default config). The
/// fastest config of each kernel becomes its record. Returns how many were
/// stored; throws Error for a malformed file or no usable cache directory.
int import_tuning(const std::string &path);

} // namespace kiln

#endif // KILN_TUNE_H
