//===- WgmmaGemm.h - f16 GEMM on Hopper's warpgroup MMA, as PTX -*- C++ -*-===//
//
// Vulkan's cooperative matrices become mma.sync on NVIDIA's driver and its
// compute shaders get at most 48 KB of shared memory, which holds an f16
// GEMM at 0.44x cuBLAS on the H200 (bench/RESULTS.md). A GPU that CUDA's
// driver also runs (sm_90) gets this form beside the SPIR-V: PTX on
// wgmma.mma_async, A and B staged through up to 227 KB of shared memory
// by cp.async in the swizzled layouts wgmma's descriptors name. The
// runtime launches it through CUDA on the Vulkan device's own memory
// (runtime/lib/CudaInterop.h); elsewhere the SPIR-V runs.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_WGMMAGEMM_H
#define KILN_CODEGEN_WGMMAGEMM_H

#include <cstdint>
#include <optional>
#include <string>

namespace mlir {
class Operation;
} // namespace mlir

namespace kiln {

/// One CTA computes a bm x bn tile of C with `warpgroups` warpgroups (128
/// threads each, bm / warpgroups rows apiece), k in slices of bk through
/// `stages` shared-memory stages; tiles are walked `group` tile rows at a
/// time so CTAs resident together share A and B in L2.
struct WgmmaGemmConfig {
  int bm = 128, bn = 256, bk = 32, stages = 6, warpgroups = 2, group = 8;

  int threads() const { return 128 * warpgroups; }
  /// Shared memory per CTA: every stage's slice of A and of B.
  int sharedBytes() const { return (bm * bk + bk * bn) * 2 * stages; }
  /// "128x256x32 s6 wg2".
  std::string str() const;
};

/// C[M, N] = A[M, K] x B[K, N], both row-major f16, f32 accumulation.
struct WgmmaGemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool f32Result = false; ///< C in f32, else f16
};

/// The shape when `kernel` (a kiln.kernel) is exactly one kiln.matmul of
/// its two 2-D f16 arguments, yielded as its only result (f16 or f32).
std::optional<WgmmaGemmShape> matchWgmmaGemm(mlir::Operation *kernel);

/// The configuration for `shape` on a GPU with `sharedLimit` bytes of
/// shared memory per CTA (opted in), or none when no tile divides it.
std::optional<WgmmaGemmConfig> chooseWgmmaGemm(const WgmmaGemmShape &shape,
                                               int64_t sharedLimit);

/// The kernel as PTX for sm_90a: entry `name`, parameters (u64 A, u64 B,
/// u64 C, u32 M, u32 N, u32 K), launched on a one-dimensional grid of
/// (M / bm) * (N / bn) CTAs of config.threads() threads with
/// config.sharedBytes() of dynamic shared memory.
std::string emitWgmmaGemmPtx(const WgmmaGemmConfig &config, const WgmmaGemmShape &shape,
                             const std::string &name);

} // namespace kiln

#endif // KILN_CODEGEN_WGMMAGEMM_H
