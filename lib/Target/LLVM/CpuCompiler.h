//===- CpuCompiler.h - kiln.kernel to native code ---------------*- C++ -*-===//

#ifndef KILN_LIB_TARGET_LLVM_CPUCOMPILER_H
#define KILN_LIB_TARGET_LLVM_CPUCOMPILER_H

#include "lib/Compiler/Session.h"

#include "lib/Target/SPIRV/KernelCompiler.h"

#include "dialects/Kiln/KilnDialect.h"

namespace kiln {

/// Lowers a CPU kernel module (KernelLayout::Coalesced) to the LLVM
/// dialect in place: the one lowering of the JIT and of ahead-of-time
/// objects. Throws CompileError.
void lowerCpuKernel(KernelModule &km);

/// The JIT-compiled host function of `kernel`, from the session cache or
/// freshly lowered (polynomial math, LLVM O3 for the host CPU, vectorized).
/// Throws CompileError.
/// Configured first (Tuning.h: a tuned config where the store has one);
/// read from the cache's store instead of compiled where it is there.
const CompiledCpuKernel &compileCpuKernel(Session &session, KernelOp kernel);

} // namespace kiln

#endif // KILN_LIB_TARGET_LLVM_CPUCOMPILER_H
