//===- KernelConfigAttr.h - a kernel's configuration in the IR -*- C++ -*-===//
//
// Every kiln.kernel carries its configuration as a `config` dictionary:
//
//   kiln.kernel on "vulkan:0" config {form = "gemm", tile = array<i64: 64, 128, 16>,
//                                     thread = array<i64: 8, 8>} (...)
//
// kiln-materialize-configs (or materializeKernelConfig) sets it from the
// tuning store or the device's default; codegen reads nothing else, so
// kiln-opt rebuilds any tuned kernel from its IR alone.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_KERNELCONFIGATTR_H
#define KILN_CODEGEN_KERNELCONFIGATTR_H

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Codegen/KernelConfig.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <functional>
#include <optional>
#include <vector>

namespace kiln {

/// The form `kernel` is built in on a GPU with `gpu` limits (null: the
/// CPU), with that form's default configuration.
KernelConfig defaultKernelConfig(KernelOp kernel, const DeviceLimits *gpu);

/// Every configuration of the kernel's form that fits the device, the
/// default first: what the tuner searches.
std::vector<KernelConfig> candidateKernelConfigs(KernelOp kernel, const DeviceLimits *gpu);

/// A matmul's right operand B as a weight the CPU GEMM form may read
/// packed (CpuMatmulConfig::packedB): kernel argument `arg` holds B[k, n]
/// at offset + k * strideK + n * strideN (a plain or transposed matrix).
struct PackedMatrix {
  unsigned arg = 0;
  int64_t k = 0, n = 0, offset = 0, strideK = 0, strideN = 0;
};
/// B of `kernel`'s matmul where it can be stored packed: one f32 weight
/// argument read by the matmul alone, the same for every batch, linear in
/// (k, n), of exactly K x N elements. None otherwise.
std::optional<PackedMatrix> packedMatrixOf(KernelOp kernel);

mlir::DictionaryAttr kernelConfigAttr(mlir::MLIRContext *ctx, const KernelConfig &config);

/// The kernel's `config`; none when it has none. A malformed one is an
/// error on the kernel (a diagnostic) and a failure.
mlir::FailureOr<std::optional<KernelConfig>> readKernelConfig(KernelOp kernel);

/// A tuned configuration for `kernel` on this device, if the store has one.
using TunedConfigLookup = std::function<std::optional<KernelConfig>(KernelOp)>;

/// Gives `kernel` a `config` unless it has one: the tuned one where
/// `lookup` finds it and it fits the kernel's form, else the default.
/// Returns the configuration the kernel now carries.
mlir::FailureOr<KernelConfig> materializeKernelConfig(KernelOp kernel, const DeviceLimits *gpu,
                                                      const TunedConfigLookup &lookup = {});

} // namespace kiln

#endif // KILN_CODEGEN_KERNELCONFIGATTR_H
