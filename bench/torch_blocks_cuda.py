#!/usr/bin/env python3
"""The blocks of bench/aot_blocks.cpp in PyTorch CUDA, with the same weights
and inputs (read from DIR), at batch 1: checks kiln-run's outputs against
PyTorch's, then times eager, torch.compile and torch.compile with CUDA
graphs ("reduce-overhead"), and prints them next to kiln-run's times.

    python3 bench/torch_blocks_cuda.py DIR [kiln-run log] [--half]

--half: the f16 blocks instead (kiln-bench-aot-blocks --half on), at batch
1 and 32: PyTorch's f16 blocks from the same weights rounded to f16, next to
kiln-run's transformer_f16_b1.kiln, ...; each output checked against
PyTorch's f16 and f32 results.
"""
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F



def latency(fn, runs=200):
    """Seconds from a call to its result being ready (the call, then a
    synchronize), the median of `runs` after warm-up calls: what
    kiln-run --benchmark measures (one run, waited for)."""
    import time
    # Half a second of calls first: the GPU's clocks ramp up from idle (ten
    # calls left the medians of two processes 1.5x apart on the H200).
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:
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

half = "--half" in sys.argv
args = [a for a in sys.argv[1:] if a != "--half"]
d = args[0]
kiln_log = open(args[1]).read() if len(args) > 1 else ""
dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def load(name):
    return from_npy(np.load(f"{d}/{name}.npy"))


def from_npy(a):
    """A tensor on the GPU; uint16 arrays are bf16 bits (Kiln's .npy)."""
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16)).to(dev).view(torch.bfloat16)
    return torch.from_numpy(a).to(dev)


def transformer_weights():
    names = ["ln1_w", "ln1_b", "wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo",
             "ln2_w", "ln2_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b"]
    return {n: load("transformer_" + n) for n in names}


def transformer(x, w, T=128):
    """x: [B * T, D], B sequences of T tokens."""
    BT, D = x.shape
    B = BT // T
    H = 8
    Dh = D // H
    # One sequence as three-dimensional heads, as the Kiln graph has them
    # (inductor in torch 2.11 fails on the four-dimensional form at batch 1
    # in f16: "Attempting to broadcast a dimension of length 128").
    shape = (T, H, Dh) if B == 1 else (B, T, H, Dh)
    lead = () if B == 1 else (0,)
    heads = lambda order: [d - (B == 1) for d in lead + order]
    h = F.layer_norm(x, (D,), w["ln1_w"], w["ln1_b"])
    q = F.linear(h, w["wq"], w["bq"]).reshape(shape).permute(heads((2, 1, 3)))
    k = F.linear(h, w["wk"], w["bk"]).reshape(shape).permute(heads((2, 3, 1)))
    v = F.linear(h, w["wv"], w["bv"]).reshape(shape).permute(heads((2, 1, 3)))
    p = torch.softmax(torch.matmul(q, k) * (1.0 / math.sqrt(Dh)), -1)
    a = torch.matmul(p, v).permute(heads((2, 1, 3)))
    x1 = F.linear(a.reshape(BT, D), w["wo"], w["bo"]) + x
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


def compare(blocks, title):
    """blocks: (label, kiln model name, fn, weights, input, kiln output file)."""
    print(title)
    print("| block | kiln-run (Vulkan, replayed) | PyTorch eager | torch.compile | "
          "torch.compile reduce-overhead | kiln / eager | kiln / compile |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for name, model, fn, w, x, out in blocks:
        with torch.no_grad():
            want = fn(x, w)
            try:
                got = from_npy(np.load(out))
                err = (got.float() - want.float()).abs().max().item()
                scale = want.float().abs().max().item()
                line = f"{name}: kiln-run vs PyTorch max |diff| {err:.3g} (max |y| {scale:.3g})"
                if want.dtype in (torch.float16, torch.bfloat16):
                    # The rounding itself: PyTorch's half block against its f32 one.
                    ref = fn(x.float(), {n: t.float() for n, t in w.items()})
                    line += (f"; against PyTorch f32: kiln {(got.float() - ref).abs().max().item():.3g}, "
                             f"PyTorch {str(want.dtype)[6:]} {(want.float() - ref).abs().max().item():.3g}")
                print(line)
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
        ratio = lambda t: f"{k / (t * 1e3):.2f}x" if k and t else "n/a"
        rows.append(f"| {name} | {f'{k:.3f} ms' if k else 'n/a'} | {fmt(times['eager'])} | "
                    f"{fmt(times['compile'])} | {fmt(times['cudagraphs'])} | {ratio(times['eager'])} | "
                    f"{ratio(times['compile'])} |")
    print("\n".join(rows))


if half:
    # The f16 blocks, then the bf16 ones (either may be left out of a run).
    for name, convert in (("f16", torch.Tensor.half), ("bf16", torch.Tensor.bfloat16)):
        if not os.path.exists(f"{d}/transformer_{name}_x_b1.npy"):
            continue
        tw = {n: convert(t) for n, t in transformer_weights().items()}
        rw = {n: convert(t) for n, t in resnet_weights().items()}
        blocks = []
        for b in (1, 32):
            blocks.append((f"transformer {name}, batch {b}", f"transformer_{name}_b{b}", transformer,
                           tw, load(f"transformer_{name}_x_b{b}"),
                           f"{d}/transformer_y_{name}_b{b}.npy"))
            blocks.append((f"resnet basic block {name}, batch {b}", f"resnet_block_{name}_b{b}",
                           resnet, rw, load(f"resnet_{name}_x_b{b}"), f"{d}/resnet_y_{name}_b{b}.npy"))
        compare(blocks, f"torch {torch.__version__} on {torch.cuda.get_device_name()}, {name}; "
                        "median latency of one call waited for")
    sys.exit(0)

compare([("transformer", "transformer", transformer, transformer_weights(), load("transformer_x"),
          f"{d}/transformer_y_kiln.npy"),
         ("resnet basic block", "resnet_block", resnet, resnet_weights(), load("resnet_x"),
          f"{d}/resnet_y_kiln.npy")],
        f"torch {torch.__version__} on {torch.cuda.get_device_name()}, batch 1, f32 (TF32 off); "
        "median latency of one call waited for")
