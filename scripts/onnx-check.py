#!/usr/bin/env python3
"""Runs .kiln files compiled from scripts/export-onnx-today.py's models with
kiln-run on each device and compares them with PyTorch's outputs:

    scripts/onnx-check.py DIR KILN_DIR DEVICE[,DEVICE...] [NAME...]

DIR holds NAME_<input>.npy, NAME_y.npy (and NAME_y32.npy for an f16 or bf16
copy); KILN_DIR holds NAME.kiln. An f32 model passes within 1e-4 of its
largest output. An f16 or bf16 copy passes where Kiln is as close to the f32
model's output as PyTorch's own half-precision run is (PyTorch's difference
from f32, at least 1e-3 of the largest output). Prints one markdown row per
model and device, and exits 1 if any fails. Needs numpy alone, so it runs
where the runtime runs.
"""
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np


def inputs_of(src, name):
    # The exporter writes NAME_<input>.npy beside NAME_y.npy and NAME_y32.npy
    # (and NAME_f16_... for the model's half-precision copies).
    found = sorted(glob.glob(os.path.join(src, f"{name}_*.npy")))
    rests = [os.path.basename(p)[len(name) + 1:-4] for p in found]
    return {k: p for k, p in zip(rests, found)
            if k not in ("y", "y32") and not k.startswith(("f16_", "bf16_"))}


def check(kiln_run, src, kiln_dir, name, device):
    ref = np.load(os.path.join(src, f"{name}_y.npy")).astype(np.float32)
    half = os.path.exists(os.path.join(src, f"{name}_y32.npy"))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "y.npy")
        cmd = [kiln_run, os.path.join(kiln_dir, f"{name}.kiln"), "--device", device,
               "--output", f"y={out}"]
        for k, p in inputs_of(src, name).items():
            cmd += ["--input", f"{k}={p}"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            return False, f"| {name} | {device} | kiln-run failed: " \
                          f"{(run.stderr or run.stdout).strip().splitlines()[-1][:160]} | | |"
        got = np.load(out)
        if got.dtype == np.uint16:  # kiln-run writes bf16 as its bits (numpy has no bf16)
            got = (got.astype(np.uint32) << 16).view(np.float32)
        got = got.astype(np.float32)
    if got.shape != ref.shape:
        return False, f"| {name} | {device} | shape {got.shape}, PyTorch's {ref.shape} | | |"
    scale = float(np.abs(ref).max())
    if half:
        y32 = np.load(os.path.join(src, f"{name}_y32.npy")).astype(np.float32)
        diff = float(np.abs(got - y32).max())
        bound = max(float(np.abs(ref - y32).max()), 1e-3 * float(np.abs(y32).max()))
        what = "from PyTorch f32"
    else:
        diff = float(np.abs(got - ref).max())
        bound = 1e-4 * scale
        what = "from PyTorch"
    ok = bool(np.isfinite(got).all()) and diff <= bound
    return ok, (f"| {name} | {device} | {'pass' if ok else 'FAIL'} | "
                f"{diff:.3g} {what} | {bound:.3g} (max \\|y\\| {scale:.3g}) |")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    src, kiln_dir, devices = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    names = sys.argv[4:] or sorted(os.path.basename(p)[:-5]
                                   for p in glob.glob(os.path.join(kiln_dir, "*.kiln")))
    kiln_run = os.environ.get("KILN_RUN", os.path.join(os.path.dirname(__file__), "..",
                                                       "build", "bin", "kiln-run"))
    print("| model | device | result | max difference | allowed |")
    print("| --- | --- | --- | --- | --- |")
    failed = 0
    for name in names:
        for device in devices:
            ok, row = check(kiln_run, src, kiln_dir, name, device)
            failed += not ok
            print(row, flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
