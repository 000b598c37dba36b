//===- Store.h - The SQLite store of one cache directory --------*- C++ -*-===//
//
// One SQLite database per cache directory (<dir>/kiln.db) holds tuning
// records, compiled kernels and the drivers' VkPipelineCache data. A cache
// only ever saves work: every failure (a missing, read-only, locked, full or
// corrupt database, a row whose bytes no longer match their hash, a database
// written by a newer Kiln) is a miss or a put that stores nothing, plus one
// warning on stderr per kind of failure per store. Nothing here throws,
// aborts or returns bytes other than those stored under the key.
//
// Layout: a `meta` table holds the schema version; the data tables carry the
// version in their names (tuning_v1, kernels_v1, pipeline_caches_v1), so a
// later schema adds tables beside these instead of reinterpreting their rows.
// A database whose version is newer than this Kiln's is left untouched and
// the store runs disabled. Each row stores its size and a 64-bit FNV-1a hash
// over the key and the value, checked on every read.
//
// Threading: one Store may be used from many threads; a mutex serializes its
// calls on its one SQLite connection. Many processes may share one file:
// WAL mode lets readers run beside a writer and SQLite's file locks order
// the writers (a busy timeout waits for them). Tuning records and kernels
// are first-writer-wins, so every process reads the same value for a key.
// After fork() a child must not use its parent's Store (SQLite's rule for
// connections); it opens its own, best when the parent held none open on
// that file at the fork.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_STORE_H
#define KILN_RUNTIME_STORE_H

#include "kiln/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;

namespace kiln::rt {

/// 64-bit FNV-1a over `size` bytes, continuing from `state` (the offset
/// basis by default). Guards cached bytes against corruption, not forgery.
uint64_t fnv1a64(const void *data, size_t size,
                 uint64_t state = 0xcbf29ce484222325ULL);

class Store {
public:
  struct Options {
    /// How long one SQLite call waits for another process's lock before it
    /// counts as a failure.
    int busyTimeoutMs = 5000;
    /// Where warnings go (the whole line, without a newline); stderr when
    /// empty. Called with the store's mutex held: do not call back into it.
    std::function<void(const std::string &)> onWarning;
  };

  /// KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln;
  /// empty when none of them is set.
  static std::string defaultDirectory();
  /// Opens or creates <dir>/kiln.db, creating `dir` with its parents. Never
  /// fails: a store that cannot be opened (an unwritable directory, a
  /// corrupt file, a directory where the file should be, a lock held past
  /// the busy timeout, a newer schema) is returned disabled after one
  /// warning "kiln: cache <path>: <why>; running without it (<what to do>)".
  static std::shared_ptr<Store> open(const std::string &dir, Options options);
  static std::shared_ptr<Store> open(const std::string &dir);
  /// The process's store at defaultDirectory(), opened on first use and
  /// never closed (devices save their pipeline caches into it while the
  /// process exits); null when no directory is known, KILN_CACHE_DIR is
  /// "off", or the store is disabled.
  static Store *process();
  ~Store();
  Store(const Store &) = delete;
  Store &operator=(const Store &) = delete;

  /// False once the store runs without its database (from the start or
  /// after a corruption error); every lookup is then a miss.
  bool enabled() const;
  /// Why the store is disabled; empty while it is enabled.
  std::string whyDisabled() const;
  /// <dir>/kiln.db.
  const std::string &path() const { return path_; }

  struct TuningRecord {
    std::string config;
    double seconds = 0;
    double defaultSeconds = 0;
    int64_t candidates = 0;
  };
  std::optional<TuningRecord> findTuning(const std::string &key);
  /// First writer wins: true when this call stored the record, false when
  /// the key was already there or the write failed. A NaN time is not
  /// stored (SQLite would read it back as NULL).
  bool putTuning(const std::string &key, const TuningRecord &record);

  std::optional<std::vector<uint8_t>> findKernel(const std::string &key);
  /// First writer wins, as putTuning. `kind` says what the bytes are
  /// ("spirv", "cpu-object", ...), for listings.
  bool putKernel(const std::string &key, std::string_view kind,
                 const void *bytes, size_t size);

  /// The driver's VkPipelineCache data (wrapped by wrapPipelineCache), one
  /// per device fingerprint. A put replaces the previous data, since the
  /// driver's cache grows as pipelines are added.
  std::optional<std::vector<uint8_t>> findPipelineCache(const std::string &device);
  bool putPipelineCache(const std::string &device, const void *bytes,
                        size_t size);

  struct Entry {
    std::string table; ///< "tuning", "kernels" or "pipeline_caches"
    std::string key;
    uint64_t bytes = 0; ///< the value's size (a tuning record: its config)
  };
  /// Every entry, by table then key; empty when disabled.
  std::vector<Entry> list();
  /// Deletes every entry (and gives the space back to the file system).
  Status clear();
  /// PRAGMA integrity_check, the schema version, and every row's size and
  /// hash; the error says what is wrong and what to do.
  Status verify();

  struct Counters {
    uint64_t hits = 0, misses = 0, writes = 0, warnings = 0;
  };
  Counters counters() const;

private:
  Store(std::string path, Options options);
  void openDatabase(const std::string &dir);
  bool setUpSchema(std::string &why, std::string &advice);

  // Everything below runs with mutex_ held.
  void warnOnce(const std::string &kind, const std::string &message);
  /// Reports the SQLite error `rc` of `what`; a corruption disables the store.
  void failed(int rc, const std::string &what, const char *consequence);
  void disable(const std::string &why, const std::string &advice);
  std::optional<std::vector<uint8_t>> findBlob(const char *table,
                                               const char *what,
                                               const std::string &key);
  bool putBlob(const char *sql, const std::string &key, std::string_view kind,
               const void *bytes, size_t size, const char *what);
  void dropBadRow(const char *table, const std::string &key, int64_t hash);

  const std::string path_;
  const Options options_;
  mutable std::mutex mutex_;
  sqlite3 *db_ = nullptr;
  std::string whyDisabled_;
  Counters counters_;
  std::set<std::string> warned_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_STORE_H
