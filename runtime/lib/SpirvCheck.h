//===- SpirvCheck.h - Structural checks of SPIR-V words ---------*- C++ -*-===//
//
// Private to runtime/lib. Drivers may crash on malformed SPIR-V, and the
// runtime cannot link SPIRV-Tools (it depends on Vulkan and the C++ library
// only), so before a module reaches the driver it is checked here for what
// a corrupt or mismatched binary gets wrong: header, instruction framing,
// and the compute entry point. Full validation is the artifact loader's job.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_SPIRVCHECK_H
#define KILN_RUNTIME_LIB_SPIRVCHECK_H

#include "kiln/runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

/// Ok if `words` is a framed SPIR-V module with an OpMemoryModel and a
/// GLCompute OpEntryPoint named `entryPoint`; else InvalidArgument (or
/// NotFound for a missing entry point) saying what is wrong.
Status checkSpirv(const std::vector<uint32_t> &words,
                  const std::string &entryPoint);

/// The nul-terminated literal string starting at words[begin], within
/// [begin, end); false if it is not terminated there.
bool readSpirvString(const std::vector<uint32_t> &words, size_t begin, size_t end,
                     std::string &out);

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_SPIRVCHECK_H
