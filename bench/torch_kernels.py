#!/usr/bin/python3
"""PyTorch eager on the CPU, the same kernels, shapes and units as
bench_kernels.cpp (default sizes), one line per kernel:

    /usr/bin/python3 bench/torch_kernels.py

matmul goes through PyTorch's BLAS: with libopenblas0-pthread installed that
is OpenBLAS on every core (Debian's torch otherwise falls back to the
reference BLAS).
"""

import torch
import torch.nn.functional as F

from torch_timing import measure

torch.manual_seed(0)


rows, cols = 4096, 1024
x = torch.randn(rows, cols)
g, b = torch.randn(cols), torch.randn(cols)
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
cases = [
    ("chain", lambda: F.gelu(torch.tanh(x * g + b) - 0.5) * x, rows * cols * 8, "GB/s"),
    ("softmax", lambda: torch.softmax(x, -1), rows * cols * 8, "GB/s"),
    ("layer_norm", lambda: F.layer_norm(x, (cols,), g, b), rows * cols * 8, "GB/s"),
    ("row_sum", lambda: x.sum(1), rows * cols * 4, "GB/s"),
]
for n in (1024, 4096):
    a, c = torch.randn(n, n), torch.randn(n, n)
    cases.append((f"matmul{n}", lambda a=a, c=c: a @ c, 2 * n ** 3, "GFLOP/s"))
xi, w = torch.randn(1, 64, 56, 56), torch.randn(64, 64, 3, 3)
cases.append(("conv_resnet", lambda: F.conv2d(xi, w, padding=1), 2 * 64 * 64 * 9 * 56 * 56,
              "GFLOP/s"))
for name, fn, work, unit in cases:
    t = measure(fn)
    print(f"{name:12} {t * 1e3:8.3f} ms {work / t / 1e9:8.2f} {unit}")
