#!/usr/bin/env python3
"""Compares kiln-run's outputs of bench/half/make_cases.py's cases with the
expected ones (scripts/half-gpu-bench.sh run):

    python3 bench/half/check.py CASES_DIR OUT_DIR

exact_*: every element equal; linear_gelu: within 2e-3 of the largest
expected magnitude (f16 outputs: 2^-11 relative rounding); mm4096: against
PyTorch's f16 matmul on the GPU when torch is there, within 1e-2 of the
largest magnitude. Exits non-zero on any mismatch.
"""
import os
import sys

import numpy as np

cases, outs = sys.argv[1], sys.argv[2]
bad = 0


def report(name, ok, detail):
    global bad
    bad += not ok
    print(f"{name:14} {'ok' if ok else 'WRONG'}  {detail}")


for name in ("exact_ragged", "exact_aligned", "linear_gelu", "exact_conv", "exact_batched", "exact_conv64",
             "exact_conv_strided"):
    for variant in ("coop", "tiled"):
        path = os.path.join(outs, f"{name}_{variant}.npy")
        if not os.path.exists(path):
            report(f"{name}/{variant}", False, "no output")
            continue
        got = np.load(path).astype(np.float64)
        want = np.load(os.path.join(cases, f"{name}_want.npy")).astype(np.float64)
        err = np.abs(got - want).max()
        scale = np.abs(want).max()
        if name.startswith("exact"):
            report(f"{name}/{variant}", err == 0, f"max |error| {err:g} (exact expected)")
        else:
            report(f"{name}/{variant}", err <= 2e-3 * scale,
                   f"max |error| {err:.3g} of max |want| {scale:.3g}")

try:
    import torch
    if not torch.cuda.is_available():
        raise ImportError("no CUDA")
    a = torch.from_numpy(np.load(os.path.join(cases, "mm4096_in0.npy"))).cuda()
    b = torch.from_numpy(np.load(os.path.join(cases, "mm4096_in1.npy"))).cuda()
    want = (a.float() @ b.float()).double().cpu().numpy()
    for variant in ("coop", "tiled"):
        got = np.load(os.path.join(outs, f"mm4096_{variant}.npy")).astype(np.float64)
        err, scale = np.abs(got - want).max(), np.abs(want).max()
        report(f"mm4096/{variant}", err <= 1e-2 * scale,
               f"max |error| {err:.3g} of max |want| {scale:.3g} (against f32 torch)")
except ImportError as e:
    print(f"mm4096: not compared ({e})")
sys.exit(1 if bad else 0)
