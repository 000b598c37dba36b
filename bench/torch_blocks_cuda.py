#!/usr/bin/env python3
"""The blocks of bench/aot_blocks.cpp in PyTorch CUDA, with the same weights
and inputs (read from DIR), at batch 1: checks kiln-run's outputs against
PyTorch's, then times eager, torch.compile and torch.compile with CUDA
graphs ("reduce-overhead"), and prints them next to kiln-run's times.

    python3 bench/torch_blocks_cuda.py DIR [kiln-run log]
"""
import math
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F



def latency(fn, runs=200):
    """Seconds from a call to its result being ready (the call, then a
    synchronize), the median of `runs` after 10 warm-up calls: what
    kiln-run --benchmark measures (one run, waited for)."""
    import time
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]

d = sys.argv[1]
kiln_log = open(sys.argv[2]).read() if len(sys.argv) > 2 else ""
dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def load(name):
    return torch.from_numpy(np.load(f"{d}/{name}.npy")).to(dev)


def transformer_weights():
    names = ["ln1_w", "ln1_b", "wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo",
             "ln2_w", "ln2_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b"]
    return {n: load("transformer_" + n) for n in names}


def transformer(x, w):
    T, D = x.shape
    H = 8
    Dh = D // H
    h = F.layer_norm(x, (D,), w["ln1_w"], w["ln1_b"])
    q = F.linear(h, w["wq"], w["bq"]).reshape(T, H, Dh).permute(1, 0, 2)
    k = F.linear(h, w["wk"], w["bk"]).reshape(T, H, Dh).permute(1, 2, 0)
    v = F.linear(h, w["wv"], w["bv"]).reshape(T, H, Dh).permute(1, 0, 2)
    p = torch.softmax(torch.matmul(q, k) * (1.0 / math.sqrt(Dh)), -1)
    x1 = F.linear(torch.matmul(p, v).permute(1, 0, 2).reshape(T, D), w["wo"], w["bo"]) + x
    f = F.gelu(F.linear(F.layer_norm(x1, (D,), w["ln2_w"], w["ln2_b"]), w["fc1_w"], w["fc1_b"]))
    return F.linear(f, w["fc2_w"], w["fc2_b"]) + x1


def resnet_weights():
    names = ["conv1_w", "conv2_w", "bn1_mean", "bn1_var", "bn1_w", "bn1_b",
             "bn2_mean", "bn2_var", "bn2_w", "bn2_b"]
    return {n: load("resnet_" + n) for n in names}


def resnet(x, w):
    y = F.conv2d(x, w["conv1_w"], padding=1)
    y = F.relu(F.batch_norm(y, w["bn1_mean"], w["bn1_var"], w["bn1_w"], w["bn1_b"], False))
    y = F.conv2d(y, w["conv2_w"], padding=1)
    y = F.batch_norm(y, w["bn2_mean"], w["bn2_var"], w["bn2_w"], w["bn2_b"], False)
    return F.relu(y + x)


def kiln_time(model):
    m = re.search(rf"{model}\.kiln: \d+ runs on \S+: median ([0-9.]+) ms", kiln_log)
    return float(m.group(1)) if m else None


print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, batch 1, f32 (TF32 off); "
      "median latency of one call waited for")
print("| block | kiln-run (Vulkan, replayed) | PyTorch eager | torch.compile | "
      "torch.compile reduce-overhead | kiln / compile |")
print("|---|---|---|---|---|---|")
for name, model, fn, weights in [("transformer", "transformer", transformer, transformer_weights),
                                 ("resnet basic block", "resnet_block", resnet, resnet_weights)]:
    prefix = "transformer" if model == "transformer" else "resnet"
    w = weights()
    x = load(prefix + "_x")
    with torch.no_grad():
        want = fn(x, w)
        try:
            got = torch.from_numpy(np.load(f"{d}/{prefix}_y_kiln.npy")).to(dev)
            err = (got - want).abs().max().item()
            scale = want.abs().max().item()
            print(f"{name}: kiln-run vs PyTorch max |diff| {err:.3g} (max |y| {scale:.3g})")
        except FileNotFoundError:
            print(f"{name}: no kiln-run output to check")
        times = {"eager": latency(lambda: fn(x, w))}
        for mode, label in [(None, "compile"), ("reduce-overhead", "cudagraphs")]:
            try:
                compiled = torch.compile(lambda x: fn(x, w), mode=mode)
                for _ in range(3):
                    compiled(x)
                times[label] = latency(lambda: compiled(x))
            except Exception as e:  # report, do not hide
                print(f"{name}: torch.compile mode={mode} failed: {type(e).__name__}: {e}")
                times[label] = None
    k = kiln_time(model)
    fmt = lambda t: f"{t * 1e3:.3f} ms" if t else "n/a"
    ratio = f"{k / (times['compile'] * 1e3):.2f}x" if k and times["compile"] else "n/a"
    print(f"| {name} | {k:.3f} ms | {fmt(times['eager'])} | {fmt(times['compile'])} | "
          f"{fmt(times['cudagraphs'])} | {ratio} |" if k else
          f"| {name} | n/a | {fmt(times['eager'])} | {fmt(times['compile'])} | "
          f"{fmt(times['cudagraphs'])} | n/a |")
