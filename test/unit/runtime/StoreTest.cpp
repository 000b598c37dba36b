// The cache store (kiln::rt::Store) and the pipeline cache wrapper: round
// trips, first writer wins, damaged and unopenable databases, writers killed
// mid-write, many processes and threads at once, a newer schema, and every
// truncation and bit flip of a wrapped pipeline cache. The rule throughout:
// a lookup returns the bytes that were stored or nothing, never other bytes,
// and nothing crashes.
//
// The tests run as root in CI, where permissions stop nothing; unwritable
// and unreadable places are made of things root cannot use either (a folder
// under /proc/self, a path through a regular file, kiln.db as a directory or
// a symlink loop). The chmod variants run only when not root.

#include "kiln/runtime/PipelineCacheBlob.h"
#include "kiln/runtime/Store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <thread>

using namespace kiln::rt;
namespace fs = std::filesystem;

namespace {

/// A fresh folder, removed with everything in it at the end of the test.
class TempDir {
public:
  /// Under `base`, else $TMPDIR, else /tmp.
  explicit TempDir(std::string base = "") {
    if (base.empty()) {
      const char *tmpdir = std::getenv("TMPDIR");
      base = tmpdir && *tmpdir ? tmpdir : "/tmp";
    }
    std::string pattern = base + "/kiln-store-test-XXXXXX";
    if (mkdtemp(pattern.data()))
      path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) {
      // A chmod variant may have left a folder closed.
      for (auto it = fs::recursive_directory_iterator(path_, ignored);
           it != fs::recursive_directory_iterator(); it.increment(ignored))
        if (it->is_directory(ignored))
          fs::permissions(it->path(), fs::perms::owner_all,
                          fs::perm_options::add, ignored);
      fs::remove_all(path_, ignored);
    }
  }
  const std::string &path() const { return path_; }
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// Options that collect warnings instead of printing them.
Store::Options collecting(std::vector<std::string> &warnings, int busyMs = 5000) {
  Store::Options options;
  options.busyTimeoutMs = busyMs;
  options.onWarning = [&warnings](const std::string &line) {
    warnings.push_back(line);
  };
  return options;
}

Store::Options silent(int busyMs = 5000) {
  Store::Options options;
  options.busyTimeoutMs = busyMs;
  options.onWarning = [](const std::string &) {};
  return options;
}

/// `size` bytes that depend on every byte of `seed`.
std::vector<uint8_t> bytesFor(const std::string &seed, size_t size) {
  uint64_t state = fnv1a64(seed.data(), seed.size()) | 1;
  std::vector<uint8_t> out(size);
  for (size_t i = 0; i < size; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    out[i] = uint8_t(state >> 24);
  }
  return out;
}

std::vector<uint8_t> readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string &path, const uint8_t *data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(data), std::streamsize(size));
}

/// Runs SQL on the database file directly, as another program would.
void rawSql(const std::string &path, const std::string &sql) {
  sqlite3 *db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char *error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

/// The one warning line of a store that could not open.
void expectOneOpenWarning(const std::vector<std::string> &warnings,
                          const std::string &what) {
  ASSERT_EQ(warnings.size(), 1u) << what;
  EXPECT_EQ(warnings[0].rfind("kiln: cache", 0), 0u) << warnings[0];
  EXPECT_NE(warnings[0].find("; running without it ("), std::string::npos)
      << warnings[0];
  EXPECT_EQ(warnings[0].back(), ')') << warnings[0];
}

Store::TuningRecord tuningFor(const std::string &key, int variant = 0) {
  Store::TuningRecord record;
  record.config = "tile=" + std::to_string(key.size() % 97) + " for " +
                  key.substr(0, 20) + " v" + std::to_string(variant);
  record.seconds = 1e-4 * double(key.size() % 13 + 1) + variant;
  record.defaultSeconds = 3e-4 + variant;
  record.candidates = int64_t(key.size() % 50) + variant;
  return record;
}

bool sameRecord(const Store::TuningRecord &a, const Store::TuningRecord &b) {
  return a.config == b.config && a.seconds == b.seconds &&
         a.defaultSeconds == b.defaultSeconds && a.candidates == b.candidates;
}

std::string longKey() {
  std::string key;
  for (int line = 0; key.size() < 5 * 1024; ++line)
    key += "matmul f32 [" + std::to_string(line) + ", 512] x [512, 256]\n";
  return key;
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(Store, EveryTableRoundTrips) {
  TempDir dir;
  const std::string big = longKey();
  const std::vector<uint8_t> mib = bytesFor("one mebibyte", 1 << 20);
  const std::vector<uint8_t> spirv = bytesFor("spirv", 4096);
  {
    std::vector<std::string> warnings;
    auto store = Store::open(dir.path(), collecting(warnings));
    ASSERT_TRUE(store->enabled()) << store->whyDisabled();
    EXPECT_EQ(store->path(), dir / "kiln.db");

    EXPECT_FALSE(store->findTuning("absent"));
    EXPECT_FALSE(store->findKernel("absent"));
    EXPECT_FALSE(store->findPipelineCache("absent"));

    EXPECT_TRUE(store->putTuning("t", tuningFor("t")));
    EXPECT_TRUE(store->putTuning(big, tuningFor(big)));
    EXPECT_TRUE(store->putKernel("k", "spirv", spirv.data(), spirv.size()));
    EXPECT_TRUE(store->putKernel(big, "cpu-object", mib.data(), mib.size()));
    EXPECT_TRUE(store->putKernel("empty", "spirv", nullptr, 0));
    EXPECT_TRUE(store->putPipelineCache("dev", spirv.data(), 100));
    EXPECT_TRUE(store->putPipelineCache(big, mib.data(), mib.size()));

    // First writer wins for tuning records and kernels.
    EXPECT_FALSE(store->putTuning("t", tuningFor("t", 7)));
    EXPECT_FALSE(store->putKernel("k", "spirv", mib.data(), 10));
    // A pipeline cache is replaced by a newer one.
    EXPECT_TRUE(store->putPipelineCache("dev", spirv.data() + 1, 200));

    auto t = store->findTuning("t");
    ASSERT_TRUE(t);
    EXPECT_TRUE(sameRecord(*t, tuningFor("t")));
    auto bigKernel = store->findKernel(big);
    ASSERT_TRUE(bigKernel);
    EXPECT_EQ(*bigKernel, mib);
    auto empty = store->findKernel("empty");
    ASSERT_TRUE(empty);
    EXPECT_TRUE(empty->empty());
    auto dev = store->findPipelineCache("dev");
    ASSERT_TRUE(dev);
    EXPECT_EQ(*dev, std::vector<uint8_t>(spirv.begin() + 1, spirv.begin() + 201));

    Store::Counters counters = store->counters();
    EXPECT_EQ(counters.misses, 3u);
    EXPECT_EQ(counters.hits, 4u);
    EXPECT_EQ(counters.writes, 8u);
    EXPECT_EQ(counters.warnings, 0u);
    EXPECT_TRUE(warnings.empty());
  }

  // Everything is there for the next process, byte for byte.
  std::vector<std::string> warnings;
  auto store = Store::open(dir.path(), collecting(warnings));
  ASSERT_TRUE(store->enabled());
  auto bigTuning = store->findTuning(big);
  ASSERT_TRUE(bigTuning);
  EXPECT_TRUE(sameRecord(*bigTuning, tuningFor(big)));
  auto k = store->findKernel("k");
  ASSERT_TRUE(k);
  EXPECT_EQ(*k, spirv);
  auto bigCache = store->findPipelineCache(big);
  ASSERT_TRUE(bigCache);
  EXPECT_EQ(*bigCache, mib);
  EXPECT_FALSE(store->findKernel(big.substr(0, big.size() - 1)))
      << "a key is matched whole";

  std::vector<Store::Entry> entries = store->list();
  ASSERT_EQ(entries.size(), 7u);
  std::map<std::string, uint64_t> bytes;
  for (const Store::Entry &entry : entries)
    bytes[entry.table + "/" + entry.key] = entry.bytes;
  EXPECT_EQ(bytes["kernels/" + big], mib.size());
  EXPECT_EQ(bytes["kernels/empty"], 0u);
  EXPECT_EQ(bytes["pipeline_caches/dev"], 200u);
  EXPECT_EQ(bytes["tuning/t"], tuningFor("t").config.size());
  EXPECT_TRUE(store->verify().isOk()) << store->verify().toString();
  EXPECT_TRUE(warnings.empty());
}

TEST(Store, KeysAreComparedAsBytes) {
  TempDir dir;
  auto store = Store::open(dir.path(), silent());
  ASSERT_TRUE(store->enabled());
  const std::vector<std::string> keys = {"", "a", std::string("a\0b", 3),
                                         std::string("a\0c", 3), "a\n", "A",
                                         "\xff\xfe not utf-8"};
  for (const std::string &key : keys) {
    std::vector<uint8_t> value = bytesFor("value of " + key, 64);
    EXPECT_TRUE(store->putKernel(key, "spirv", value.data(), value.size()));
    EXPECT_TRUE(store->putTuning(key, tuningFor(key)));
  }
  for (const std::string &key : keys) {
    auto value = store->findKernel(key);
    ASSERT_TRUE(value);
    EXPECT_EQ(*value, bytesFor("value of " + key, 64));
    auto record = store->findTuning(key);
    ASSERT_TRUE(record);
    EXPECT_TRUE(sameRecord(*record, tuningFor(key)));
  }
  EXPECT_EQ(store->list().size(), 2 * keys.size());
}

TEST(Store, NanTimesAreNotStored) {
  TempDir dir;
  auto store = Store::open(dir.path(), silent());
  Store::TuningRecord record = tuningFor("x");
  record.seconds = std::nan("");
  EXPECT_FALSE(store->putTuning("x", record));
  EXPECT_FALSE(store->findTuning("x"));
  record.seconds = 1;
  record.defaultSeconds = INFINITY; // the default config failed: kept
  EXPECT_TRUE(store->putTuning("x", record));
  auto found = store->findTuning("x");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->defaultSeconds, INFINITY);
}

TEST(Store, DefaultDirectoryFollowsTheEnvironment) {
  auto saved = [](const char *name) -> std::optional<std::string> {
    const char *value = std::getenv(name);
    return value ? std::optional<std::string>(value) : std::nullopt;
  };
  auto restore = [](const char *name, const std::optional<std::string> &value) {
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  };
  auto kiln = saved("KILN_CACHE_DIR"), xdg = saved("XDG_CACHE_HOME"),
       home = saved("HOME");
  setenv("KILN_CACHE_DIR", "/k", 1);
  setenv("XDG_CACHE_HOME", "/x", 1);
  setenv("HOME", "/h", 1);
  EXPECT_EQ(Store::defaultDirectory(), "/k");
  unsetenv("KILN_CACHE_DIR");
  EXPECT_EQ(Store::defaultDirectory(), "/x/kiln");
  setenv("XDG_CACHE_HOME", "relative", 1);
  EXPECT_EQ(Store::defaultDirectory(), "/h/.cache/kiln");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(Store::defaultDirectory(), "/h/.cache/kiln");
  unsetenv("HOME");
  EXPECT_EQ(Store::defaultDirectory(), "");
  restore("KILN_CACHE_DIR", kiln);
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
}

TEST(Store, CreatesTheDirectoryWithItsParents) {
  TempDir dir;
  auto store = Store::open(dir / "a/b/c", silent());
  EXPECT_TRUE(store->enabled()) << store->whyDisabled();
  EXPECT_TRUE(fs::exists(dir / "a/b/c/kiln.db"));
}

//===----------------------------------------------------------------------===//
// Places a store cannot open
//===----------------------------------------------------------------------===//

/// Opens `dir`, which cannot hold a usable database: disabled, one warning,
/// every lookup a miss, every put refused, no further warnings.
void expectDisabled(const std::string &dir, const std::string &what) {
  SCOPED_TRACE(what);
  std::vector<std::string> warnings;
  auto store = Store::open(dir, collecting(warnings, 200));
  EXPECT_FALSE(store->enabled());
  EXPECT_FALSE(store->whyDisabled().empty());
  expectOneOpenWarning(warnings, what);
  EXPECT_FALSE(store->findTuning("k"));
  EXPECT_FALSE(store->findKernel("k"));
  EXPECT_FALSE(store->findPipelineCache("k"));
  uint8_t byte = 1;
  EXPECT_FALSE(store->putTuning("k", tuningFor("k")));
  EXPECT_FALSE(store->putKernel("k", "spirv", &byte, 1));
  EXPECT_FALSE(store->putPipelineCache("k", &byte, 1));
  EXPECT_TRUE(store->list().empty());
  EXPECT_FALSE(store->verify().isOk());
  EXPECT_FALSE(store->clear().isOk());
  Store::Counters counters = store->counters();
  EXPECT_EQ(counters.warnings, 1u);
  EXPECT_EQ(counters.misses, 3u);
  EXPECT_EQ(counters.hits + counters.writes, 0u);
  EXPECT_EQ(warnings.size(), 1u) << "one warning per store";
}

TEST(Store, UnopenablePlacesRunDisabledWithOneWarning) {
  TempDir dir;
  // Nobody, root included, creates files under /proc/self.
  expectDisabled("/proc/self/kiln-cache-test", "a directory nobody can create");
  // A path through a regular file.
  writeAll(dir / "file", reinterpret_cast<const uint8_t *>("x"), 1);
  expectDisabled(dir / "file/cache", "a path through a file");
  // kiln.db is a directory.
  fs::create_directories(dir / "isdir/kiln.db");
  expectDisabled(dir / "isdir", "kiln.db is a directory");
  // kiln.db is a symlink loop.
  fs::create_directories(dir / "loop");
  ASSERT_EQ(symlink("kiln.db", (dir / "loop/kiln.db").c_str()), 0);
  expectDisabled(dir / "loop", "kiln.db is a symlink loop");
  // A garbage file where the database should be.
  fs::create_directories(dir / "garbage");
  std::vector<uint8_t> garbage = bytesFor("garbage", 10000);
  writeAll(dir / "garbage/kiln.db", garbage.data(), garbage.size());
  expectDisabled(dir / "garbage", "kiln.db is not a database");
  EXPECT_EQ(readAll(dir / "garbage/kiln.db"), garbage) << "left as it was";
  // No directory at all.
  expectDisabled("", "no directory");

  if (geteuid() != 0) {
    fs::create_directories(dir / "closed");
    ASSERT_EQ(chmod((dir / "closed").c_str(), 0), 0);
    expectDisabled(dir / "closed/cache", "a closed parent directory");
    fs::create_directories(dir / "readonly");
    ASSERT_EQ(chmod((dir / "readonly").c_str(), 0555), 0);
    expectDisabled(dir / "readonly", "a read-only directory");
    fs::create_directories(dir / "unreadable");
    Store::open(dir / "unreadable", silent()).reset();
    ASSERT_EQ(chmod((dir / "unreadable/kiln.db").c_str(), 0), 0);
    expectDisabled(dir / "unreadable", "an unreadable kiln.db");
  }
}

TEST(Store, AnEmptyFileBecomesADatabase) {
  TempDir dir;
  writeAll(dir / "kiln.db", nullptr, 0);
  auto store = Store::open(dir.path(), silent());
  ASSERT_TRUE(store->enabled()) << store->whyDisabled();
  uint8_t byte = 7;
  EXPECT_TRUE(store->putKernel("k", "spirv", &byte, 1));
  EXPECT_TRUE(store->findKernel("k"));
}

TEST(Store, ALockHeldPastTheTimeoutIsAMiss) {
  TempDir dir;
  std::vector<uint8_t> value = bytesFor("v", 100);
  Store::open(dir.path(), silent())->putKernel("old", "spirv", value.data(), 100);

  sqlite3 *other = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "kiln.db").c_str(), &other), SQLITE_OK);
  // A writer that does not finish: WAL readers still read, writers wait.
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr),
            SQLITE_OK);
  std::vector<std::string> warnings;
  auto store = Store::open(dir.path(), collecting(warnings, 100));
  ASSERT_TRUE(store->enabled()) << store->whyDisabled();
  EXPECT_FALSE(store->putKernel("new", "spirv", value.data(), 100));
  EXPECT_FALSE(store->putTuning("new", tuningFor("new")));
  ASSERT_EQ(warnings.size(), 1u) << "one warning for the kind of failure";
  EXPECT_NE(warnings[0].find("database is locked"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("KILN_CACHE_DIR"), std::string::npos) << warnings[0];
  auto old = store->findKernel("old");
  ASSERT_TRUE(old) << "readers are not blocked by the writer";
  EXPECT_EQ(*old, value);
  ASSERT_EQ(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_TRUE(store->putKernel("new", "spirv", value.data(), 100))
      << "a lock is not a reason to give up on the store";
  EXPECT_EQ(store->counters().warnings, 1u);
  store.reset();

  // A connection that holds the file exclusively keeps a new store out.
  ASSERT_EQ(sqlite3_exec(other, "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  warnings.clear();
  auto locked = Store::open(dir.path(), collecting(warnings, 100));
  EXPECT_FALSE(locked->enabled());
  expectOneOpenWarning(warnings, "locked");
  EXPECT_FALSE(locked->findKernel("old"));
  sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  EXPECT_TRUE(Store::open(dir.path(), silent())->findKernel("old"));
}

//===----------------------------------------------------------------------===//
// Damaged databases
//===----------------------------------------------------------------------===//

struct Fixture {
  std::map<std::string, Store::TuningRecord> tuning;
  std::map<std::string, std::vector<uint8_t>> kernels;
  std::map<std::string, std::vector<uint8_t>> caches;
};

/// A small database with a few rows of each table.
Fixture populate(const std::string &dir) {
  Fixture fixture;
  auto store = Store::open(dir, silent());
  for (int i = 0; i < 4; ++i) {
    std::string key = "conv key " + std::to_string(i) + (i == 3 ? "\nline two" : "");
    fixture.tuning[key] = tuningFor(key, i);
    store->putTuning(key, fixture.tuning[key]);
    fixture.kernels[key] = bytesFor("kernel " + key, 150 + 70 * i);
    store->putKernel(key, "spirv", fixture.kernels[key].data(),
                     fixture.kernels[key].size());
  }
  for (int i = 0; i < 2; ++i) {
    std::string key = "10de:2335:00000001:" + std::to_string(i);
    fixture.caches[key] = bytesFor("cache " + key, 300);
    store->putPipelineCache(key, fixture.caches[key].data(), fixture.caches[key].size());
  }
  return fixture;
}

/// Opens `dir` (whatever it holds) and looks every fixture key up. Returns
/// "" when every answer was a miss or exactly the stored value, else what
/// was wrong. Then stores a kernel, which must not crash; when `thorough`
/// also a tuning record and a pipeline cache, and a store that verify()
/// calls intact must read the kernel back.
std::string lookUpEverything(const std::string &dir, const Fixture &fixture,
                             int *hits = nullptr, bool *enabled = nullptr,
                             bool thorough = true) {
  auto store = Store::open(dir, silent(200));
  std::string wrong;
  for (const auto &[key, record] : fixture.tuning) {
    auto found = store->findTuning(key);
    if (found && !sameRecord(*found, record))
      wrong += "tuning '" + key + "' ";
  }
  for (const auto &[key, bytes] : fixture.kernels) {
    auto found = store->findKernel(key);
    if (found && *found != bytes)
      wrong += "kernel '" + key + "' ";
  }
  for (const auto &[key, bytes] : fixture.caches) {
    auto found = store->findPipelineCache(key);
    if (found && *found != bytes)
      wrong += "pipeline cache '" + key + "' ";
  }
  if (hits)
    *hits = int(store->counters().hits);
  if (enabled)
    *enabled = store->enabled();
  uint8_t byte = 42;
  store->putKernel("afterwards", "spirv", &byte, 1);
  if (!thorough)
    return wrong;
  store->putTuning("afterwards", tuningFor("afterwards"));
  store->putPipelineCache("afterwards", &byte, 1);
  if (store->verify().isOk()) {
    auto found = store->findKernel("afterwards");
    if (found && *found != std::vector<uint8_t>{42})
      wrong += "kernel 'afterwards' ";
  }
  return wrong;
}

void removeDatabase(const std::string &dir) {
  std::error_code ignored;
  for (const char *suffix : {"", "-wal", "-shm", "-journal"})
    fs::remove_all(dir + "/kiln.db" + suffix, ignored);
}

/// One damaged copy: `make` fills the work directory.
struct Damage {
  std::string what;
  std::function<void(const std::string &work)> make;
};

/// The damaged copies of `original` (a database of 4 KiB pages).
std::vector<Damage> damagedCopies(const std::vector<uint8_t> &original) {
  const size_t size = original.size(), page = 4096;
  auto file = [](const std::string &work, const std::vector<uint8_t> &bytes,
                 size_t size) {
    writeAll(work + "/kiln.db", bytes.data(), size);
  };
  std::vector<Damage> copies;
  // Truncations. The file is 9 pages (36 KiB), too many offsets for one
  // open each within the time budget, so every offset of the first and last
  // pages (the header; a partial last page) and every 64th one in between.
  for (size_t offset = 0; offset < size; ++offset) {
    bool edge = offset < page || offset >= size - page;
    if (edge || offset % 64 == 0)
      copies.push_back({"truncated at " + std::to_string(offset),
                        [&original, offset, file](const std::string &work) {
                          file(work, original, offset);
                        }});
  }
  // Bit flips: every bit of the 100-byte file header, then one bit (a
  // different one each time) of every 6th byte of the rest.
  for (size_t offset = 0; offset < size; ++offset) {
    bool header = offset < 100;
    if (!header && offset % 6 != 0)
      continue;
    for (int bit = 0; bit < 8; ++bit)
      if (header || bit == int(offset / 6 % 8))
        copies.push_back({"bit " + std::to_string(bit) + " of byte " +
                              std::to_string(offset) + " flipped",
                          [&original, offset, bit, file](const std::string &work) {
                            std::vector<uint8_t> copy = original;
                            copy[offset] ^= uint8_t(1u << bit);
                            file(work, copy, copy.size());
                          }});
  }
  // Whole-file damage.
  const std::vector<uint8_t> garbage = bytesFor("garbage", size);
  copies.push_back({"empty file", [=](const std::string &work) {
                      file(work, garbage, 0);
                    }});
  copies.push_back({"garbage file", [=](const std::string &work) {
                      file(work, garbage, size);
                    }});
  copies.push_back({"zeroed file", [=](const std::string &work) {
                      file(work, std::vector<uint8_t>(size), size);
                    }});
  // Every page after the first garbage: the schema reads, the data does not.
  copies.push_back({"garbage pages",
                    [&original, garbage, file, size, page](const std::string &work) {
                      std::vector<uint8_t> copy = original;
                      std::memcpy(copy.data() + page, garbage.data(), size - page);
                      file(work, copy, size);
                    }});
  copies.push_back({"garbage wal and shm beside an intact file",
                    [&original, garbage, file, size, page](const std::string &work) {
                      file(work, original, size);
                      writeAll(work + "/kiln.db-wal", garbage.data(), 8192);
                      writeAll(work + "/kiln.db-shm", garbage.data(), 32768);
                    }});
  copies.push_back({"kiln.db a directory", [](const std::string &work) {
                      fs::create_directories(work + "/kiln.db");
                    }});
  copies.push_back({"kiln.db a symlink loop", [](const std::string &work) {
                      (void)!symlink("kiln.db", (work + "/kiln.db").c_str());
                    }});
  return copies;
}

TEST(Store, DamagedCopiesNeverReturnWrongBytes) {
  TempDir dir;
  const Fixture fixture = populate(dir / "original");
  // Closing the last connection checkpointed everything into kiln.db.
  ASSERT_FALSE(fs::exists(dir / "original/kiln.db-wal"));
  const std::vector<uint8_t> original = readAll(dir / "original/kiln.db");
  ASSERT_GE(original.size(), 5 * 4096u) << "the fixture should span pages";
  ASSERT_EQ(original.size() % 4096, 0u);
  const int allHits = int(fixture.tuning.size() + fixture.kernels.size() +
                          fixture.caches.size());
  {
    int hits = 0;
    fs::create_directories(dir / "whole");
    writeAll(dir / "whole/kiln.db", original.data(), original.size());
    ASSERT_EQ(lookUpEverything(dir / "whole", fixture, &hits), "");
    ASSERT_EQ(hits, allHits) << "the undamaged copy is read whole";
  }
  // A directory nobody can create (see UnopenablePlacesRunDisabledWithOneWarning).
  EXPECT_EQ(lookUpEverything("/proc/self/kiln-cache-test", fixture), "");

  // Thousands of copies, each opened and written to. On a disk every
  // checkpoint's fdatasync costs milliseconds, so the copies live in memory
  // (/dev/shm) where there is one: what is tested is the reading of the
  // bytes, which the file system does not change. Worker processes share
  // them out, one work directory each.
  std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "";
  TempDir scratch(base);
  ASSERT_FALSE(scratch.path().empty());
  const std::vector<Damage> copies = damagedCopies(original);
  const int workers =
      int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8));
  std::vector<pid_t> children;
  std::vector<int> outputs;
  for (int worker = 0; worker < workers; ++worker) {
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(out[0]);
      std::string work = scratch / std::to_string(worker);
      fs::create_directories(work);
      size_t opened = 0, failures = 0;
      std::string report;
      for (size_t i = worker; i < copies.size(); i += workers) {
        removeDatabase(work);
        copies[i].make(work);
        bool enabled = false;
        // Every write costs a WAL append and a checkpoint at close: one
        // kind of put per copy, all three (and a verify) on every 8th.
        std::string wrong =
            lookUpEverything(work, fixture, nullptr, &enabled, i % 8 == 0);
        opened += enabled;
        if (!wrong.empty() && ++failures <= 5)
          report += copies[i].what + ": " + wrong + "\n";
      }
      report = std::to_string(opened) + " " + std::to_string(failures) + "\n" + report;
      (void)!write(out[1], report.data(), report.size());
      _exit(0);
    }
    close(out[1]);
    children.push_back(child);
    outputs.push_back(out[0]);
  }
  size_t opened = 0, failures = 0;
  std::string examples;
  for (int worker = 0; worker < workers; ++worker) {
    std::string report;
    char buffer[4096];
    ssize_t n;
    while ((n = read(outputs[worker], buffer, sizeof(buffer))) > 0)
      report.append(buffer, size_t(n));
    close(outputs[worker]);
    int status = 0;
    ASSERT_EQ(waitpid(children[worker], &status, 0), children[worker]);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker " << worker << " crashed on a damaged copy";
    size_t workerOpened = 0, workerFailures = 0;
    ASSERT_EQ(std::sscanf(report.c_str(), "%zu %zu", &workerOpened, &workerFailures), 2)
        << report;
    opened += workerOpened;
    failures += workerFailures;
    examples += report.substr(report.find('\n') + 1);
  }
  EXPECT_EQ(failures, 0u) << "damaged copies that gave wrong bytes:\n" << examples;
  EXPECT_GT(copies.size(), 15000u);
  // Both outcomes occur: copies that open (the damage is found per row, or
  // not at all) and copies that do not.
  EXPECT_GT(opened, copies.size() / 10);
  EXPECT_LT(opened, copies.size());
  std::printf("[          ] %zu damaged copies, %zu of them opened, %d workers\n",
              copies.size(), opened, workers);
}

/// Replaces a stored value in place with the sqlite3 API, leaving its
/// stored size and hash as they were.
TEST(Store, BytesChangedBehindTheHashAreAMiss) {
  TempDir dir;
  std::vector<uint8_t> value = bytesFor("value", 500);
  {
    auto store = Store::open(dir.path(), silent());
    store->putKernel("kernel", "spirv", value.data(), value.size());
    store->putKernel("intact", "spirv", value.data(), value.size());
    store->putTuning("tuning", tuningFor("tuning"));
    store->putPipelineCache("device", value.data(), value.size());
  }
  std::vector<uint8_t> changed = value;
  changed[250] ^= 1;
  {
    sqlite3 *db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "kiln.db").c_str(), &db), SQLITE_OK);
    sqlite3_stmt *update = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE kernels_v1 SET data = ?1 WHERE key = ?2",
                                 -1, &update, nullptr),
              SQLITE_OK);
    sqlite3_bind_blob(update, 1, changed.data(), int(changed.size()), SQLITE_STATIC);
    sqlite3_bind_blob(update, 2, "kernel", 6, SQLITE_STATIC);
    EXPECT_EQ(sqlite3_step(update), SQLITE_DONE);
    EXPECT_EQ(sqlite3_changes(db), 1);
    sqlite3_finalize(update);
    sqlite3_close(db);
  }

  std::vector<std::string> warnings;
  auto store = Store::open(dir.path(), collecting(warnings));
  ASSERT_TRUE(store->enabled());
  Status verified = store->verify();
  EXPECT_FALSE(verified.isOk());
  EXPECT_NE(verified.message().find("1 entry"), std::string::npos) << verified.toString();
  EXPECT_NE(verified.message().find("kernels 'kernel'"), std::string::npos)
      << verified.toString();

  EXPECT_FALSE(store->findKernel("kernel"));
  EXPECT_EQ(store->counters().warnings, 1u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("does not match its hash"), std::string::npos) << warnings[0];
  EXPECT_TRUE(store->findKernel("intact"));

  // The bad row is gone: the key is an ordinary miss, free for a new value.
  EXPECT_FALSE(store->findKernel("kernel"));
  EXPECT_TRUE(store->putKernel("kernel", "spirv", value.data(), value.size()));
  EXPECT_EQ(store->findKernel("kernel"), value);
  EXPECT_TRUE(store->verify().isOk()) << store->verify().toString();

  // The other tables check their rows as well; same kind, no new warning.
  rawSql(dir / "kiln.db", "UPDATE tuning_v1 SET candidates = candidates + 1;"
                          "UPDATE pipeline_caches_v1 SET hash = hash + 1;");
  EXPECT_FALSE(store->findTuning("tuning"));
  EXPECT_FALSE(store->findPipelineCache("device"));
  EXPECT_EQ(store->counters().warnings, 1u);
  EXPECT_EQ(store->counters().hits, 2u);
}

TEST(Store, CorruptionFoundAfterOpeningDisablesTheStore) {
  TempDir dir;
  const Fixture fixture = populate(dir.path());
  std::vector<std::string> warnings;
  auto store = Store::open(dir.path(), collecting(warnings));
  ASSERT_TRUE(store->enabled());
  // Garbage over every page after the first, under the open connection.
  std::vector<uint8_t> bytes = readAll(dir / "kiln.db");
  std::vector<uint8_t> garbage = bytesFor("garbage", bytes.size() - 4096);
  int fd = ::open((dir / "kiln.db").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, garbage.data(), garbage.size(), 4096), ssize_t(garbage.size()));
  close(fd);

  EXPECT_FALSE(store->findKernel(fixture.kernels.begin()->first));
  EXPECT_FALSE(store->enabled());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("running without it (delete the file"), std::string::npos)
      << warnings[0];
  EXPECT_FALSE(store->findTuning(fixture.tuning.begin()->first));
  uint8_t byte = 1;
  EXPECT_FALSE(store->putKernel("k", "spirv", &byte, 1));
  EXPECT_EQ(warnings.size(), 1u);
  EXPECT_EQ(store->counters().warnings, 1u);
}

//===----------------------------------------------------------------------===//
// Schema versions
//===----------------------------------------------------------------------===//

TEST(Store, ANewerSchemaIsLeftAlone) {
  TempDir dir;
  std::vector<uint8_t> value = bytesFor("v", 64);
  Store::open(dir.path(), silent())->putKernel("k", "spirv", value.data(), 64);
  rawSql(dir / "kiln.db",
         "UPDATE meta SET value = 2 WHERE name = 'schema_version';"
         "CREATE TABLE kernels_v2(key BLOB PRIMARY KEY, data BLOB);"
         "INSERT INTO kernels_v2 VALUES(x'01', x'02');");
  ASSERT_FALSE(fs::exists(dir / "kiln.db-wal"));
  const std::vector<uint8_t> before = readAll(dir / "kiln.db");

  std::vector<std::string> warnings;
  {
    auto store = Store::open(dir.path(), collecting(warnings));
    EXPECT_FALSE(store->enabled());
    expectOneOpenWarning(warnings, "newer schema");
    EXPECT_NE(warnings[0].find("newer kiln (schema version 2, this one reads 1)"),
              std::string::npos)
        << warnings[0];
    EXPECT_FALSE(store->findKernel("k"));
    EXPECT_FALSE(store->putKernel("k2", "spirv", value.data(), 64));
    EXPECT_FALSE(store->clear().isOk());
  }
  EXPECT_EQ(readAll(dir / "kiln.db"), before) << "the newer database is untouched";

  // An older kiln after the newer one: the version is not a number.
  rawSql(dir / "kiln.db", "UPDATE meta SET value = 'x' WHERE name = 'schema_version'");
  warnings.clear();
  EXPECT_FALSE(Store::open(dir.path(), collecting(warnings))->enabled());
  expectOneOpenWarning(warnings, "version not a number");
}

//===----------------------------------------------------------------------===//
// Processes and threads
//===----------------------------------------------------------------------===//

std::string killKey(int round, int i) {
  return "round " + std::to_string(round) + " kernel " + std::to_string(i);
}

size_t killSize(int i) { return 32 * 1024 + size_t(i % 7) * 40000; }

TEST(Store, WritersKilledMidWriteLeaveAConsistentStore) {
  TempDir dir;
  size_t stored = 0;
  const int delaysMs[] = {1, 3, 6, 10, 20, 35, 60, 100};
  for (int round = 0; round < int(std::size(delaysMs)); ++round) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto store = Store::open(dir.path(), silent());
      for (int i = 0;; ++i) {
        std::vector<uint8_t> bytes = bytesFor(killKey(round, i), killSize(i));
        store->putKernel(killKey(round, i), "spirv", bytes.data(), bytes.size());
        store->putTuning(killKey(round, i), tuningFor(killKey(round, i)));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delaysMs[round]));
    kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status));

    std::vector<std::string> warnings;
    auto store = Store::open(dir.path(), collecting(warnings));
    ASSERT_TRUE(store->enabled()) << store->whyDisabled();
    Status verified = store->verify();
    ASSERT_TRUE(verified.isOk()) << "round " << round << ": " << verified.toString();
    std::vector<Store::Entry> entries = store->list();
    size_t kernels = 0;
    for (const Store::Entry &entry : entries) {
      if (entry.table != "kernels")
        continue;
      int entryRound = 0, i = 0;
      ASSERT_EQ(std::sscanf(entry.key.c_str(), "round %d kernel %d", &entryRound, &i), 2);
      auto bytes = store->findKernel(entry.key);
      ASSERT_TRUE(bytes) << entry.key;
      ASSERT_EQ(*bytes, bytesFor(entry.key, killSize(i))) << entry.key;
      ++kernels;
    }
    for (const Store::Entry &entry : entries) {
      if (entry.table != "tuning")
        continue;
      auto record = store->findTuning(entry.key);
      ASSERT_TRUE(record) << entry.key;
      EXPECT_TRUE(sameRecord(*record, tuningFor(entry.key))) << entry.key;
    }
    EXPECT_GE(kernels, stored) << "committed kernels survive later kills";
    stored = kernels;
    EXPECT_TRUE(warnings.empty()) << warnings[0];
  }
  EXPECT_GT(stored, 0u) << "the children should have stored something";
  std::printf("[          ] %zu kernels survived %zu kills\n", stored,
              std::size(delaysMs));
}

constexpr int kProcesses = 8, kKeys = 50;

std::string tuningValue(int process, int key) {
  return "process " + std::to_string(process) + " key " + std::to_string(key);
}

std::vector<uint8_t> kernelValue(int process, int key) {
  return bytesFor(tuningValue(process, key), 2000 + size_t(key) * 100);
}

/// One child of EightProcessesAgreeOnTheFirstWriter: waits for the start,
/// stores its own value for every key, reads every key back and writes, per
/// key, the process whose value it read and whether its own put won.
[[noreturn]] void agreeChild(const std::string &dir, int process, int start,
                             int report) {
  char go;
  (void)!read(start, &go, 1); // EOF once the parent closes its end
  // Warnings go to stderr with the process number: a failure says why.
  Store::Options options = silent();
  options.onWarning = [process](const std::string &line) {
    std::fprintf(stderr, "process %d: %s\n", process, line.c_str());
  };
  auto store = Store::open(dir, options);
  bool ok = store->enabled();
  std::vector<uint8_t> won(2 * kKeys, 0);
  for (int key = 0; key < kKeys; ++key) {
    Store::TuningRecord record;
    record.config = tuningValue(process, key);
    record.seconds = process;
    won[key] = store->putTuning("tuning " + std::to_string(key), record);
    std::vector<uint8_t> bytes = kernelValue(process, key);
    won[kKeys + key] =
        store->putKernel("kernel " + std::to_string(key), "spirv", bytes.data(), bytes.size());
  }
  std::vector<uint8_t> out(4 * kKeys, 255);
  for (int key = 0; key < kKeys; ++key) {
    auto record = store->findTuning("tuning " + std::to_string(key));
    auto kernel = store->findKernel("kernel " + std::to_string(key));
    for (int writer = 0; writer < kProcesses; ++writer) {
      if (record && record->config == tuningValue(writer, key) &&
          record->seconds == writer)
        out[key] = uint8_t(writer);
      if (kernel && *kernel == kernelValue(writer, key))
        out[kKeys + key] = uint8_t(writer);
    }
  }
  std::copy(won.begin(), won.end(), out.begin() + 2 * kKeys);
  ok = ok && store->counters().warnings == 0;
  (void)!write(report, out.data(), out.size());
  _exit(ok ? 0 : 1);
}

TEST(Store, EightProcessesAgreeOnTheFirstWriter) {
  TempDir dir;
  // No database yet: the children also race to create it.
  int start[2];
  ASSERT_EQ(pipe(start), 0);
  std::vector<pid_t> children;
  std::vector<int> reports;
  for (int process = 0; process < kProcesses; ++process) {
    int report[2];
    ASSERT_EQ(pipe(report), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(start[1]);
      close(report[0]);
      agreeChild(dir.path(), process, start[0], report[1]);
    }
    close(report[1]);
    children.push_back(child);
    reports.push_back(report[0]);
  }
  close(start[0]);
  close(start[1]); // go

  std::vector<std::vector<uint8_t>> seen;
  for (int process = 0; process < kProcesses; ++process) {
    std::vector<uint8_t> report(4 * kKeys);
    size_t got = 0;
    while (got < report.size()) {
      ssize_t n = read(reports[process], report.data() + got, report.size() - got);
      if (n <= 0)
        break;
      got += size_t(n);
    }
    close(reports[process]);
    EXPECT_EQ(got, report.size()) << "process " << process << " reported";
    seen.push_back(report);
  }
  for (int process = 0; process < kProcesses; ++process) {
    int status = 0;
    ASSERT_EQ(waitpid(children[process], &status, 0), children[process]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "process " << process << " saw a disabled store or a warning";
  }

  auto store = Store::open(dir.path(), silent());
  ASSERT_TRUE(store->enabled());
  EXPECT_TRUE(store->verify().isOk()) << store->verify().toString();
  std::map<std::string, int> rows;
  for (const Store::Entry &entry : store->list())
    ++rows[entry.table + "/" + entry.key];
  EXPECT_EQ(rows.size(), size_t(2 * kKeys));
  for (const auto &[key, count] : rows)
    EXPECT_EQ(count, 1) << key;

  for (int slot = 0; slot < 2 * kKeys; ++slot) {
    int key = slot % kKeys;
    int writer = seen[0][slot];
    ASSERT_LT(writer, kProcesses) << "slot " << slot << " read nothing";
    int winners = 0;
    for (int process = 0; process < kProcesses; ++process) {
      EXPECT_EQ(seen[process][slot], writer)
          << "process " << process << " read another value for slot " << slot;
      winners += seen[process][2 * kKeys + slot];
    }
    EXPECT_EQ(winners, 1) << "exactly one put stored slot " << slot;
    EXPECT_EQ(seen[writer][2 * kKeys + slot], 1) << "the value read is the winner's";
    if (slot < kKeys) {
      auto record = store->findTuning("tuning " + std::to_string(key));
      ASSERT_TRUE(record);
      EXPECT_EQ(record->config, tuningValue(writer, key));
    } else {
      EXPECT_EQ(store->findKernel("kernel " + std::to_string(key)),
                kernelValue(writer, key));
    }
  }
}

TEST(Store, ThreadsShareOneStore) {
  TempDir dir;
  auto store = Store::open(dir.path(), silent());
  ASSERT_TRUE(store->enabled());
  std::atomic<int> wrong{0}, missingAfterPut{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 150; ++i) {
        std::string key = "key " + std::to_string((i * 7 + t) % 40);
        std::vector<uint8_t> bytes = bytesFor(key, 300 + key.size());
        store->putKernel(key, "spirv", bytes.data(), bytes.size());
        auto found = store->findKernel(key);
        if (!found)
          ++missingAfterPut;
        else if (*found != bytes)
          ++wrong;
        store->putTuning(key, tuningFor(key));
        auto record = store->findTuning(key);
        if (!record || !sameRecord(*record, tuningFor(key)))
          ++wrong;
        (void)store->counters();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(missingAfterPut.load(), 0);
  Store::Counters counters = store->counters();
  EXPECT_EQ(counters.hits, 8u * 150 * 2);
  EXPECT_EQ(counters.writes, 80u);
  EXPECT_EQ(counters.warnings, 0u);
}

TEST(Store, ClearDeletesEveryEntry) {
  TempDir dir;
  populate(dir.path());
  auto store = Store::open(dir.path(), silent());
  EXPECT_EQ(store->list().size(), 10u);
  EXPECT_TRUE(store->clear().isOk());
  EXPECT_TRUE(store->list().empty());
  EXPECT_FALSE(store->findKernel("conv key 0"));
  EXPECT_TRUE(store->verify().isOk());
  uint8_t byte = 3;
  EXPECT_TRUE(store->putKernel("conv key 0", "spirv", &byte, 1));
  EXPECT_EQ(store->list().size(), 1u);
}

//===----------------------------------------------------------------------===//
// PipelineCacheBlob
//===----------------------------------------------------------------------===//

PipelineCacheIdentity identity() {
  PipelineCacheIdentity id;
  id.vendorId = 0x10de;
  id.deviceId = 0x2335;
  id.driverVersion = 0x8c4a0000;
  for (int i = 0; i < 16; ++i)
    id.uuid[i] = uint8_t(0xa0 + i);
  return id;
}

/// What vkGetPipelineCacheData returns: a VkPipelineCacheHeaderVersionOne
/// for `id`, then driver bytes.
std::vector<uint8_t> driverData(const PipelineCacheIdentity &id, size_t size = 64) {
  std::vector<uint8_t> data = bytesFor("driver", size);
  auto put32 = [&](size_t at, uint32_t value) {
    for (int i = 0; i < 4; ++i)
      data[at + i] = uint8_t(value >> (8 * i));
  };
  put32(0, 32);
  put32(4, 1);
  put32(8, id.vendorId);
  put32(12, id.deviceId);
  std::memcpy(data.data() + 16, id.uuid, 16);
  return data;
}

std::string unwrapError(const PipelineCacheIdentity &id, const std::vector<uint8_t> &blob) {
  auto result = unwrapPipelineCache(id, blob.data(), blob.size());
  return result.isOk() ? "" : result.status().message();
}

TEST(PipelineCacheBlob, RoundTrips) {
  const PipelineCacheIdentity id = identity();
  for (size_t size : {size_t(32), size_t(64), size_t(100000)}) {
    std::vector<uint8_t> data = driverData(id, size);
    std::vector<uint8_t> blob = wrapPipelineCache(id, data.data(), data.size());
    EXPECT_EQ(blob.size(), kPipelineCacheHeaderBytes + size);
    EXPECT_EQ(std::string(blob.begin(), blob.begin() + 8), "KILNPIPE");
    auto unwrapped = unwrapPipelineCache(id, blob.data(), blob.size());
    ASSERT_TRUE(unwrapped.isOk()) << unwrapped.status().toString();
    EXPECT_EQ(*unwrapped, data);
  }
}

TEST(PipelineCacheBlob, EachIdentityFieldIsNamed) {
  const PipelineCacheIdentity id = identity();
  std::vector<uint8_t> data = driverData(id);
  std::vector<uint8_t> blob = wrapPipelineCache(id, data.data(), data.size());
  struct Case {
    const char *field;
    std::function<void(PipelineCacheIdentity &)> change;
  };
  const Case cases[] = {
      {"vendor id 0x10de, expected 0x1002", [](auto &d) { d.vendorId = 0x1002; }},
      {"device id 0x2335, expected 0x2336", [](auto &d) { d.deviceId = 0x2336; }},
      {"driver version 0x8c4a0000, expected 0x8c4a0001",
       [](auto &d) { d.driverVersion = 0x8c4a0001; }},
      {"pipelineCacheUUID a0a1", [](auto &d) { d.uuid[15] ^= 1; }},
  };
  for (const Case &c : cases) {
    PipelineCacheIdentity other = id;
    c.change(other);
    std::string error = unwrapError(other, blob);
    EXPECT_NE(error.find(c.field), std::string::npos) << error;
    EXPECT_EQ(error.find("vulkan header"), std::string::npos)
        << "kiln's own header is checked first: " << error;
  }
  EXPECT_EQ(unwrapError(id, blob), "");
}

TEST(PipelineCacheBlob, EveryTruncationIsAnError) {
  const PipelineCacheIdentity id = identity();
  std::vector<uint8_t> data = driverData(id);
  std::vector<uint8_t> blob = wrapPipelineCache(id, data.data(), data.size());
  for (size_t size = 0; size < blob.size(); ++size) {
    std::vector<uint8_t> cut(blob.begin(), blob.begin() + size);
    EXPECT_NE(unwrapError(id, cut), "") << "truncated at " << size;
  }
  // Bytes after the end are not silently ignored either.
  std::vector<uint8_t> longer = blob;
  longer.push_back(0);
  EXPECT_NE(unwrapError(id, longer).find("payload size"), std::string::npos);
}

TEST(PipelineCacheBlob, EveryBitFlipIsAnError) {
  const PipelineCacheIdentity id = identity();
  std::vector<uint8_t> data = driverData(id);
  std::vector<uint8_t> blob = wrapPipelineCache(id, data.data(), data.size());
  for (size_t byte = 0; byte < blob.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> flipped = blob;
      flipped[byte] ^= uint8_t(1u << bit);
      EXPECT_NE(unwrapError(id, flipped), "") << "bit " << bit << " of byte " << byte;
    }
}

TEST(PipelineCacheBlob, ADisagreeingVulkanHeaderIsAnError) {
  const PipelineCacheIdentity id = identity();
  struct Case {
    const char *what;
    size_t at;
    uint8_t value;
  };
  const Case cases[] = {
      {"vulkan header size 31", 0, 31},     {"vulkan header size 65", 0, 65},
      {"vulkan header version 2", 4, 2},    {"vulkan header vendor id", 8, 0x02},
      {"vulkan header device id", 12, 0x36}, {"vulkan header pipelineCacheUUID", 31, 0},
  };
  for (const Case &c : cases) {
    std::vector<uint8_t> data = driverData(id);
    data[c.at] = c.value;
    // Kiln's header around it is valid: only the payload's own header can say.
    std::vector<uint8_t> blob = wrapPipelineCache(id, data.data(), data.size());
    EXPECT_NE(unwrapError(id, blob).find(c.what), std::string::npos)
        << unwrapError(id, blob);
  }
  std::vector<uint8_t> tiny = driverData(id, 32);
  tiny.resize(20);
  std::vector<uint8_t> blob = wrapPipelineCache(id, tiny.data(), tiny.size());
  EXPECT_NE(unwrapError(id, blob).find("shorter than the 32-byte vulkan header"),
            std::string::npos);
}

TEST(PipelineCacheBlob, FingerprintNamesEveryField) {
  EXPECT_EQ(fingerprint(identity()),
            "000010de:00002335:8c4a0000:a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
}

TEST(PipelineCacheBlob, StoredAndReadBackThroughTheStore) {
  TempDir dir;
  const PipelineCacheIdentity id = identity();
  std::vector<uint8_t> data = driverData(id, 4096);
  std::vector<uint8_t> blob = wrapPipelineCache(id, data.data(), data.size());
  auto store = Store::open(dir.path(), silent());
  ASSERT_TRUE(store->putPipelineCache(fingerprint(id), blob.data(), blob.size()));
  auto found = store->findPipelineCache(fingerprint(id));
  ASSERT_TRUE(found);
  auto unwrapped = unwrapPipelineCache(id, found->data(), found->size());
  ASSERT_TRUE(unwrapped.isOk());
  EXPECT_EQ(*unwrapped, data);
}

} // namespace
