//===- KernelStore.cpp - compiled kernels kept in the cache's store -------===//

#include "lib/Compiler/KernelStore.h"

#include "lib/Compiler/Tuning.h"

#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/stat.h>

using namespace mlir;
using namespace kiln;

namespace {
struct BuildIdSearch {
  uintptr_t address;
  std::string id;
};

/// The NT_GNU_BUILD_ID of the loaded object holding `search->address`.
int findBuildId(dl_phdr_info *info, size_t, void *data) {
  auto *search = static_cast<BuildIdSearch *>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    holds |= ph.p_type == PT_LOAD && search->address >= start && search->address < start + ph.p_memsz;
  }
  if (!holds)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE)
      continue;
    const char *p = reinterpret_cast<const char *>(info->dlpi_addr + ph.p_vaddr);
    const char *end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto *note = reinterpret_cast<const ElfW(Nhdr) *>(p);
      const char *name = p + sizeof(ElfW(Nhdr));
      const char *desc = name + ((note->n_namesz + 3) & ~3u);
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && !std::memcmp(name, "GNU", 4)) {
        search->id = llvm::toHex(llvm::StringRef(desc, note->n_descsz), /*LowerCase=*/true);
        return 1;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}

void put32(std::vector<uint8_t> &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

class Reader {
public:
  explicit Reader(const std::vector<uint8_t> &bytes) : bytes(bytes) {}
  bool u32(uint32_t &v) {
    if (bytes.size() - at < 4)
      return false;
    v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t(bytes[at++]) << (8 * i);
    return true;
  }
  bool u32s(std::vector<uint32_t> &out, uint32_t limit) {
    uint32_t n;
    if (!u32(n) || n > limit || (bytes.size() - at) / 4 < n)
      return false;
    out.resize(n);
    for (uint32_t &v : out)
      u32(v);
    return true;
  }
  bool text(std::string &out) {
    uint32_t n;
    if (!u32(n) || bytes.size() - at < n)
      return false;
    out.assign(reinterpret_cast<const char *>(bytes.data() + at), n);
    at += n;
    return true;
  }
  bool done() const { return at == bytes.size(); }

private:
  const std::vector<uint8_t> &bytes;
  size_t at = 0;
};

constexpr uint32_t kMagic = 0x5650534b; // "KSPV"
constexpr uint32_t kVersion = 1;
} // namespace

const std::string &kiln::compilerBuild() {
  static const std::string build = [] {
    BuildIdSearch search{reinterpret_cast<uintptr_t>(&findBuildId), ""};
    dl_iterate_phdr(findBuildId, &search);
    if (search.id.empty()) {
      // No build id: the binary's size and time stand in for it.
      Dl_info info;
      struct stat st;
      if (dladdr(reinterpret_cast<void *>(&findBuildId), &info) && info.dli_fname &&
          stat(info.dli_fname, &st) == 0)
        search.id = std::string(info.dli_fname) + ":" + std::to_string(st.st_size) + ":" +
                    std::to_string(st.st_mtime);
      else
        search.id = "unknown";
    }
    return std::string(compilerVersion()) + " build " + search.id;
  }();
  return build;
}

std::string kiln::kernelText(KernelOp kernel) {
  std::string text;
  llvm::raw_string_ostream os(text);
  kernel->print(os, OpPrintingFlags().useLocalScope().printGenericOpForm());
  return text;
}

std::vector<uint8_t> kiln::encodeKernel(const CompiledKernel &kernel) {
  std::vector<uint8_t> out;
  put32(out, kMagic);
  put32(out, kVersion);
  for (uint32_t g : kernel.groups)
    put32(out, g);
  put32(out, static_cast<uint32_t>(kernel.entryPoint.size()));
  out.insert(out.end(), kernel.entryPoint.begin(), kernel.entryPoint.end());
  put32(out, static_cast<uint32_t>(kernel.bindingOrder.size()));
  for (uint32_t b : kernel.bindingOrder)
    put32(out, b);
  put32(out, static_cast<uint32_t>(kernel.spirv.size()));
  for (uint32_t w : kernel.spirv)
    put32(out, w);
  return out;
}

std::optional<CompiledKernel> kiln::decodeKernel(const std::vector<uint8_t> &bytes) {
  Reader in(bytes);
  uint32_t magic = 0, version = 0;
  CompiledKernel kernel;
  if (!in.u32(magic) || magic != kMagic || !in.u32(version) || version != kVersion ||
      !in.u32(kernel.groups[0]) || !in.u32(kernel.groups[1]) || !in.u32(kernel.groups[2]) ||
      !in.text(kernel.entryPoint) || !in.u32s(kernel.bindingOrder, 4096) ||
      !in.u32s(kernel.spirv, UINT32_MAX) || !in.done() || kernel.spirv.empty())
    return std::nullopt;
  kernel.numBindings = static_cast<uint32_t>(kernel.bindingOrder.size());
  return kernel;
}
