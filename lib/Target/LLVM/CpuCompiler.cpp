//===- CpuCompiler.cpp - kiln.kernel to native code -----------------------===//
//
// Kernels go linalg -> loops -> LLVM dialect (populateLinalgToLLVMPipeline)
// and are compiled by the same CpuObjectEmitter as a .kiln's cpu target for
// the host, then linked into this process by one LLJIT: the JIT's code and
// the file's are the same bytes. (MLIR's ExecutionEngine made other code on
// some CPUs: layer norms differed in the last bit.) Linked code lives to the
// end of the process (destroying JIT state during static destruction
// crashed: TOOLCHAIN.md).
//
//===----------------------------------------------------------------------===//

#include "lib/Target/LLVM/CpuCompiler.h"
#include "lib/Target/LLVM/CpuObject.h"
#include "lib/Target/SPIRV/KernelCompiler.h"
#include "lib/Compiler/KernelStore.h"
#include "lib/Compiler/Tuning.h"

#include "kiln/Codegen/KernelConfig.h"
#include "kiln/Codegen/Pipelines.h"
#include "kiln/Errors.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/TargetSelect.h"

#include <cstdlib>
#include <unistd.h>
#include <cstring>
#include <mutex>

using namespace mlir;
using namespace kiln;

void kiln::lowerCpuKernel(KernelModule &km) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(km.module->getContext(), [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });
  PassManager pm(km.module->getContext(), ModuleOp::getOperationName());
  if (failed(populateLinalgToLLVMPipeline(pm)) || failed(pm.run(*km.module)))
    throw CompileError("lowering a kernel to LLVM failed: " + diagnostics);
}

namespace {
/// The object code of a CPU kernel in the store, with what running it needs.
struct StoredCpuKernel {
  uint32_t numBindings = 0;
  int64_t outerIterations = 0, innerIterations = 1;
  std::vector<uint8_t> object;
};

constexpr char kCpuMagic[8] = {'K', 'C', 'P', 'U', 'O', 'B', 'J', '1'};

std::vector<uint8_t> encodeCpuKernel(const StoredCpuKernel &kernel) {
  std::vector<uint8_t> out(kCpuMagic, kCpuMagic + 8);
  auto put = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i)
      out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(kernel.numBindings);
  put(static_cast<uint64_t>(kernel.outerIterations));
  put(static_cast<uint64_t>(kernel.innerIterations));
  out.insert(out.end(), kernel.object.begin(), kernel.object.end());
  return out;
}

std::optional<StoredCpuKernel> decodeCpuKernel(const std::vector<uint8_t> &bytes) {
  if (bytes.size() < 32 + 64 || std::memcmp(bytes.data(), kCpuMagic, 8))
    return std::nullopt;
  auto get = [&](size_t at) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(bytes[at + i]) << (8 * i);
    return v;
  };
  StoredCpuKernel kernel;
  kernel.numBindings = static_cast<uint32_t>(get(8));
  kernel.outerIterations = static_cast<int64_t>(get(16));
  kernel.innerIterations = static_cast<int64_t>(get(24));
  kernel.object.assign(bytes.begin() + 32, bytes.end());
  // An ELF relocatable object of this machine, or nothing.
  const uint8_t *elf = kernel.object.data();
  if (std::memcmp(elf, "\x7f" "ELF", 4) || elf[4] != 2 || kernel.numBindings > 4096 ||
      kernel.outerIterations < 0 || kernel.innerIterations < 1)
    return std::nullopt;
  return kernel;
}

/// Links stored objects into this process: one JITDylib per kernel (each
/// defines the same entry) in one LLJIT, kept to the end of the process
/// like the engines (TOOLCHAIN.md: destroying JIT state during static
/// destruction crashed).
class ObjectLoader {
public:
  static ObjectLoader *get() {
    static ObjectLoader *loader = [] {
      llvm::InitializeNativeTarget();
      llvm::InitializeNativeTargetAsmPrinter();
      auto jit = llvm::orc::LLJITBuilder().create();
      if (!jit) {
        llvm::consumeError(jit.takeError());
        return static_cast<ObjectLoader *>(nullptr);
      }
      return new ObjectLoader(std::move(*jit));
    }();
    return loader;
  }

  /// The kernel's packed entry, or null (with `error` set).
  rt::CpuKernelFn load(const std::vector<uint8_t> &object, std::string &error) {
    std::lock_guard<std::mutex> lock(mutex);
    std::string name = "kiln_stored_" + std::to_string(next++);
    auto dylib = jit->createJITDylib(name);
    if (!dylib) {
      error = llvm::toString(dylib.takeError());
      return nullptr;
    }
    auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        jit->getDataLayout().getGlobalPrefix());
    if (!process) {
      error = llvm::toString(process.takeError());
      return nullptr;
    }
    dylib->addGenerator(std::move(*process));
    if (builtins)
      dylib->addToLinkOrder(*builtins);
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(
        llvm::StringRef(reinterpret_cast<const char *>(object.data()), object.size()), name);
    if (llvm::Error e = jit->addObjectFile(*dylib, std::move(buffer))) {
      error = llvm::toString(std::move(e));
      return nullptr;
    }
    auto symbol = jit->lookup(*dylib, "_mlir_kiln_kernel");
    if (!symbol) {
      error = llvm::toString(symbol.takeError());
      return nullptr;
    }
    return symbol->toPtr<rt::CpuKernelFn>();
  }

private:
  explicit ObjectLoader(std::unique_ptr<llvm::orc::LLJIT> jit) : jit(std::move(jit)) {
#ifdef KILN_COMPILER_RT_BUILTINS
    // compiler-rt's builtins, for the calls LLVM makes where the CPU lacks
    // an instruction (f16 conversions without F16C): loaded once, each
    // member linked where a kernel needs it.
    if (access(KILN_COMPILER_RT_BUILTINS, R_OK) != 0)
      return;
    auto library = this->jit->createJITDylib("kiln_compiler_rt");
    if (!library) {
      llvm::consumeError(library.takeError());
      return;
    }
    auto generator = llvm::orc::StaticLibraryDefinitionGenerator::Load(
        this->jit->getObjLinkingLayer(), KILN_COMPILER_RT_BUILTINS);
    if (!generator) {
      llvm::consumeError(generator.takeError());
      return;
    }
    library->addGenerator(std::move(*generator));
    builtins = &*library;
#endif
  }
  std::unique_ptr<llvm::orc::LLJIT> jit;
  llvm::orc::JITDylib *builtins = nullptr;
  std::mutex mutex;
  uint64_t next = 0;
};

/// Puts `compiled` in the session's cache. An estimate (no JIT reports its
/// memory): the engine's own state (measured: a few hundred KiB each) plus
/// its code, and the key.
const CompiledCpuKernel &keepCpuKernel(Session &session, const std::string &key,
                                       CompiledCpuKernel compiled) {
  uint64_t bytes = (256 << 10) + 32 * compiled.instructions + 2 * key.size();
  CompiledCpuKernel &kept = session.cpuKernels.insert(key, std::move(compiled), bytes);
  trimKernelCaches(session);
  return kept;
}
} // namespace

const CompiledCpuKernel &kiln::compileCpuKernel(Session &session, KernelOp kernel) {
  // Configured and compiled for the level the CPU device runs
  // (KILN_CPU_ISA), not only this host's.
  const CompilerOptions &options = session.options;
  CpuTargetLanes lanes(cpuDeviceLanes(options));
  configureKernel(session, kernel, nullptr, cpuFingerprint(options));
  // The kernel as configured: the key in this session and, with this CPU
  // and compiler build, in the cache's store.
  std::string key = "cpu\n" + kernelText(kernel);
  if (CompiledCpuKernel *hit = session.cpuKernels.find(key)) {
    ++session.stats.kernel_cache_hits;
    return *hit;
  }
  bool capture = session.captureCpuIR || options.dumpCpuIR;
  rt::Store *store = capture ? nullptr : rt::Store::process();
  std::string storeKey = key + "\ndevice " + cpuFingerprint(options) + "\ncompiler " + compilerBuild();
  if (store)
    if (std::optional<std::vector<uint8_t>> bytes = store->findKernel(storeKey))
      if (std::optional<StoredCpuKernel> stored = decodeCpuKernel(*bytes))
        if (ObjectLoader *loader = ObjectLoader::get()) {
          std::string error;
          if (rt::CpuKernelFn fn = loader->load(stored->object, error)) {
            CompiledCpuKernel compiled;
            compiled.fn = fn;
            compiled.numBindings = stored->numBindings;
            compiled.outerIterations = stored->outerIterations;
            compiled.innerIterations = stored->innerIterations;
            compiled.instructions = stored->object.size() / 4;
            ++session.stats.kernels_loaded;
            return keepCpuKernel(session, key, std::move(compiled));
          }
          llvm::errs() << "kiln: warning: a stored CPU kernel did not load (" << error
                       << "); compiling it again\n";
        }

  // One emitter per thread: a TargetMachine is not shared between
  // concurrent code generators.
  thread_local std::unique_ptr<CpuObjectEmitter> emitter;
  thread_local std::string emitterIsa;
  if (!emitter || emitterIsa != cpuDeviceIsa(options)) {
    emitterIsa = cpuDeviceIsa(options);
    emitter = std::make_unique<CpuObjectEmitter>(emitterIsa);
  }
  CompiledCpuKernel compiled;
  CpuObjectEmitter::Object object =
      emitter->emitConfigured(kernel, "_mlir_kiln_kernel", capture ? &compiled.optimizedIR : nullptr);
  compiled.numBindings = object.numBindings;
  compiled.outerIterations = object.outerIterations;
  compiled.innerIterations = object.innerIterations;
  compiled.instructions = object.instructions;
  if (options.dumpCpuIR)
    llvm::errs() << "kiln: optimized LLVM IR of a CPU kernel:\n" << compiled.optimizedIR;
  ObjectLoader *loader = ObjectLoader::get();
  if (!loader)
    throw CompileError("cannot start LLVM's JIT linker for CPU kernels");
  std::string error;
  compiled.fn = loader->load(object.bytes, error);
  if (!compiled.fn)
    throw CompileError("linking a compiled CPU kernel into this process failed: " + error);
  if (store) {
    StoredCpuKernel stored{compiled.numBindings, compiled.outerIterations,
                           compiled.innerIterations, std::move(object.bytes)};
    std::vector<uint8_t> bytes = encodeCpuKernel(stored);
    store->putKernel(storeKey, "cpu-object", bytes.data(), bytes.size());
  }
  ++session.stats.kernels_compiled;
  return keepCpuKernel(session, key, std::move(compiled));
}
