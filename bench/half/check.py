#!/usr/bin/env python3
"""Compares kiln-run's outputs of bench/half/make_cases.py's cases with the
expected ones (scripts/half-gpu-bench.sh run):

    python3 bench/half/check.py CASES_DIR OUT_DIR

exact_*: every element equal; linear_gelu: within 2e-3 of the largest
expected magnitude (f16 outputs: 2^-11 relative rounding), linear_gelu_bf16
within 1e-2 (bf16: 2^-8); mm4096 and mm4096_bf16: against PyTorch's f32
matmul of the same inputs on the GPU when torch is there, within 1e-2 of
the largest magnitude, and conv_resnet likewise against PyTorch's f32
convolution. bf16 arrays are uint16 bits. Exits non-zero on any
mismatch.
"""
import os
import sys

import numpy as np

cases, outs = sys.argv[1], sys.argv[2]
bad = 0


def load(path):
    """An output or expected array as float64 (bf16 from its uint16 bits)."""
    v = np.load(path)
    if v.dtype == np.uint16:
        v = (v.astype(np.uint32) << 16).view(np.float32)
    return v.astype(np.float64)


def report(name, ok, detail):
    global bad
    bad += not ok
    print(f"{name:14} {'ok' if ok else 'WRONG'}  {detail}")


def output(name, variant):
    """kiln-run's output of one case and form, or None (reported)."""
    path = os.path.join(outs, f"{name}_{variant}.npy")
    if not os.path.exists(path):
        report(f"{name}/{variant}", False, "no output")
        return None
    return load(path)


for name in ("exact_ragged", "exact_aligned", "linear_gelu", "exact_conv", "exact_batched", "exact_conv64",
             "exact_conv_strided", "exact_conv_rows", "exact_conv_rows5", "exact_bf16_ragged",
             "exact_bf16_conv64", "exact_bf16_conv_rows", "linear_gelu_bf16"):
    for variant in ("coop", "tiled"):
        got = output(name, variant)
        if got is None:
            continue
        want = load(os.path.join(cases, f"{name}_want.npy"))
        err = np.abs(got - want).max()
        scale = np.abs(want).max()
        if name.startswith("exact"):
            report(f"{name}/{variant}", err == 0, f"max |error| {err:g} (exact expected)")
        else:
            report(f"{name}/{variant}", err <= (1e-2 if "bf16" in name else 2e-3) * scale,
                   f"max |error| {err:.3g} of max |want| {scale:.3g}")

try:
    import torch
    if not torch.cuda.is_available():
        raise ImportError("no CUDA")
    for name in ("mm4096", "mm4096_bf16"):
        a = torch.from_numpy(load(os.path.join(cases, f"{name}_in0.npy"))).float().cuda()
        b = torch.from_numpy(load(os.path.join(cases, f"{name}_in1.npy"))).float().cuda()
        want = (a @ b).double().cpu().numpy()
        for variant in ("coop", "tiled"):
            got = output(name, variant)
            if got is None:
                continue
            err, scale = np.abs(got - want).max(), np.abs(want).max()
            report(f"{name}/{variant}", err <= 1e-2 * scale,
                   f"max |error| {err:.3g} of max |want| {scale:.3g} (against f32 torch)")
    # The ResNet stage's convolution against PyTorch's f32 one (cuDNN).
    x = torch.from_numpy(load(os.path.join(cases, "conv_resnet_in0.npy"))).float().cuda()
    w = torch.from_numpy(load(os.path.join(cases, "conv_resnet_in1.npy"))).float().cuda()
    want = torch.nn.functional.conv2d(x, w, padding=1).double().cpu().numpy()
    for variant in ("coop", "tiled"):
        got = output("conv_resnet", variant)
        if got is None:
            continue
        err, scale = np.abs(got - want).max(), np.abs(want).max()
        report(f"conv_resnet/{variant}", err <= 1e-2 * scale,
               f"max |error| {err:.3g} of max |want| {scale:.3g} (against f32 torch)")
except ImportError as e:
    print(f"mm4096 and conv_resnet: not compared ({e})")
sys.exit(1 if bad else 0)
