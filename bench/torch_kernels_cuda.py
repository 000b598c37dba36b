#!/usr/bin/env python3
"""PyTorch CUDA on the kernels of bench_kernels.cpp at KILN_BENCH_SIZES=gpu,
printed next to Kiln's Vulkan kernels as kiln-spirv-replay measured them:

    kiln-spirv-replay .dev/kernels/*.kernel > replay.txt
    python3 bench/torch_kernels_cuda.py replay.txt

Work is counted as bench_kernels.cpp counts it (bytes read + written once,
2 m n k FLOP). fp32 throughout; TF32 is off so matmul and conv compare the
same arithmetic.
"""
import re
import sys

import torch
import torch.nn.functional as F

from torch_timing import measure_cuda

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)


rows, cols, batch = 4096, 8192, 32
dev = "cuda"
x = torch.randn(rows, cols, device=dev)
w, b = torch.randn(cols, device=dev), torch.randn(cols, device=dev)
cases = [
    ("chain", lambda: F.gelu(torch.tanh(x * w + b) - 0.5) * x, rows * cols * 8, "B"),
    ("softmax", lambda: torch.softmax(x, -1), rows * cols * 8, "B"),
    ("layer_norm", lambda: F.layer_norm(x, (cols,), w, b), rows * cols * 8, "B"),
    ("row_sum", lambda: x.sum(1), rows * cols * 4, "B"),
]
mats = {n: (torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)) for n in (1024, 4096)}
for n in (1024, 4096):
    a, c = mats[n]
    cases.append((f"matmul{n}", lambda a=a, c=c: a @ c, 2 * n ** 3, "FLOP"))
xi, wc = torch.randn(batch, 64, 56, 56, device=dev), torch.randn(64, 64, 3, 3, device=dev)
cases.append(("conv_resnet", lambda: F.conv2d(xi, wc, padding=1),
              2 * batch * 64 * 64 * 9 * 56 * 56, "FLOP"))

kiln = {}
if len(sys.argv) > 1:
    for line in open(sys.argv[1]):
        m = re.match(r"kernel (\S+) ([\d.]+) ms ([\d.]+) G(\S+)/s", line)
        if m:
            kiln[m.group(1)] = (float(m.group(2)) / 1e3, float(m.group(3)))

print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
print(f"{'kernel':12} {'Kiln (Vulkan)':>16} {'PyTorch CUDA':>16} {'Kiln/PyTorch':>13}")
for name, fn, work, unit in cases:
    t = measure_cuda(fn)
    rate = work / t / 1e9
    mine = kiln.get(name)
    kiln_text = f"{mine[1]:10.1f} G{unit}/s" if mine else f"{'-':>16}"
    ratio = f"{mine[1] / rate:12.2f}x" if mine else f"{'-':>13}"
    print(f"{name:12} {kiln_text:>16} {rate:10.1f} G{unit}/s {ratio}")
