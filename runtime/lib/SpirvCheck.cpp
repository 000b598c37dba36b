//===- SpirvCheck.cpp - Structural checks of SPIR-V words -----------------===//
//
// See SpirvCheck.h. Stateless; safe from any thread.
//
//===----------------------------------------------------------------------===//

#include "SpirvCheck.h"

#include "kiln/runtime/Vulkan.h"

#include <cstdio>

namespace kiln::rt {

static constexpr uint32_t kMagic = 0x07230203;
static constexpr uint32_t kHeaderWords = 5;
static constexpr uint32_t kOpMemoryModel = 14;
static constexpr uint32_t kOpEntryPoint = 15;
static constexpr uint32_t kExecutionModelGLCompute = 5;

bool readSpirvString(const std::vector<uint32_t> &words, size_t begin, size_t end,
                     std::string &out) {
  out.clear();
  for (size_t i = begin; i < end; ++i) {
    for (int byte = 0; byte < 4; ++byte) {
      char c = char((words[i] >> (8 * byte)) & 0xff);
      if (c == '\0')
        return true;
      out += c;
    }
  }
  return false;
}

/// Whether `words` declare `capability`.
static bool declaresCapability(const std::vector<uint32_t> &words, uint32_t capability) {
  // Capabilities open a module (its logical layout): stop at the first
  // other instruction.
  constexpr uint32_t kOpCapability = 17;
  for (size_t i = kHeaderWords; i + 1 < words.size();) {
    uint32_t count = words[i] >> 16, opcode = words[i] & 0xffff;
    if (count == 0 || opcode != kOpCapability)
      return false;
    if (words[i + 1] == capability)
      return true;
    i += count;
  }
  return false;
}

bool spirvUsesCooperativeMatrix(const std::vector<uint32_t> &words) {
  return declaresCapability(words, /*CooperativeMatrixKHR=*/6022);
}

bool spirvUsesBF16CooperativeMatrix(const std::vector<uint32_t> &words) {
  return declaresCapability(words, /*BFloat16CooperativeMatrixKHR=*/5118);
}

Status checkSpirv(const std::vector<uint32_t> &words,
                  const std::string &entryPoint) {
  auto invalid = [](std::string why) {
    return Status::invalidArgument("invalid SPIR-V module: " + why);
  };
  if (words.size() < kHeaderWords)
    return invalid(std::to_string(words.size()) +
                   " words is shorter than the header");
  if (words[0] != kMagic) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%08x", words[0]);
    return invalid(std::string("bad magic number ") + hex +
                   " (expected 0x07230203)");
  }
  uint32_t major = (words[1] >> 16) & 0xff;
  uint32_t minor = (words[1] >> 8) & 0xff;
  if (major != 1 || minor > 6)
    return invalid("unsupported version " + std::to_string(major) + "." +
                   std::to_string(minor));

  bool memoryModel = false;
  bool found = false;
  std::string computeEntries;
  std::string name;
  for (size_t i = kHeaderWords; i < words.size();) {
    uint32_t count = words[i] >> 16;
    uint32_t opcode = words[i] & 0xffff;
    if (count == 0)
      return invalid("instruction at word " + std::to_string(i) +
                     " has zero length");
    if (i + count > words.size())
      return invalid("instruction at word " + std::to_string(i) +
                     " runs past the end");
    if (opcode == kOpMemoryModel)
      memoryModel = true;
    if (opcode == kOpEntryPoint) {
      if (count < 4 || !readSpirvString(words, i + 3, i + count, name))
        return invalid("malformed OpEntryPoint at word " + std::to_string(i));
      if (words[i + 1] == kExecutionModelGLCompute) {
        found = found || name == entryPoint;
        computeEntries += (computeEntries.empty() ? "'" : ", '") + name + "'";
      }
    }
    i += count;
  }
  if (!memoryModel)
    return invalid("no OpMemoryModel");
  if (!found)
    return Status::notFound(
        "SPIR-V module has no compute entry point '" + entryPoint + "'" +
        (computeEntries.empty() ? std::string(" (it has none)")
                                : " (it has " + computeEntries + ")"));
  return Status::ok();
}

} // namespace kiln::rt
