//===- KernelStore.h - compiled kernels kept in the cache's store -*- C++ -*-===//
//
// A kernel compiled once is stored under a key of its kernel op as
// configured (ops, shapes, dtypes, config), the target's limits and
// fingerprint, and this build of Kiln's compiler (its ELF build id: any
// rebuild compiles afresh rather than trust code an older compiler made).
// The next process reads the code back instead of lowering the kernel.
// A stored entry that does not decode is a miss.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_KERNELSTORE_H
#define KILN_LIB_COMPILER_KERNELSTORE_H

#include "lib/Compiler/Session.h"

#include "dialects/Kiln/KilnDialect.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// This build of the compiler: its release and the ELF build id of the
/// binary holding it (else that binary's size and modification time).
const std::string &compilerBuild();

/// The kernel op as printed (generic form, local scope): what codegen reads.
std::string kernelText(KernelOp kernel);

std::vector<uint8_t> encodeKernel(const CompiledKernel &kernel);
/// None when `bytes` is not a whole encoded kernel.
std::optional<CompiledKernel> decodeKernel(const std::vector<uint8_t> &bytes);

} // namespace kiln

#endif // KILN_LIB_COMPILER_KERNELSTORE_H
