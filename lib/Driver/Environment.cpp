//===- Environment.cpp - the KILN_* variables, read in one place ----------===//

#include "lib/Driver/Environment.h"

#include "kiln/Compiler/Options.h"
#include "kiln/Errors.h"

#include "llvm/ADT/StringRef.h"

#include <cstdlib>

using namespace kiln;

namespace {
/// The variable's value; empty when unset.
std::string read(const char *name) {
  const char *value = std::getenv(name);
  return value ? value : "";
}

bool flag(const char *name) {
  std::string value = read(name);
  return !value.empty() && value != "0";
}
} // namespace

bool environment::trace() { return flag("KILN_TRACE"); }

std::optional<std::string> environment::device() {
  std::string value = read("KILN_DEVICE");
  if (value.empty())
    return std::nullopt;
  return value;
}

size_t environment::graphCacheCapacity() {
  static const size_t capacity = [] {
    std::string text = read("KILN_GRAPH_CACHE");
    if (text.empty())
      return size_t(64);
    unsigned long long n = 0;
    if (llvm::StringRef(text).trim().getAsInteger(10, n))
      throw Error("KILN_GRAPH_CACHE=" + text +
                  " is not a number of graphs (0 turns the cache off)");
    return static_cast<size_t>(n);
  }();
  return capacity;
}

std::optional<PlacementPolicy> environment::transferPolicy() {
  std::string text = read("KILN_TRANSFER_POLICY");
  if (text.empty())
    return std::nullopt;
  std::optional<PlacementPolicy> policy = parsePlacementPolicy(text);
  if (!policy)
    throw Error("KILN_TRANSFER_POLICY=" + text + " is not a policy: use error, log or allow");
  return policy;
}

bool environment::poisonOutputs() {
  static const bool poison = read("KILN_POISON_OUTPUTS") == "1";
  return poison;
}

bool environment::profileEveryRealize() {
  static const bool on = flag("KILN_PROFILE");
  return on;
}

std::string environment::profileTracePath() { return read("KILN_PROFILE_TRACE"); }

CompilerOptions CompilerOptions::fromEnvironment() {
  CompilerOptions options;
  options.gpuTargetEdits = read("KILN_GPU_LIMITS");
  std::string mode = read("KILN_AUTOTUNE");
  if (mode == "off")
    options.autotune = AutotuneMode::Off;
  else if (mode == "on")
    options.autotune = AutotuneMode::On;
  else if (!mode.empty() && mode != "cached")
    throw Error("KILN_AUTOTUNE=" + mode +
                " is not a mode: use off (defaults only), cached (tuned configs from the cache, "
                "the default) or on (also tune what the cache lacks, on first use)");
  options.autotuneReplay = read("KILN_AUTOTUNE_REPLAY");
  options.dumpSpirvDir = read("KILN_DUMP_SPIRV");
  options.dumpLabel = read("KILN_DUMP_LABEL");
  options.dumpCpuIR = !read("KILN_DUMP_CPU_IR").empty();
  if (std::string mb = read("KILN_KERNEL_CACHE_MB"); !mb.empty()) {
    uint64_t n = 0;
    if (llvm::StringRef(mb).trim().getAsInteger(10, n) || n == 0 || n > (uint64_t(1) << 30))
      throw Error("KILN_KERNEL_CACHE_MB=" + mb +
                  " is not a size: give a whole number of MiB (1 or more; default 512)");
    options.kernelCacheBytes = n << 20;
  }
  std::string isa = read("KILN_CPU_ISA");
  options.cpuIsa = isa.empty() ? "host" : isa;
  return options;
}
