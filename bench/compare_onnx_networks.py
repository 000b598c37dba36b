#!/usr/bin/python3
"""ONNX models compiled by Kiln against ONNX Runtime and PyTorch on this
CPU, side by side in one run, all on the same thread count:

    /usr/bin/python3 bench/compare_onnx_networks.py DIR [runs] [ort dir]

DIR holds NAME.onnx, NAME_x.npy (the input) and NAME_y.npy (the reference
output, e.g. PyTorch's). For each model: kiln-compile (cpu target),
kiln-run --benchmark on cpu:0 (median), ONNX Runtime's CPU build through
bench/ort_run.js (median; npm install --ignore-scripts onnxruntime-node in
ORT_DIR, default /tmp/ort), and both outputs' largest difference from the
reference, and PyTorch's latency on NAME.pt (TorchScript, when present;
bench/export_onnx_networks.py writes all of these). All on this machine's
threads, or on THREADS=N.
"""
import glob
import os
import re
import subprocess
import sys

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_timing import median  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

here = os.path.dirname(os.path.abspath(__file__))
build = os.path.join(here, "..", "build", "bin")
folder = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
ort_dir = sys.argv[3] if len(sys.argv) > 3 else "/tmp/ort"
# THREADS=1 for the one-thread comparison; Kiln gets it as KILN_NUM_THREADS.
threads = int(os.environ.get("THREADS", os.cpu_count()))
if torch:
    torch.set_num_threads(threads)


def torch_ms(path, x):
    """Median latency of the TorchScript model at `path`, or None."""
    if not torch or not os.path.exists(path):
        return None
    model = torch.jit.load(path).eval()
    inp = torch.from_numpy(numpy.load(x))
    with torch.no_grad():
        return median(lambda: model(inp), runs) * 1e3


print(f"{threads} threads; medians of {runs} runs, latency per inference")
print("| model | kernels | Kiln kiln-run cpu:0 | ONNX Runtime | PyTorch | Kiln / ORT | Kiln / PyTorch "
      "| max abs diff from reference: Kiln, ORT |")
print("|---|---|---|---|---|---|---|---|")
for model in sorted(glob.glob(os.path.join(folder, "*.onnx"))):
    name = os.path.basename(model)[:-5]
    x = os.path.join(folder, name + "_x.npy")
    ref = os.path.join(folder, name + "_y.npy")
    if not os.path.exists(x) or not os.path.exists(ref):
        continue
    kiln_file = f"/tmp/{name}.kiln"
    shape = "x".join(str(d) for d in numpy.load(x).shape)
    compiled = subprocess.run([os.path.join(build, "kiln-compile"), model, "-o", kiln_file,
                               "--target", "cpu", "--input-shape", f"x={shape}"],
                              capture_output=True, text=True)
    if compiled.returncode:
        print(f"| {name} | {compiled.stderr.strip()} | | | |")
        continue
    out = subprocess.run([os.path.join(build, "kiln-run"), kiln_file, "--device", "cpu:0",
                          "--input", f"x={x}", "--output", f"y=/tmp/{name}_kiln.npy",
                          "--benchmark", str(runs)], capture_output=True, text=True, check=True,
                         env=dict(os.environ, KILN_NUM_THREADS=str(threads))).stdout
    kiln_ms = float(re.search(r"median ([0-9.]+) ms", out).group(1))
    kernels = int(re.search(r"([0-9]+) dispatches", out).group(1)) // runs
    ort = subprocess.run(["node", os.path.join(here, "ort_run.js"), model, x, str(runs), str(threads),
                          f"/tmp/{name}_ort.bin"], capture_output=True, text=True,
                         env=dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules")))
    want = numpy.load(ref)
    kiln_diff = abs(numpy.load(f"/tmp/{name}_kiln.npy").reshape(-1) - want.reshape(-1)).max()
    pt = torch_ms(os.path.join(folder, name + ".pt"), x)
    pt_text = f"{pt:.2f} ms" if pt else "-"
    pt_ratio = f"{kiln_ms / pt:.2f}x" if pt else "-"
    if ort.returncode:
        print(f"| {name} | {kernels} | {kiln_ms:.2f} ms | {ort.stderr.strip()[:80]} | {pt_text} | "
              f"| {pt_ratio} | {kiln_diff:.2g}, - |")
        continue
    ort_ms = float(re.search(r"median ([0-9.]+)", ort.stdout).group(1))
    ort_diff = abs(numpy.fromfile(f"/tmp/{name}_ort.bin", dtype=numpy.float32) - want.reshape(-1)).max()
    print(f"| {name} | {kernels} | {kiln_ms:.2f} ms | {ort_ms:.2f} ms | {pt_text} | "
          f"{kiln_ms / ort_ms:.2f}x | {pt_ratio} | {kiln_diff:.2g}, {ort_diff:.2g} |", flush=True)
