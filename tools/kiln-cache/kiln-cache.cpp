//===- kiln-cache.cpp - list, clear or verify a Kiln cache directory ------===//
//
//   kiln-cache list|clear|verify [--dir DIR]
//
// DIR defaults to Store::defaultDirectory() (KILN_CACHE_DIR, else
// $XDG_CACHE_HOME/kiln, else ~/.cache/kiln). A directory without kiln.db is
// an empty cache: the tool does not create one just to look at it.
// Exit status: 0 done, 1 the cache cannot be read or is damaged, 2 usage.
//
// Links kiln_runtime only (no MLIR, no LLVM).
//
//===----------------------------------------------------------------------===//

#include "tools/common/Version.h"
#include "kiln/runtime/Store.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace kiln::rt;

namespace {

const char kUsageLine[] = "usage: kiln-cache list|clear|verify [--dir DIR]\n";
const char kUsage[] =
    "usage: kiln-cache list|clear|verify [--dir DIR]\n"
    "  list    one line per entry (table, bytes, key), then the total\n"
    "  clear   delete every entry\n"
    "  verify  check the database and every entry's hash\n"
    "  --dir   the cache directory (default: KILN_CACHE_DIR, else\n"
    "          $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)\n";

int usage(const std::string &why) {
  std::fprintf(stderr, "kiln-cache: %s\n%s(kiln-cache --help says more)\n", why.c_str(),
               kUsageLine);
  return 2;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "kiln-cache: %s\n", message.c_str());
  return 1;
}

/// One line of at most ~80 characters: newlines as \n, other control
/// characters as \xNN, the rest cut with "...".
std::string printableKey(const std::string &key) {
  constexpr size_t kWidth = 80;
  std::string out;
  for (unsigned char c : key) {
    if (out.size() >= kWidth) {
      out += "...";
      break;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    } else {
      out += char(c);
    }
  }
  return out;
}

/// Prints what the store warned about; true when there was something.
bool printWarnings(const std::vector<std::string> &warnings) {
  for (const std::string &line : warnings)
    std::fprintf(stderr, "%s\n", line.c_str());
  return !warnings.empty();
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (kiln::tools::printedVersion(argv[i], "kiln-cache"))
      return 0;
  std::string command, dir;
  bool dirGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--dir" || arg.rfind("--dir=", 0) == 0) {
      if (arg == "--dir") {
        if (++i == argc)
          return usage("--dir needs a directory");
        dir = argv[i];
      } else {
        dir = arg.substr(6);
      }
      if (dir.empty())
        return usage("--dir needs a directory");
      dirGiven = true;
      continue;
    }
    if (arg.rfind("-", 0) == 0)
      return usage("unknown option " + arg);
    if (!command.empty())
      return usage("one command at a time, not '" + command + "' and '" + arg + "'");
    command = arg;
  }
  if (command.empty())
    return usage("no command");
  if (command != "list" && command != "clear" && command != "verify")
    return usage("unknown command '" + command + "'");
  if (!dirGiven)
    dir = Store::defaultDirectory();
  if (dir.empty())
    return fail("no cache directory: pass --dir or set KILN_CACHE_DIR");

  std::string path = (std::filesystem::path(dir) / "kiln.db").string();
  std::error_code error;
  if (!std::filesystem::exists(path, error) && !error) {
    if (command == "list")
      std::printf("total: 0 entries, 0 bytes (no cache at %s)\n", path.c_str());
    else if (command == "verify")
      std::printf("ok: 0 entries (no cache at %s)\n", path.c_str());
    else
      std::printf("cleared 0 entries (no cache at %s)\n", path.c_str());
    return 0;
  }

  std::vector<std::string> warnings;
  Store::Options options;
  options.onWarning = [&warnings](const std::string &line) {
    warnings.push_back(line);
  };
  std::shared_ptr<Store> store = Store::open(dir, options);
  if (!store->enabled())
    return fail("cache " + store->path() + ": " + store->whyDisabled());

  if (command == "list") {
    std::vector<Store::Entry> entries = store->list();
    uint64_t total = 0;
    for (const Store::Entry &entry : entries) {
      std::printf("%-16s %12" PRIu64 "  %s\n", entry.table.c_str(), entry.bytes,
                  printableKey(entry.key).c_str());
      total += entry.bytes;
    }
    std::printf("total: %zu %s, %" PRIu64 " bytes\n", entries.size(),
                entries.size() == 1 ? "entry" : "entries", total);
    return printWarnings(warnings) ? 1 : 0;
  }

  if (command == "verify") {
    Status verified = store->verify();
    if (!verified.isOk())
      return fail(verified.message());
    size_t entries = store->list().size();
    if (printWarnings(warnings))
      return 1;
    std::printf("ok: %zu %s\n", entries, entries == 1 ? "entry" : "entries");
    return 0;
  }

  // clear
  size_t entries = store->list().size();
  Status cleared = store->clear();
  if (!cleared.isOk())
    return fail(cleared.message());
  printWarnings(warnings);
  std::printf("cleared %zu %s from %s\n", entries,
              entries == 1 ? "entry" : "entries", path.c_str());
  return 0;
}
