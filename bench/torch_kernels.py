#!/usr/bin/python3
"""PyTorch eager on the CPU, the same kernels and units as bench_kernels.cpp:

    /usr/bin/python3 bench/torch_kernels.py
"""

import torch
import torch.nn.functional as F

from torch_timing import measure

torch.manual_seed(0)


rows, cols = 4096, 1024
x = torch.randn(rows, cols)
g, b = torch.randn(cols), torch.randn(cols)
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
for name, fn, work, unit in [
    ("softmax", lambda: torch.softmax(x, -1), rows * cols * 8, "GB/s"),
    ("layer_norm", lambda: F.layer_norm(x, (cols,), g, b), rows * cols * 8, "GB/s"),
    ("row_sum", lambda: x.sum(1), rows * cols * 4, "GB/s"),
]:
    t = measure(fn)
    print(f"{name:12} {t * 1e3:8.3f} ms {work / t / 1e9:8.2f} {unit}")
for n in (256, 1024):
    a, c = torch.randn(n, n), torch.randn(n, n)
    t = measure(lambda: a @ c)
    print(f"matmul{n:<6} {t * 1e3:8.3f} ms {2 * n ** 3 / t / 1e9:8.2f} GFLOP/s")
xi, w = torch.randn(1, 64, 56, 56), torch.randn(64, 64, 3, 3)
t = measure(lambda: F.conv2d(xi, w, padding=1))
print(f"conv_resnet  {t * 1e3:8.3f} ms {2 * 64 * 64 * 9 * 56 * 56 / t / 1e9:8.2f} GFLOP/s")
