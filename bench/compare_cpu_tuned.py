#!/usr/bin/python3
"""Tuned against default on the CPU, side by side with the references, all
on 2 threads, in alternating rounds (the CPU targets: tuned matmul
against OpenBLAS, conv against PyTorch):

    /usr/bin/python3 bench/compare_cpu_tuned.py [build dir] [rounds]

Kiln runs kiln-bench-kernels on cpu:0 twice per round: KILN_AUTOTUNE=off
(the default configs) and cached (the records `kiln-tune` stored for these
kernels; tune first, docs/tuning.md). OpenBLAS is numpy's matmul
(libopenblas0-pthread, OPENBLAS_NUM_THREADS=2); PyTorch's conv2d runs with
torch.set_num_threads(2). Rates in GFLOP/s; each is the rate of about one
second of calls.
"""
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "build")
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
threads = 2
os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
import numpy  # noqa: E402 (after the thread count)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, here)
from torch_timing import measure  # noqa: E402

torch.set_num_threads(threads)


def kiln(mode):
    env = dict(os.environ, KILN_AUTOTUNE=mode)
    out = subprocess.run(
        [os.path.join(build, "bin", "kiln-bench-kernels"), "--benchmark_format=json",
         "--benchmark_filter=(matmul|conv).*cpu:0", "--benchmark_min_time=1"],
        check=True, capture_output=True, text=True, env=env).stdout
    return {b["name"].split("/")[0]: b["FLOP/s"] / 1e9 for b in json.loads(out)["benchmarks"]}


def references():
    rates = {}
    for n in (1024, 4096):
        a = numpy.random.rand(n, n).astype(numpy.float32)
        b = numpy.random.rand(n, n).astype(numpy.float32)
        rates[f"matmul{n}"] = 2 * n ** 3 / measure(lambda: a @ b) / 1e9
    x, w = torch.randn(1, 64, 56, 56), torch.randn(64, 64, 3, 3)
    rates["conv_resnet"] = 2 * 64 * 64 * 9 * 56 * 56 / measure(
        lambda: F.conv2d(x, w, padding=1)) / 1e9
    return rates


print(f"{threads} threads everywhere; numpy {numpy.__version__} (OpenBLAS), torch "
      f"{torch.__version__}; GFLOP/s")
print("| round | kernel | Kiln default | Kiln tuned | reference | tuned / reference |")
print("|---|---|---|---|---|---|")
for r in range(1, rounds + 1):
    default, tuned, ref = kiln("off"), kiln("cached"), references()
    for name in ("matmul1024", "matmul4096", "conv_resnet"):
        who = "PyTorch" if name.startswith("conv") else "OpenBLAS"
        print(f"| {r} | {name} | {default[name]:.1f} | {tuned[name]:.1f} | "
              f"{ref[name]:.1f} ({who}) | {tuned[name] / ref[name]:.2f}x |", flush=True)
