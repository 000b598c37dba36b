//===- CpuCompiler.cpp - kiln.kernel to native code -----------------------===//
//
// Kernels go linalg -> loops -> LLVM dialect (populateLinalgToLLVMPipeline)
// and are compiled in process by MLIR's ExecutionEngine with the host's
// TargetMachine, so LLVM's O3 pipeline vectorizes for this CPU. Engines live
// in the session cache for the rest of the process (destroying one during
// static destruction crashed: TOOLCHAIN.md).
//
//===----------------------------------------------------------------------===//

#include "CpuCompiler.h"
#include "KernelCompiler.h"

#include "kiln/Codegen/Pipelines.h"
#include "kiln/Errors.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/TargetSelect.h"

#include <cstdlib>

using namespace mlir;
using namespace kiln;

namespace {
llvm::TargetMachine *hostTargetMachine() {
  static llvm::TargetMachine *machine = [] () -> llvm::TargetMachine * {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!builder)
      return nullptr;
    builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    auto machine = builder->createTargetMachine();
    return machine ? machine->release() : nullptr;
  }();
  return machine;
}
} // namespace

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

const CompiledCpuKernel &kiln::compileCpuKernel(Session &session, KernelOp kernel) {
  KernelModule km = buildKernelModule(kernel, KernelLayout::Coalesced);
  std::string key = "cpu\n" + km.text;
  if (CompiledCpuKernel *hit = session.cpuKernels.find(key)) {
    ++session.stats.kernel_cache_hits;
    return *hit;
  }
  CompiledCpuKernel compiled;
  compiled.outerIterations = km.outerIterations;
  compiled.innerIterations = km.outerIterations ? km.iterations / km.outerIterations : 1;
  llvm::TargetMachine *machine = hostTargetMachine();
  if (!machine)
    throw CompileError("cannot create a target machine for this CPU");

  unsigned numBindings = km.fn.getNumArguments();
  lowerCpuKernel(km);
  std::string diagnostics;
  ScopedDiagnosticHandler handler(kernel.getContext(), [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });

  compiled.numBindings = numBindings;
  auto optimize = makeOptimizingTransformer(3, 0, machine);
  bool capture = session.captureCpuIR || std::getenv("KILN_DUMP_CPU_IR");
  std::string *ir = &compiled.optimizedIR;
  std::function<llvm::Error(llvm::Module *)> transformer =
      [&](llvm::Module *module) -> llvm::Error {
    if (llvm::Error error = optimize(module))
      return error;
    compiled.instructions = module->getInstructionCount();
    if (capture) {
      llvm::raw_string_ostream os(*ir);
      module->print(os, nullptr);
    }
    return llvm::Error::success();
  };
  ExecutionEngineOptions options;
  options.transformer = transformer;
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = ExecutionEngine::create(*km.module, options);
  if (!engine)
    throw CompileError("JIT compilation failed: " + llvm::toString(engine.takeError()) +
                       "\n" + diagnostics);
  auto fn = (*engine)->lookupPacked("kiln_kernel");
  if (!fn)
    throw CompileError("JIT: no kernel entry: " + llvm::toString(fn.takeError()));
  compiled.fn = reinterpret_cast<rt::CpuKernelFn>(*fn);
  if (capture && std::getenv("KILN_DUMP_CPU_IR"))
    llvm::errs() << "kiln: optimized LLVM IR of a CPU kernel:\n" << compiled.optimizedIR;
  compiled.engine = std::move(*engine);
  ++session.stats.kernels_compiled;
  // An estimate (no JIT reports its memory): the engine's own state
  // (measured: a few hundred KiB each) plus its code, and the key.
  uint64_t bytes = (256 << 10) + 32 * compiled.instructions + 2 * key.size();
  CompiledCpuKernel &kept = session.cpuKernels.insert(key, std::move(compiled), bytes);
  trimKernelCaches(session);
  return kept;
}
