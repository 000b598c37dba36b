//===- KernelCompiler.h - kiln.kernel to validated SPIR-V -------*- C++ -*-===//

#ifndef KILN_LIB_API_KERNELCOMPILER_H
#define KILN_LIB_API_KERNELCOMPILER_H

#include "Session.h"

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/runtime/Vulkan.h"

namespace kiln {

/// The SPIR-V of `kernel` for `adapter`'s limits, from the session cache or
/// freshly lowered and validated. Throws CompileError.
const CompiledKernel &compileKernel(Session &session, KernelOp kernel,
                                    const rt::AdapterInfo &adapter);

/// Validates SPIR-V words for Vulkan 1.1; returns the validator's messages,
/// empty when valid.
std::string validateSPIRV(const std::vector<uint32_t> &words);

} // namespace kiln

#endif // KILN_LIB_API_KERNELCOMPILER_H
