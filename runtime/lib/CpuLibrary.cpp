//===- CpuLibrary.cpp - check and dlopen CPU kernels from a .kiln ---------===//

#include "kiln/runtime/CpuLibrary.h"

#include <dlfcn.h>
#include <elf.h>
#include <fstream>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

using namespace kiln::rt;

namespace {
struct Feature {
  const char *name;
  bool (*present)();
};

// __builtin_cpu_supports takes literals only, hence one lambda per feature.
// It also checks that the OS saves the AVX and AVX-512 registers.
#if defined(__x86_64__)
#define KILN_FEATURE(llvm, gcc) {llvm, [] { return __builtin_cpu_supports(gcc) != 0; }}
const Feature kFeatures[] = {
    KILN_FEATURE("sse3", "sse3"),
    KILN_FEATURE("ssse3", "ssse3"),
    KILN_FEATURE("sse4.1", "sse4.1"),
    KILN_FEATURE("sse4.2", "sse4.2"),
    KILN_FEATURE("popcnt", "popcnt"),
    KILN_FEATURE("avx", "avx"),
    KILN_FEATURE("avx2", "avx2"),
    KILN_FEATURE("fma", "fma"),
    KILN_FEATURE("f16c", "f16c"),
    KILN_FEATURE("bmi", "bmi"),
    KILN_FEATURE("bmi2", "bmi2"),
    KILN_FEATURE("lzcnt", "lzcnt"),
    KILN_FEATURE("movbe", "movbe"),
    KILN_FEATURE("avxvnni", "avxvnni"),
    KILN_FEATURE("avx512f", "avx512f"),
    KILN_FEATURE("avx512bw", "avx512bw"),
    KILN_FEATURE("avx512cd", "avx512cd"),
    KILN_FEATURE("avx512dq", "avx512dq"),
    KILN_FEATURE("avx512vl", "avx512vl"),
    KILN_FEATURE("avx512vnni", "avx512vnni"),
    KILN_FEATURE("avx512bf16", "avx512bf16"),
    KILN_FEATURE("avx512fp16", "avx512fp16"),
    KILN_FEATURE("avx512vbmi", "avx512vbmi"),
    KILN_FEATURE("avx512vbmi2", "avx512vbmi2"),
    KILN_FEATURE("avx512ifma", "avx512ifma"),
    KILN_FEATURE("avx512bitalg", "avx512bitalg"),
    KILN_FEATURE("avx512vpopcntdq", "avx512vpopcntdq"),
};
#undef KILN_FEATURE
constexpr uint16_t kMachine = EM_X86_64;
#else
const Feature kFeatures[] = {{"", [] { return false; }}};
#if defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
#else
constexpr uint16_t kMachine = EM_NONE;
#endif
#endif

std::string joined(const std::vector<std::string> &list) {
  std::string text;
  for (const std::string &s : list)
    text += (text.empty() ? "" : ", ") + s;
  return text;
}
} // namespace

const std::vector<std::string> &kiln::rt::checkableCpuFeatures() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Feature &f : kFeatures)
      if (*f.name)
        out.push_back(f.name);
    return out;
  }();
  return names;
}

std::vector<std::string> kiln::rt::missingCpuFeatures(const std::vector<std::string> &features) {
  std::vector<std::string> missing;
  for (const std::string &name : features) {
    auto it = std::find_if(std::begin(kFeatures), std::end(kFeatures),
                           [&](const Feature &f) { return name == f.name; });
    if (it == std::end(kFeatures) || !it->present())
      missing.push_back(name);
  }
  return missing;
}

std::string kiln::rt::hostCpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size())
        return line.substr(colon + 2);
    }
  return "this CPU";
}

uint64_t kiln::rt::libraryHash(const uint8_t *data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i)
    hash = (hash ^ data[i]) * 0x100000001b3ull;
  return hash;
}

/// "model.kiln: CPU code: <problem>".
static Status cpuCodeError(const std::string &what, const std::string &problem) {
  return Status::invalidArgument(what + ": CPU code: " + problem);
}

/// The ELF header at the start of the bytes, if there are that many.
static bool readHeader(const CpuLibrary::Description &d, Elf64_Ehdr &header) {
  if (d.bytes.size() < sizeof(header))
    return false;
  std::memcpy(&header, d.bytes.data(), sizeof(header));
  return true;
}

Status CpuLibrary::checkBytes(const Description &d, const std::string &what) {
  // The dynamic loader trusts what it reads: only a well-formed, uncorrupted
  // object for this machine reaches it.
  Elf64_Ehdr header;
  if (!readHeader(d, header))
    return cpuCodeError(what, "shorter than an ELF header (the file is corrupt: compile the "
                              "model again)");
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_type != ET_DYN)
    return cpuCodeError(what, "not an ELF64 shared object (the file is corrupt: compile the "
                              "model again)");
  if (libraryHash(d.bytes.data(), d.bytes.size()) != d.hash)
    return cpuCodeError(what, "its bytes do not match their hash (the file is corrupt: "
                              "compile the model again)");
  return Status::ok();
}

Status CpuLibrary::checkCpu(const Description &d, const std::string &what) {
  Elf64_Ehdr header;
  if (!readHeader(d, header))
    return cpuCodeError(what, "shorter than an ELF header");
  if (header.e_machine != kMachine)
    return cpuCodeError(what, "compiled for ELF machine " + std::to_string(header.e_machine) +
                                  ", this machine is " + std::to_string(kMachine) +
                                  ": compile the model on (or for) this kind of CPU, or run "
                                  "its vulkan target");
  std::vector<std::string> missing = missingCpuFeatures(d.features);
  if (!missing.empty())
    return cpuCodeError(what, "compiled for " + d.isa + ", which needs " + joined(missing) + "; " +
                hostCpuName() + " lacks " + (missing.size() > 1 ? "them" : "it") +
                ". Compile with --cpu-isa x86-64-v3, or --target cpu:x86-64-v3 (cpu:host on "
                "this machine)");
  return Status::ok();
}

std::shared_ptr<CpuLibrary> CpuLibrary::unloaded(Description description) {
  return std::shared_ptr<CpuLibrary>(new CpuLibrary(std::move(description), nullptr, -1));
}

StatusOr<std::shared_ptr<CpuLibrary>> CpuLibrary::load(Description d, const std::string &what) {
  if (Status s = checkBytes(d, what); !s.isOk())
    return s;
  if (Status s = checkCpu(d, what); !s.isOk())
    return s;
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  // The checks above are what the artifact fuzzer tests; past them the bytes
  // are native code, trusted as a shared library is (scripts/fuzz.sh).
  return unloaded(std::move(d));
#endif
  int fd = memfd_create("kiln-cpu-kernels", MFD_CLOEXEC);
  if (fd < 0)
    return Status::internal(what + ": CPU code: memfd_create failed: " + std::strerror(errno));
  size_t written = 0;
  while (written < d.bytes.size()) {
    ssize_t n = ::write(fd, d.bytes.data() + written, d.bytes.size() - written);
    if (n <= 0) {
      ::close(fd);
      return Status::internal(what + ": CPU code: writing it to memory failed");
    }
    written += static_cast<size_t>(n);
  }
  // The dynamic loader knows a loaded object by its path: were this fd
  // closed, a later library's memfd could get the same number, and dlopen
  // of the same "/proc/self/fd/N" would hand back this library instead
  // (another model's kernels under the same symbol names). The fd stays
  // open as long as the library is loaded.
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    ::close(fd);
    const char *error = dlerror();
    return Status::invalidArgument(what + ": CPU code: the dynamic loader refused it: " +
                                   (error ? error : "?"));
  }
  return std::shared_ptr<CpuLibrary>(new CpuLibrary(std::move(d), handle, fd));
}

CpuLibrary::~CpuLibrary() {
  if (handle_)
    dlclose(handle_);
  if (fd_ >= 0)
    ::close(fd_);
}

std::optional<int64_t> CpuLibrary::lookupValue(const std::string &symbol) const {
  if (!handle_)
    return std::nullopt;
  const void *at = dlsym(handle_, symbol.c_str());
  if (!at)
    return std::nullopt;
  int64_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

CpuKernelFn CpuLibrary::lookup(const std::string &symbol) const {
  if (!handle_)
    return nullptr;
  return reinterpret_cast<CpuKernelFn>(dlsym(handle_, symbol.c_str()));
}
