#!/usr/bin/env python3
"""Kiln's f16 n^3 matmul on the GPU it runs on, next to cuBLAS.

Compiled there by kiln-compile twice: as it comes (on the H200, PTX on
warpgroup MMA launched through CUDA, WgmmaGemm.h) and with KILN_CUDA=0
(the cooperative-matrix SPIR-V alone). Each runs through kiln-run on small
integers, its result checked against PyTorch's bit for bit, then timed:
--benchmark (whole runs, inputs resident, the output waited for) and
--profile (the kernel, host clock). cuBLAS is timed by CUDA events around
20 back-to-back calls (bench/torch_timing.py).

--mixed: the GEMM between two Vulkan kernels, (a - rowmax(a)) @ b, then
row sums: CUDA's launch waits for the first, the second for it; next to
PyTorch eager running the same three ops (results within f16 tolerance:
the sums' order differs).   usage: kiln_vs_cublas.py [n] [--mixed]
"""
import os
import re
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torch_timing import measure_cuda  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
mixed = "--mixed" in sys.argv
work = "/tmp/kiln-gemm"
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(3)
a = rng.integers(-2, 3, (n, n)).astype(np.float16)
b = rng.integers(-2, 3, (n, n)).astype(np.float16)
np.save(f"{work}/a.npy", a)
np.save(f"{work}/b.npy", b)
t = f"tensor<{n}x{n}xf16>"
r = f"tensor<{n}x1xf16>"
with open(f"{work}/mm.mlir", "w") as f:
    if mixed:
        f.write(f"func.func @graph() -> {r} {{\n  %a = kiln.input 0 : {t}\n  %b = kiln.input 1 : {t}\n"
                f"  %m = kiln.reduce max %a [1] keepdims : {t} -> {r}\n"
                f"  %s = kiln.sub %a, %m : {t}, {r} -> {t}\n"
                f"  %c = kiln.matmul %s, %b : {t}, {t} -> {t}\n"
                f"  %y = kiln.reduce sum %c [1] keepdims : {t} -> {r}\n  return %y : {r}\n}}\n")
    else:
        f.write(f"func.func @graph() -> {t} {{\n  %a = kiln.input 0 : {t}\n  %b = kiln.input 1 : {t}\n"
                f"  %c = kiln.matmul %a, %b : {t}, {t} -> {t}\n  return %c : {t}\n}}\n")

ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()


def torch_graph():
    if mixed:
        return ((ta - ta.amax(1, keepdim=True)) @ tb).sum(1, keepdim=True)
    return ta @ tb


want = torch_graph().cpu().numpy()
blas = [measure_cuda(torch_graph) * 1e3 for _ in range(2)]
flops = 2 * n ** 3
what = "eager (a - rowmax) @ b, row sums" if mixed else "cuBLAS"
print(f"torch {torch.__version__} {what} f16 {n}^3: {blas[0]:.4f} / {blas[1]:.4f} ms, "
      f"{flops / min(blas) * 1e-9:.0f} TFLOP/s")


def run(*args, env=None):
    p = subprocess.run(list(args), env=env, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{' '.join(args)}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


for label, extra in [("kiln ptx", {}), ("kiln coop spirv", {"KILN_CUDA": "0"})]:
    env = dict(os.environ, KILN_CACHE_DIR=f"{work}/cache-{len(extra)}", **extra)
    kiln = f"{work}/mm-{len(extra)}.kiln"
    out = run("build/bin/kiln-compile", f"{work}/mm.mlir", "--target", "vulkan", "--ptx",
              "-o", kiln, env=env)
    config = [line for line in out.splitlines() if line.startswith("// entry")]
    print(f"{label}: {config[0][3:] if config else 'no PTX'}")
    inputs = ["--input", f"{work}/a.npy", "--input", f"{work}/b.npy"]
    out = run("build/bin/kiln-run", kiln, *inputs, "--output", f"{work}/c.npy", env=env)
    got = np.load(f"{work}/c.npy") if os.path.exists(f"{work}/c.npy") else None
    exact = got is not None and (np.allclose(got.astype(np.float32), want.astype(np.float32),
                                             rtol=1e-2, atol=1e-2) if mixed
                                 else np.array_equal(got, want))
    wrong = "?" if got is None else int((got != want).sum())
    os.remove(f"{work}/c.npy") if got is not None else None
    for round in range(2):
        out = run("build/bin/kiln-run", kiln, *inputs, "--benchmark", "50", "--profile", "20",
                  env=env)
        whole = re.search(r"median ([0-9.]+) ms, min ([0-9.]+) ms", out)
        kernel = [line for line in out.splitlines() if " kernel " in line and "(vulkan" in line]
        if not whole:
            print(out)
            continue
        median, best = float(whole.group(1)), float(whole.group(2))
        verdict = ("within f16 tolerance" if mixed else "exact") if exact else f"WRONG ({wrong} values)"
        print(f"  {verdict}; runs: median {median:.4f} ms "
              f"({flops / median * 1e-9:.0f} TFLOP/s, {min(blas) / median:.2f}x torch), "
              f"min {best:.4f} ms ({min(blas) / best:.2f}x)")
        for line in kernel:
            print(f"  profile: {line.strip()}")
