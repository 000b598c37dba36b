//===- Store.cpp - The SQLite store of one cache directory ----------------===//
//
// Every SQLite call goes through one connection guarded by the store's
// mutex. Failures never leave this file as anything but a miss, a false put
// or a Status: the cache must not be able to break a run.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Store.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <system_error>
#include <thread>

namespace kiln::rt {

uint64_t fnv1a64(const void *data, size_t size, uint64_t state) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < size; ++i) {
    state ^= bytes[i];
    state *= 0x100000001b3ULL;
  }
  return state;
}

namespace {

constexpr int64_t kSchemaVersion = 1;

// Names the version-1 tables; a new schema adds new names, never edits these.
constexpr const char *kCreateSchema =
    "CREATE TABLE IF NOT EXISTS meta("
    "  name TEXT PRIMARY KEY, value NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tuning_v1("
    "  key BLOB PRIMARY KEY, config BLOB NOT NULL, seconds REAL NOT NULL,"
    "  default_seconds REAL NOT NULL, candidates INTEGER NOT NULL,"
    "  size INTEGER NOT NULL, hash INTEGER NOT NULL, created INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS kernels_v1("
    "  key BLOB PRIMARY KEY, kind TEXT NOT NULL, data BLOB NOT NULL,"
    "  size INTEGER NOT NULL, hash INTEGER NOT NULL, created INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS pipeline_caches_v1("
    "  key BLOB PRIMARY KEY, data BLOB NOT NULL,"
    "  size INTEGER NOT NULL, hash INTEGER NOT NULL, created INTEGER NOT NULL);";

struct Table {
  const char *name;    ///< the SQL table
  const char *label;   ///< Entry::table
  const char *what;    ///< in messages
  const char *payload; ///< the column listed as the entry's bytes
};
constexpr Table kTuning = {"tuning_v1", "tuning", "tuning record", "config"};
constexpr Table kKernels = {"kernels_v1", "kernels", "kernel", "data"};
constexpr Table kPipelineCaches = {"pipeline_caches_v1", "pipeline_caches",
                                   "pipeline cache", "data"};
constexpr Table kTables[] = {kTuning, kKernels, kPipelineCaches};

/// Finalizes on every path out of a function.
class Statement {
public:
  Statement(sqlite3 *db, const std::string &sql) {
    rc_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement &) = delete;
  Statement &operator=(const Statement &) = delete;

  /// SQLITE_OK, or the first error of preparing or binding.
  int rc() const { return rc_; }
  sqlite3_stmt *get() const { return stmt_; }

  void bindBlob(int index, const void *data, size_t size) {
    // A null pointer would bind NULL rather than an empty blob.
    if (rc_ == SQLITE_OK)
      rc_ = sqlite3_bind_blob64(stmt_, index, data ? data : "", size,
                                SQLITE_STATIC);
  }
  void bindText(int index, std::string_view text) {
    if (rc_ == SQLITE_OK)
      rc_ = sqlite3_bind_text64(stmt_, index, text.data(), text.size(),
                                SQLITE_STATIC, SQLITE_UTF8);
  }
  void bindInt(int index, int64_t value) {
    if (rc_ == SQLITE_OK)
      rc_ = sqlite3_bind_int64(stmt_, index, value);
  }
  void bindDouble(int index, double value) {
    if (rc_ == SQLITE_OK)
      rc_ = sqlite3_bind_double(stmt_, index, value);
  }
  /// SQLITE_ROW, SQLITE_DONE or an error (also one left from binding).
  int step() {
    if (rc_ != SQLITE_OK)
      return rc_;
    return sqlite3_step(stmt_);
  }

  std::string_view blob(int column) const {
    const void *data = sqlite3_column_blob(stmt_, column);
    int size = sqlite3_column_bytes(stmt_, column);
    if (!data || size <= 0)
      return {};
    return {static_cast<const char *>(data), size_t(size)};
  }
  int type(int column) const { return sqlite3_column_type(stmt_, column); }
  int64_t integer(int column) const {
    return sqlite3_column_int64(stmt_, column);
  }
  double real(int column) const { return sqlite3_column_double(stmt_, column); }

private:
  sqlite3_stmt *stmt_ = nullptr;
  int rc_;
};

void hashLength(uint64_t &state, uint64_t length) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = uint8_t(length >> (8 * i));
  state = fnv1a64(bytes, sizeof(bytes), state);
}

/// Each part prefixed by its length, so ("ab", "c") and ("a", "bc") differ.
void hashPart(uint64_t &state, const void *data, size_t size) {
  hashLength(state, size);
  state = fnv1a64(data, size, state);
}

uint64_t blobHash(std::string_view key, const void *data, size_t size) {
  uint64_t state = fnv1a64(nullptr, 0);
  hashPart(state, key.data(), key.size());
  hashPart(state, data, size);
  return state;
}

uint64_t doubleBits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

uint64_t tuningHash(std::string_view key, std::string_view config,
                    double seconds, double defaultSeconds, int64_t candidates) {
  uint64_t state = fnv1a64(nullptr, 0);
  hashPart(state, key.data(), key.size());
  hashPart(state, config.data(), config.size());
  hashLength(state, doubleBits(seconds));
  hashLength(state, doubleBits(defaultSeconds));
  hashLength(state, uint64_t(candidates));
  return state;
}

bool isCorruption(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

/// What the user can do about an SQLite error.
const char *adviceFor(int rc) {
  switch (rc & 0xff) {
  case SQLITE_BUSY:
  case SQLITE_LOCKED:
    return "another process held it past the busy timeout; try again, or set "
           "KILN_CACHE_DIR to another directory";
  case SQLITE_READONLY:
  case SQLITE_PERM:
  case SQLITE_CANTOPEN:
  case SQLITE_AUTH:
    return "make the directory and the file writable, or set KILN_CACHE_DIR "
           "to a writable directory";
  case SQLITE_CORRUPT:
  case SQLITE_NOTADB:
    return "delete the file with the -wal and -shm files beside it, or set "
           "KILN_CACHE_DIR to another directory";
  case SQLITE_FULL:
    return "free disk space, or set KILN_CACHE_DIR to another disk";
  case SQLITE_IOERR:
    return "check the disk, or set KILN_CACHE_DIR to another directory";
  case SQLITE_NOMEM:
    return "free memory";
  case SQLITE_TOOBIG:
    return "the value is too large for the cache";
  default:
    return "if this persists, delete the file or set KILN_CACHE_DIR to another "
           "directory";
  }
}

/// A key fit for one line of a message.
std::string shortKey(std::string_view key) {
  std::string out;
  for (char c : key.substr(0, 60)) {
    if (c == '\n')
      out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20)
      out += ' ';
    else
      out += c;
  }
  if (key.size() > 60)
    out += "...";
  return out;
}

} // namespace

std::string Store::defaultDirectory() {
  auto variable = [](const char *name) -> std::string {
    const char *value = std::getenv(name);
    return value ? value : "";
  };
  if (std::string dir = variable("KILN_CACHE_DIR"); !dir.empty())
    return dir;
  // The XDG base directory spec says to ignore a relative XDG_CACHE_HOME.
  if (std::string xdg = variable("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/')
    return xdg + "/kiln";
  if (std::string home = variable("HOME"); !home.empty())
    return home + "/.cache/kiln";
  return "";
}

Store::Store(std::string path, Options options)
    : path_(std::move(path)), options_(std::move(options)) {}

Store::~Store() {
  // Closing the last connection checkpoints the WAL into the database.
  if (db_)
    sqlite3_close_v2(db_);
}

std::shared_ptr<Store> Store::open(const std::string &dir, Options options) {
  std::string path = dir.empty() ? "" : (std::filesystem::path(dir) / "kiln.db").string();
  std::shared_ptr<Store> store(new Store(std::move(path), std::move(options)));
  std::lock_guard<std::mutex> lock(store->mutex_);
  try {
    store->openDatabase(dir);
  } catch (const std::exception &error) {
    store->disable(std::string("cannot open: ") + error.what(), "free memory");
  }
  return store;
}

std::shared_ptr<Store> Store::open(const std::string &dir) {
  return open(dir, Options());
}

void Store::openDatabase(const std::string &dir) {
  if (dir.empty()) {
    disable("no cache directory", "set KILN_CACHE_DIR, XDG_CACHE_HOME or HOME");
    return;
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    disable("cannot create the directory: " + error.message(),
            "set KILN_CACHE_DIR to a writable directory");
    return;
  }
  // NOMUTEX: the store's own mutex already serializes the connection.
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    disable("cannot open: " + why, adviceFor(rc));
    return;
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, options_.busyTimeoutMs);
  // The file may come from anywhere: no triggers or views of its own run,
  // and SQL functions in its schema are not trusted.
  sqlite3_db_config(db_, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)nullptr);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)nullptr);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *)nullptr);
  sqlite3_db_config(db_, SQLITE_DBCONFIG_ENABLE_VIEW, 0, (int *)nullptr);

  std::string why, advice;
  if (!setUpSchema(why, advice))
    disable(why, advice);
}

bool Store::setUpSchema(std::string &why, std::string &advice) {
  auto sqlFailed = [&](int rc, const char *doing) {
    why = std::string(doing) + ": " + sqlite3_errmsg(db_);
    advice = adviceFor(rc);
    return false;
  };
  // No memory-mapped reads: another process truncating the file would turn
  // a read into SIGBUS instead of an error. cell_size_check finds some
  // corruption before it is read as data.
  int rc = sqlite3_exec(db_, "PRAGMA mmap_size=0; PRAGMA cell_size_check=ON;",
                        nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK)
    return sqlFailed(rc, "cannot read the database");

  // The version, read before anything is written: a newer Kiln's database is
  // left exactly as it is. -1: no version yet; 0: not an integer.
  auto readVersion = [&](int &tables, int64_t &version) {
    Statement count(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                         " AND name IN ('meta', 'tuning_v1', 'kernels_v1',"
                         " 'pipeline_caches_v1')");
    int rc = count.step();
    if (rc != SQLITE_ROW)
      return rc;
    tables = int(count.integer(0));
    version = -1;
    if (tables == 0)
      return SQLITE_OK;
    Statement meta(db_, "SELECT value FROM meta WHERE name = 'schema_version'");
    rc = meta.step();
    if (rc == SQLITE_ROW)
      version = meta.type(0) == SQLITE_INTEGER ? meta.integer(0) : 0;
    else if (rc == SQLITE_DONE)
      version = -1;
    else if ((rc & 0xff) == SQLITE_ERROR)
      version = -1; // no meta table yet: the other tables are someone's
    else
      return rc;
    return SQLITE_OK;
  };
  auto versionUsable = [&](int64_t version) {
    if (version > kSchemaVersion) {
      why = "written by a newer kiln (schema version " + std::to_string(version) +
            ", this one reads " + std::to_string(kSchemaVersion) + ")";
      advice = "use the newer kiln, or set KILN_CACHE_DIR to another directory";
      return false;
    }
    if (version == 0) {
      why = "the schema version is not a number";
      advice = adviceFor(SQLITE_CORRUPT);
      return false;
    }
    return true;
  };

  int tables = 0;
  int64_t version = -1;
  if ((rc = readVersion(tables, version)) != SQLITE_OK)
    return sqlFailed(rc, "cannot read the database");
  if (!versionUsable(version))
    return false;

  // WAL: readers never block the one writer, and a killed writer leaves the
  // committed state intact. synchronous=NORMAL: a commit does not wait for
  // the disk; a power loss may drop the last writes, never corrupt the file.
  // SQLite answers this one with SQLITE_BUSY at once, without its busy
  // handler, while another process creates or converts a new file (eight
  // processes opening a fresh cache together lost it one run in ~20): wait
  // here instead, up to the same timeout.
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(options_.busyTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 + attempt, 20)));
  }
  if (rc != SQLITE_OK)
    return sqlFailed(rc, "cannot switch to WAL mode");
  rc = sqlite3_exec(db_, "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK)
    return sqlFailed(rc, "cannot set synchronous mode");

  if (tables == 4 && version == kSchemaVersion)
    return true;
  // IMMEDIATE takes the write lock up front (waiting on the busy timeout),
  // so two processes creating the schema at once take turns.
  rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK)
    return sqlFailed(rc, "cannot create the tables");
  auto rollback = [&] {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  };
  if ((rc = readVersion(tables, version)) != SQLITE_OK) {
    rollback();
    return sqlFailed(rc, "cannot read the database");
  }
  if (!versionUsable(version)) {
    rollback();
    return false;
  }
  rc = sqlite3_exec(db_, kCreateSchema, nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db_,
                      ("INSERT OR IGNORE INTO meta(name, value) VALUES"
                       "('schema_version', " +
                       std::to_string(kSchemaVersion) + ")")
                          .c_str(),
                      nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    sqlFailed(rc, "cannot create the tables");
    rollback();
    return false;
  }
  return true;
}

bool Store::enabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return db_ != nullptr;
}

std::string Store::whyDisabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return whyDisabled_;
}

Store::Counters Store::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

void Store::warnOnce(const std::string &kind, const std::string &message) {
  if (!warned_.insert(kind).second)
    return;
  ++counters_.warnings;
  std::string line = "kiln: cache";
  if (!path_.empty())
    line += " " + path_;
  line += ": " + message;
  try {
    if (options_.onWarning) {
      options_.onWarning(line);
      return;
    }
  } catch (...) {
    // A throwing sink must not take the caller down; stderr still gets it.
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

void Store::disable(const std::string &why, const std::string &advice) {
  if (db_) {
    sqlite3_close_v2(db_);
    db_ = nullptr;
  }
  whyDisabled_ = why + " (" + advice + ")";
  warnOnce("disabled", why + "; running without it (" + advice + ")");
}

void Store::failed(int rc, const std::string &what, const char *consequence) {
  std::string why = what + ": " + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
  if (isCorruption(rc)) {
    disable(why, adviceFor(rc));
    return;
  }
  warnOnce("sqlite " + std::to_string(rc & 0xff),
           why + "; " + consequence + " (" + adviceFor(rc) + ")");
}

void Store::dropBadRow(const char *table, const std::string &key, int64_t hash) {
  // Only the row that was read: another process may have replaced it since.
  Statement drop(db_, std::string("DELETE FROM ") + table +
                          " WHERE key = ?1 AND hash = ?2");
  drop.bindBlob(1, key.data(), key.size());
  drop.bindInt(2, hash);
  int rc = drop.step();
  if (rc != SQLITE_DONE)
    failed(rc, "cannot remove a damaged entry", "leaving it");
}

std::optional<std::vector<uint8_t>> Store::findBlob(const char *table,
                                                    const char *what,
                                                    const std::string &key) {
  if (!db_) {
    ++counters_.misses;
    return std::nullopt;
  }
  Statement find(db_, std::string("SELECT key, data, size, hash FROM ") + table +
                          " WHERE key = ?1");
  find.bindBlob(1, key.data(), key.size());
  int rc = find.step();
  if (rc == SQLITE_DONE) {
    ++counters_.misses;
    return std::nullopt;
  }
  if (rc != SQLITE_ROW) {
    failed(rc, std::string("cannot read a ") + what, "treating it as a miss");
    ++counters_.misses;
    return std::nullopt;
  }
  // Every column as written, or the row is damaged: the key itself (an index
  // damaged in place could lead to another row), the size and the hash.
  std::string_view storedKey = find.blob(0), data = find.blob(1);
  int64_t hash = find.integer(3);
  bool intact = find.type(0) == SQLITE_BLOB && find.type(1) == SQLITE_BLOB &&
                find.type(2) == SQLITE_INTEGER && find.type(3) == SQLITE_INTEGER &&
                storedKey == key && find.integer(2) == int64_t(data.size()) &&
                uint64_t(hash) == blobHash(key, data.data(), data.size());
  if (!intact) {
    warnOnce("hash", std::string("a stored ") + what +
                         " does not match its hash; treating it as a miss and "
                         "removing it (if this repeats, run kiln-cache verify)");
    ++counters_.misses;
    dropBadRow(table, key, hash);
    return std::nullopt;
  }
  ++counters_.hits;
  return std::vector<uint8_t>(data.begin(), data.end());
}

bool Store::putBlob(const char *sql, const std::string &key, std::string_view kind,
                    const void *bytes, size_t size, const char *what) {
  if (!db_)
    return false;
  Statement put(db_, sql);
  put.bindBlob(1, key.data(), key.size());
  put.bindBlob(2, bytes, size);
  put.bindInt(3, int64_t(size));
  put.bindInt(4, int64_t(blobHash(key, bytes, size)));
  put.bindInt(5, int64_t(std::time(nullptr)));
  if (!kind.empty())
    put.bindText(6, kind);
  int rc = put.step();
  if (rc != SQLITE_DONE) {
    failed(rc, std::string("cannot store a ") + what, "not storing it");
    return false;
  }
  if (sqlite3_changes(db_) == 0)
    return false; // first writer wins
  ++counters_.writes;
  return true;
}

std::optional<Store::TuningRecord> Store::findTuning(const std::string &key) {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    if (!db_) {
      ++counters_.misses;
      return std::nullopt;
    }
    Statement find(db_, "SELECT key, config, seconds, default_seconds, "
                        "candidates, size, hash FROM tuning_v1 WHERE key = ?1");
    find.bindBlob(1, key.data(), key.size());
    int rc = find.step();
    if (rc == SQLITE_DONE) {
      ++counters_.misses;
      return std::nullopt;
    }
    if (rc != SQLITE_ROW) {
      failed(rc, "cannot read a tuning record", "treating it as a miss");
      ++counters_.misses;
      return std::nullopt;
    }
    TuningRecord record;
    std::string_view storedKey = find.blob(0), config = find.blob(1);
    record.config.assign(config.data(), config.size());
    record.seconds = find.real(2);
    record.defaultSeconds = find.real(3);
    record.candidates = find.integer(4);
    int64_t hash = find.integer(6);
    bool intact = find.type(0) == SQLITE_BLOB && find.type(1) == SQLITE_BLOB &&
                  find.type(5) == SQLITE_INTEGER && find.type(6) == SQLITE_INTEGER &&
                  storedKey == key && find.integer(5) == int64_t(config.size()) &&
                  uint64_t(hash) == tuningHash(key, config, record.seconds,
                                               record.defaultSeconds,
                                               record.candidates);
    if (!intact) {
      warnOnce("hash", "a stored tuning record does not match its hash; "
                       "treating it as a miss and removing it (if this "
                       "repeats, run kiln-cache verify)");
      ++counters_.misses;
      dropBadRow(kTuning.name, key, hash);
      return std::nullopt;
    }
    ++counters_.hits;
    return record;
  } catch (const std::exception &error) {
    warnOnce("exception", std::string("cannot read a tuning record: ") +
                              error.what() + "; treating it as a miss");
    ++counters_.misses;
    return std::nullopt;
  }
}

bool Store::putTuning(const std::string &key, const TuningRecord &record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!db_ || std::isnan(record.seconds) || std::isnan(record.defaultSeconds))
    return false;
  Statement put(db_, "INSERT OR IGNORE INTO tuning_v1(key, config, seconds, "
                     "default_seconds, candidates, size, hash, created) "
                     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  put.bindBlob(1, key.data(), key.size());
  put.bindBlob(2, record.config.data(), record.config.size());
  put.bindDouble(3, record.seconds);
  put.bindDouble(4, record.defaultSeconds);
  put.bindInt(5, record.candidates);
  put.bindInt(6, int64_t(record.config.size()));
  put.bindInt(7, int64_t(tuningHash(key, record.config, record.seconds,
                                    record.defaultSeconds, record.candidates)));
  put.bindInt(8, int64_t(std::time(nullptr)));
  int rc = put.step();
  if (rc != SQLITE_DONE) {
    failed(rc, "cannot store a tuning record", "not storing it");
    return false;
  }
  if (sqlite3_changes(db_) == 0)
    return false;
  ++counters_.writes;
  return true;
}

std::optional<std::vector<uint8_t>> Store::findKernel(const std::string &key) {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    return findBlob(kKernels.name, kKernels.what, key);
  } catch (const std::exception &error) {
    warnOnce("exception", std::string("cannot read a kernel: ") + error.what() +
                              "; treating it as a miss");
    ++counters_.misses;
    return std::nullopt;
  }
}

bool Store::putKernel(const std::string &key, std::string_view kind,
                      const void *bytes, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  return putBlob("INSERT OR IGNORE INTO kernels_v1(key, data, size, hash, "
                 "created, kind) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                 key, kind.empty() ? std::string_view("unknown") : kind, bytes,
                 size, kKernels.what);
}

std::optional<std::vector<uint8_t>>
Store::findPipelineCache(const std::string &device) {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    return findBlob(kPipelineCaches.name, kPipelineCaches.what, device);
  } catch (const std::exception &error) {
    warnOnce("exception", std::string("cannot read a pipeline cache: ") +
                              error.what() + "; treating it as a miss");
    ++counters_.misses;
    return std::nullopt;
  }
}

bool Store::putPipelineCache(const std::string &device, const void *bytes,
                             size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  // REPLACE: the newest data holds every pipeline the older data held.
  return putBlob("INSERT OR REPLACE INTO pipeline_caches_v1(key, data, size, "
                 "hash, created) VALUES(?1, ?2, ?3, ?4, ?5)",
                 device, {}, bytes, size, kPipelineCaches.what);
}

std::vector<Store::Entry> Store::list() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Entry> entries;
  try {
    for (const Table &table : kTables) {
      if (!db_)
        break;
      Statement rows(db_, std::string("SELECT key, length(") + table.payload +
                              ") FROM " + table.name + " ORDER BY key");
      int rc;
      while ((rc = rows.step()) == SQLITE_ROW) {
        std::string_view key = rows.blob(0);
        entries.push_back({table.label, std::string(key), uint64_t(rows.integer(1))});
      }
      if (rc != SQLITE_DONE)
        failed(rc, "cannot list the entries", "listing only some");
    }
  } catch (const std::exception &error) {
    warnOnce("exception", std::string("cannot list the entries: ") + error.what());
  }
  return entries;
}

Status Store::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!db_)
    return Status::unavailable("the cache " + path_ + " is disabled: " + whyDisabled_);
  int rc = sqlite3_exec(db_,
                        "BEGIN IMMEDIATE; DELETE FROM tuning_v1; "
                        "DELETE FROM kernels_v1; DELETE FROM pipeline_caches_v1; "
                        "COMMIT;",
                        nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = sqlite3_errmsg(db_);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    if (isCorruption(rc))
      disable("cannot clear: " + why, adviceFor(rc));
    return Status::unavailable("cannot clear the cache " + path_ + ": " + why +
                               " (" + adviceFor(rc) + ")");
  }
  // Give the space back; both fail harmlessly while another process reads.
  sqlite3_exec(db_, "VACUUM", nullptr, nullptr, nullptr);
  sqlite3_exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
  return Status::ok();
}

Status Store::verify() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!db_)
    return Status::unavailable("the cache " + path_ + " is disabled: " + whyDisabled_);
  auto sqlError = [&](int rc, const std::string &doing) {
    return Status::unavailable(doing + " " + path_ + ": " + sqlite3_errmsg(db_) +
                               " (" + adviceFor(rc) + ")");
  };
  try {
    // integrity_check reports up to 100 problems; the first few say enough.
    Statement check(db_, "PRAGMA integrity_check");
    std::vector<std::string> problems;
    int rc;
    while ((rc = check.step()) == SQLITE_ROW) {
      std::string_view line = check.blob(0);
      if (line != "ok")
        problems.emplace_back(line);
    }
    if (rc != SQLITE_DONE)
      return sqlError(rc, "cannot check the cache");
    if (!problems.empty()) {
      std::string message = "the cache " + path_ + " is damaged: " + problems[0];
      for (size_t i = 1; i < problems.size() && i < 3; ++i)
        message += "; " + problems[i];
      if (problems.size() > 3)
        message += "; and " + std::to_string(problems.size() - 3) + " more";
      return Status::unavailable(message + " (" + adviceFor(SQLITE_CORRUPT) + ")");
    }

    Statement meta(db_, "SELECT value FROM meta WHERE name = 'schema_version'");
    rc = meta.step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      return sqlError(rc, "cannot read the schema version of");
    if (rc != SQLITE_ROW || meta.type(0) != SQLITE_INTEGER ||
        meta.integer(0) != kSchemaVersion)
      return Status::unavailable("the cache " + path_ +
                                 " has lost its schema version (" +
                                 adviceFor(SQLITE_CORRUPT) + ")");

    uint64_t bad = 0;
    std::string examples;
    auto noteBad = [&](const Table &table, std::string_view key) {
      if (++bad <= 3)
        examples += std::string(examples.empty() ? "" : ", ") + table.label +
                    " '" + shortKey(key) + "'";
    };
    {
      Statement rows(db_, "SELECT key, config, seconds, default_seconds, "
                          "candidates, size, hash FROM tuning_v1");
      while ((rc = rows.step()) == SQLITE_ROW) {
        std::string_view key = rows.blob(0), config = rows.blob(1);
        if (rows.integer(5) != int64_t(config.size()) ||
            uint64_t(rows.integer(6)) !=
                tuningHash(key, config, rows.real(2), rows.real(3), rows.integer(4)))
          noteBad(kTuning, key);
      }
      if (rc != SQLITE_DONE)
        return sqlError(rc, "cannot read the tuning records of");
    }
    for (const Table &table : {kKernels, kPipelineCaches}) {
      Statement rows(db_, std::string("SELECT key, data, size, hash FROM ") +
                              table.name);
      while ((rc = rows.step()) == SQLITE_ROW) {
        std::string_view key = rows.blob(0), data = rows.blob(1);
        if (rows.type(1) != SQLITE_BLOB || rows.integer(2) != int64_t(data.size()) ||
            uint64_t(rows.integer(3)) != blobHash(key, data.data(), data.size()))
          noteBad(table, key);
      }
      if (rc != SQLITE_DONE)
        return sqlError(rc, std::string("cannot read the ") + table.what + "s of");
    }
    if (bad)
      return Status::unavailable(
          std::to_string(bad) +
          (bad == 1 ? " entry of " + path_ + " no longer matches its hash ("
                    : " entries of " + path_ + " no longer match their hash (") +
          examples + "); run kiln-cache clear");
    return Status::ok();
  } catch (const std::exception &error) {
    return Status::unavailable("cannot check the cache " + path_ + ": " + error.what());
  }
}

Store *Store::process() {
  // Leaked on purpose: static destructors (the Vulkan context's) write to it.
  static Store *store = [] {
    const char *env = std::getenv("KILN_CACHE_DIR");
    if (env && std::string_view(env) == "off")
      return static_cast<Store *>(nullptr);
    std::string dir = defaultDirectory();
    return dir.empty() ? nullptr : (new std::shared_ptr<Store>(open(dir)))->get();
  }();
  return store && store->enabled() ? store : nullptr;
}

} // namespace kiln::rt
