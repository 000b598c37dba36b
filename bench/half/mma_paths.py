"""What a whole f16 GEMM reaches on each of Hopper's two tensor-core paths
(the 4096^3 f16 matmul against cuBLAS): Triton matmuls with its default lowering
(wgmma, Hopper's warpgroup instruction: the path cuBLAS takes) and with
DISABLE_MMA_V3=1 (mma.sync, the warp-level instruction of Ampere), each
with asynchronous copies into shared memory and its own software pipeline,
next to cuBLAS in the same process. Vulkan's cooperative matrices are
subgroup (warp) operations; bench/half/hmma_peak.cu and the replayed
ceiling kernels say which instruction they become.

  DISABLE_MMA_V3=0|1 python3 bench/half/mma_paths.py

Prints one line per config: ms per call, TFLOP/s, the fraction of cuBLAS,
which instruction the PTX holds, and the largest difference from cuBLAS's
product (the kernels are checked, not only timed).
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torch_timing import measure_cuda  # noqa: E402


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GROUP: tl.constexpr):
    # Tiles in groups of GROUP rows of tiles, so neighbouring programs share
    # A's rows and B's columns in L2.
    pid = tl.program_id(0)
    tiles_m = M // BM
    tiles_n = N // BN
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    rows = min(tiles_m - first_m, GROUP)
    pm = first_m + (pid % per_group) % rows
    pn = (pid % per_group) // rows
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a + rm[:, None] * K + rk[None, :]
    pb = b + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc += tl.dot(tl.load(pa), tl.load(pb))
        pa += BK
        pb += BK * N
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


CONFIGS = [  # BM, BN, BK, warps, stages
    (128, 128, 32, 4, 4), (128, 128, 64, 4, 3), (128, 128, 64, 4, 4),
    (128, 128, 64, 8, 4), (128, 256, 32, 8, 3), (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4),
    (256, 128, 32, 8, 4),
]


def main():
    path = "mma.sync" if os.environ.get("DISABLE_MMA_V3", "0") in ("1", "true", "on") else "default"
    n = 4096
    flop = 2 * n ** 3
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ref = a @ b
    t_cublas = measure_cuda(lambda: a @ b)
    print(f"[{path}] cuBLAS f16 4096^3: {t_cublas * 1e3:.4f} ms, {flop / t_cublas / 1e12:.1f} TFLOP/s")
    c = torch.empty_like(ref)
    for bm, bn, bk, warps, stages in CONFIGS:
        grid = ((n // bm) * (n // bn),)
        try:
            compiled = matmul_kernel[grid](a, b, c, n, n, n, BM=bm, BN=bn, BK=bk, GROUP=8,
                                           num_warps=warps, num_stages=stages)
        except Exception as e:  # a config that does not fit shared memory
            print(f"[{path}] {bm}x{bn}x{bk} w{warps} s{stages}: failed ({type(e).__name__})")
            continue
        ptx = compiled.asm.get("ptx", "")
        instr = "wgmma" if "wgmma" in ptx else ("mma.sync" if "mma.sync" in ptx else "?")
        diff = (c.float() - ref.float()).abs().max().item()
        t = measure_cuda(lambda: matmul_kernel[grid](a, b, c, n, n, n, BM=bm, BN=bn, BK=bk, GROUP=8,
                                                      num_warps=warps, num_stages=stages))
        print(f"[{path}] {bm}x{bn}x{bk} w{warps} s{stages}: {t * 1e3:.4f} ms, "
              f"{flop / t / 1e12:.1f} TFLOP/s, {t_cublas / t:.2f}x cuBLAS, {instr}, "
              f"regs {compiled.n_regs}, max diff {diff:.3g}")
    t_cublas = measure_cuda(lambda: a @ b)
    print(f"[{path}] cuBLAS again: {t_cublas * 1e3:.4f} ms")


if __name__ == "__main__":
    main()
