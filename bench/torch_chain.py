#!/usr/bin/python3
"""PyTorch (eager, CPU) on the chain of bench_cpu.cpp, with the same GB/s.

    y = tanh(x * w + b) * 0.5 - x * 0.25     x: 4096 x 4096 f32, w, b: 4096

Run with Debian's python3-torch: /usr/bin/python3 bench/torch_chain.py
"""
import sys

import torch

from torch_timing import measure

rows = 16 if "--smoke" in sys.argv else 4096
cols = 4096
torch.manual_seed(0)
x = torch.randn(rows, cols)
w = torch.randn(cols)
b = torch.randn(cols)


def chain():
    return torch.tanh(x * w + b) * 0.5 - x * 0.25


per_run = measure(chain)
gbs = rows * cols * 8 / per_run / 1e9
print(f"torch {torch.__version__} eager cpu, {torch.get_num_threads()} threads: "
      f"chain {per_run * 1e3:.2f} ms, {gbs:.2f} GB/s")
