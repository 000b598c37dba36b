#!/usr/bin/env python3
"""PyTorch's attention on this CPU for bench_attention.cpp's shapes.

PyTorch 1.13 (Debian's) has no F.scaled_dot_product_attention: this is the
softmax(q k^T * scale) v a user writes, with torch.bmm, which
materializes the L x S scores. Usage: torch_attention.py [threads] [runs]
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_timing import median  # noqa: E402

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 50
torch.set_num_threads(threads)

for bh, n, e, causal in [(12, 128, 64, False), (12, 512, 64, False), (4, 2048, 64, True)]:
    q, k, v = (torch.randn(bh, n, e) for _ in range(3))
    mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1) if causal else None

    def attend():
        s = torch.bmm(q, k.transpose(1, 2)) * (1 / math.sqrt(e))
        if mask is not None:
            s = s + mask
        return torch.bmm(torch.softmax(s, -1), v)

    with torch.no_grad():
        ms = median(attend, runs) * 1e3
    flops = 4 * bh * n * n * e * (0.5 if causal else 1.0)
    print(f"torch {bh}/{n}/{e}/{int(causal)}: {ms:.3f} ms, {flops / ms / 1e6:.1f} GFLOP/s "
          f"({threads} threads, median of {runs})")
