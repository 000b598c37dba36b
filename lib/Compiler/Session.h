//===- Session.h - process-wide compiler state ------------------*- C++ -*-===//
//
// One MLIRContext, the compiled-kernel cache and the counters behind
// kiln::stats(). Everything here is guarded by `mutex`: realizations run one
// at a time.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_SESSION_H
#define KILN_LIB_COMPILER_SESSION_H

#include "lib/Compiler/KernelCache.h"
#include "kiln/Compiler/Options.h"
#include "kiln/Stats.h"

#include "kiln/runtime/Cpu.h"
#include "kiln/runtime/Program.h"

#include "mlir/IR/MLIRContext.h"

#include <memory>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

struct CompiledKernel {
  uint64_t hash = 0;
  std::vector<uint32_t> spirv;
  std::string entryPoint;
  uint32_t numBindings = 0;
  /// Binding i is the kernel function's argument bindingOrder[i] (inputs,
  /// then outputs).
  std::vector<uint32_t> bindingOrder;
  uint32_t groups[3] = {1, 1, 1};
  /// The subgroup size it was compiled for (its code depends on it where it
  /// uses subgroup operations: SpirvCode::subgroupSize).
  uint32_t subgroupSize = 0;
  /// PTX beside the SPIR-V, for a GPU CUDA runs (WgmmaGemm.h); null else.
  std::shared_ptr<const rt::PtxCode> ptx;
};

struct CompiledCpuKernel {
  /// Keeps `fn` alive: its JIT engine (a kernel loaded from the store
  /// lives as long as the process).
  std::shared_ptr<const void> owner;
  rt::CpuKernelFn fn = nullptr;
  uint32_t numBindings = 0;
  /// The threads split the outermost loop; each of its iterations computes
  /// innerIterations elements.
  int64_t outerIterations = 0;
  int64_t innerIterations = 1;
  std::string optimizedIR; // kept when Session::captureCpuIR is set (tests)
  /// LLVM instructions after optimization: the cache's size estimate.
  uint64_t instructions = 0;
};

struct Session {
  Session();
  std::mutex mutex;
  /// The context for the next graph. An MLIRContext never frees the types
  /// and attributes it interns (every new shape adds some), so a process
  /// that sees ever new shapes starts a fresh one every kGraphsPerContext
  /// graphs. Nothing outlives a graph in it: kernels are cached as SPIR-V
  /// words and JIT engines with their own LLVM contexts.
  mlir::MLIRContext &contextForGraph();
  static constexpr uint64_t kGraphsPerContext = 256;
  /// What compiles are told besides their IR: the environment's, read by
  /// the driver when it takes `mutex` (lib/Driver/ProcessSession.h).
  CompilerOptions options;
  /// Bounded together by options.kernelCacheBytes.
  uint64_t cacheClock = 0;
  KernelCache<CompiledKernel> kernels{cacheClock};
  KernelCache<CompiledCpuKernel> cpuKernels{cacheClock};
  bool captureCpuIR = false;
  Stats stats;

private:
  std::unique_ptr<mlir::MLIRContext> context;
  uint64_t graphsOnContext = 0;
};

/// Evicts the least recently used kernels of either cache until both fit
/// options.kernelCacheBytes together; the most recent one always stays.
void trimKernelCaches(Session &session);

} // namespace kiln

#endif // KILN_LIB_COMPILER_SESSION_H
