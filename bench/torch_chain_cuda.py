#!/usr/bin/env python3
"""PyTorch CUDA on the six-op chain of bench_ops.cpp (the kernel that
kiln-spirv-replay runs), counting traffic the same way (every input and
output read or written once):

    y = gelu(tanh(x * w + b) - 0.5) * x     x: 4096 x 4096 f32, w, b: 4096
"""
import torch
import torch.nn.functional as F

from torch_timing import measure_cuda

rows, cols = 4096, 4096
x = torch.randn(rows, cols, device="cuda")
w = torch.randn(cols, device="cuda")
b = torch.randn(1, cols, device="cuda")


def chain(x, w, b):
    return F.gelu(torch.tanh(x * w + b) - 0.5) * x


def add(x, y):
    return x * y


traffic = (2 * rows * cols + 2 * cols) * 4
y = torch.randn(rows, cols, device="cuda")
print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
for name, fn, args, bytes_ in [
    ("chain eager", chain, (x, w, b), traffic),
    ("chain torch.compile", torch.compile(chain), (x, w, b), traffic),
    ("mul x*y eager", add, (x, y), 3 * rows * cols * 4),
]:
    t = measure_cuda(lambda: fn(*args), runs=50)
    print(f"{name}: {t * 1e3:.3f} ms, {bytes_ / t / 1e9:.1f} GB/s")
