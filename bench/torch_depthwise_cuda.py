#!/usr/bin/env python3
"""MobileNetV2's depthwise layers (3x3, padding 1, + bias, ReLU6) in PyTorch
CUDA at batch 1 and 8, for the GPU depthwise form's table: milliseconds per
call by CUDA events (200 calls after 20 warm-up calls), next to the Kiln
kernels' replay lines read from a file (kiln-spirv-replay output, labelled
dw_b<batch>_c<channels>_<size>_s<stride>).

    python3 bench/torch_depthwise_cuda.py [replay output ...]
"""
import re
import sys

import torch
import torch.nn.functional as F

SHAPES = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1),
          (192, 28, 2), (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1)]


def torch_ms(batch, c, h, s):
    x = torch.randn(batch, c, h, h, device="cuda")
    w = torch.randn(c, 1, 3, 3, device="cuda")
    b = torch.randn(c, device="cuda")
    fn = lambda: F.conv2d(x, w, b, s, 1, 1, c).clamp_(0, 6)
    for _ in range(20):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(200):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 200


kiln = {}  # (file index, label) -> ms
for i, path in enumerate(sys.argv[1:]):
    for line in open(path):
        m = re.search(r"kernel (dw_\S+) ([0-9.]+) ms", line)
        if m:
            kiln[(i, m.group(1))] = float(m.group(2))
print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; ms per call")
names = [f"Kiln ({p})" for p in sys.argv[1:]]
print("| layer | batch | " + " | ".join(names + ["PyTorch"]) + " |")
print("|---" * (3 + len(names)) + "|")
for batch in (1, 8):
    for c, h, s in SHAPES:
        label = f"dw_b{batch}_c{c}_{h}_s{s}"
        cells = [f"{kiln.get((i, label), float('nan')):.4f}" for i in range(len(names))]
        print(f"| {c} x {h}x{h}, stride {s} | {batch} | " + " | ".join(cells) +
              f" | {torch_ms(batch, c, h, s):.4f} |")
