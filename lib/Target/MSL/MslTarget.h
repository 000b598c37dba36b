//===- MslTarget.h - the metal target: MSL from Kiln's SPIR-V ---*- C++ -*-===//
//
// The metal target compiles a graph as the vulkan target does, for the
// limits of Apple GPUs (metalProfile()), then turns every kernel's SPIR-V
// into Metal Shading Language with SPIRV-Cross (Debian's
// libspirv-cross-c-shared-dev). Buffers are bound at [[buffer(i)]] in the
// SPIR-V binding order. No Metal compiler or runtime exists on Linux: the
// MSL is checked as text (lit) and a Metal runtime builds only on Apple.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TARGET_MSL_MSLTARGET_H
#define KILN_LIB_TARGET_MSL_MSLTARGET_H

#include "kiln/runtime/Program.h"
#include "kiln/runtime/Vulkan.h"

#include <memory>

namespace kiln {

/// The limits Kiln's kernels are sized for on Apple GPUs: SIMD groups of 32,
/// 1024 threads and 32 KiB of threadgroup memory per threadgroup, 31 buffer
/// arguments.
const rt::AdapterInfo &metalProfile();

/// MSL 2.1 for one kernel. Throws CompileError with SPIRV-Cross's message.
rt::MslCode translateToMsl(const rt::SpirvCode &code);

/// The metal program of a vulkan program compiled with metalProfile(): the
/// same steps and plan on "metal:N" devices, every kernel as MSL.
std::shared_ptr<rt::Program> toMetalProgram(const rt::Program &vulkan);

} // namespace kiln

#endif // KILN_LIB_TARGET_MSL_MSLTARGET_H
