"""The wgmma prototype's PTX launched through CUDA's driver API instead of
Vulkan, on the same GPU: CUDA lets a kernel opt in to more than 48 KB of
dynamic shared memory (cuFuncSetAttribute), which VK_NVX_binary_import
cannot. Checks each result against cuBLAS exactly (small integers) and
times it next to cuBLAS.   usage: cuda_launch.py DIR [N]"""
import ctypes
import sys

import torch

d = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
cu = ctypes.CDLL("libcuda.so.1")
torch.cuda.init()
a = torch.randint(-2, 3, (n, n), device="cuda").half()
b = torch.randint(-2, 3, (n, n), device="cuda").half()
ref = torch.matmul(a, b)
c = torch.empty_like(ref)


def ck(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUDA error {r}")


def timed(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / reps


blas = [timed(lambda: torch.matmul(a, b)) for _ in range(2)]
flops = 2 * n ** 3
print(f"cuBLAS {n}^3: {blas[0]:.4f} / {blas[1]:.4f} ms")
pads = [int(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else [0]
lines = [(line, pad) for line in open(f"{d}/variants.txt") for pad in pads]
for line, pad in lines:
    name, bm, bn, smem, wg, group = line.split()
    bm, bn, smem, wg, group = map(int, (bm, bn, smem, wg, group))
    # pad: launch with this much shared memory instead (fewer CTAs per SM)
    smem = max(smem, pad)
    ptx = open(f"{d}/{name}.ptx", "rb").read() + b"\0"
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    try:
        ck(cu.cuModuleLoadData(ctypes.byref(mod), ptx), "module")
        ck(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"gemm"), "function")
        ck(cu.cuFuncSetAttribute(fn, 8, smem), "max dynamic shared memory")
    except RuntimeError as err:
        print(f"{name:36s} {err}")
        continue
    args = [ctypes.c_uint64(a.data_ptr()), ctypes.c_uint64(b.data_ptr()), ctypes.c_uint64(c.data_ptr()),
            ctypes.c_uint32(n), ctypes.c_uint32(n), ctypes.c_uint32(n)]
    params = (ctypes.c_void_p * 6)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p) for x in args])
    grid = ((n // bn) * (n // bm), 1) if group else (n // bn, n // bm)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def launch():
        ck(cu.cuLaunchKernel(fn, grid[0], grid[1], 1, 128 * wg, 1, 1, smem, stream, params, None), "launch")

    c.fill_(float("nan"))
    launch()
    torch.cuda.synchronize()
    exact = torch.equal(c, ref)
    ms = min(timed(launch) for _ in range(2))
    print(f"{name:36s} {smem // 1024:4d} KB  {'exact' if exact else 'WRONG'}  {ms:.4f} ms  "
          f"{flops / ms * 1e-9:.0f} TFLOP/s  {min(blas) / ms:.2f}x cuBLAS")
