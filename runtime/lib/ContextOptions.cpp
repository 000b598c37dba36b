//===- ContextOptions.cpp - Vulkan context options from the environment ---===//
//
// Parsing is strict: a typo in a variable is an error naming it, never a
// silently ignored setting. Reads the environment only (getenv); call it
// where nothing else modifies the environment concurrently.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Vulkan.h"

#include <cstdlib>
#include <string_view>

namespace kiln::rt {

static constexpr size_t kMaxVirtualDevices = 64;

/// A decimal count in [1, kMaxVirtualDevices]: digits only (no sign, space
/// or suffix), so "3x", " 3" and "+3" are rejected rather than half-read.
static StatusOr<size_t> parseVirtualDevices(std::string_view text) {
  Status bad = Status::invalidArgument(
      "KILN_VIRTUAL_DEVICES='" + std::string(text) +
      "' is not a valid device count: expected an integer from 1 to " +
      std::to_string(kMaxVirtualDevices) + " (or leave it unset for 1)");
  if (text.empty() || text.size() > 3)
    return bad;
  size_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return bad;
    value = value * 10 + size_t(c - '0');
  }
  if (value < 1 || value > kMaxVirtualDevices)
    return bad;
  return value;
}

static StatusOr<bool> parseFlag(const char *variable, std::string_view text) {
  if (text.empty() || text == "0")
    return false;
  if (text == "1")
    return true;
  return Status::invalidArgument(std::string(variable) + "='" +
                                 std::string(text) +
                                 "' is not valid: expected 1 (on) or 0 (off)");
}

StatusOr<ContextOptions> ContextOptions::fromEnvironment() {
  ContextOptions options;
  if (const char *text = std::getenv("KILN_VIRTUAL_DEVICES")) {
    StatusOr<size_t> count = parseVirtualDevices(text);
    if (!count.isOk())
      return count.status();
    options.virtualDevices = *count;
  }
  if (const char *text = std::getenv("KILN_VULKAN_VALIDATION")) {
    StatusOr<bool> enabled = parseFlag("KILN_VULKAN_VALIDATION", text);
    if (!enabled.isOk())
      return enabled.status();
    options.validation = *enabled;
  }
  return options;
}

} // namespace kiln::rt
