#!/usr/bin/python3
"""MobileNetV2's depthwise convolutions inside the network, Kiln against ONNX
Runtime, per layer, from each one's own profiler in one run:

    /usr/bin/python3 bench/compare_depthwise.py DIR [runs] [ort dir] [rounds]

DIR holds mobilenet_v2.onnx and mobilenet_v2_x.npy
(bench/export_onnx_networks.py). Kiln: kiln-compile --target cpu, then
kiln-run --profile on cpu:0 (each kernel timed alone by the host clock).
ONNX Runtime: bench/ort_profile.js (its own profiler, per node, after its
graph optimizations; npm onnxruntime-node in ORT_DIR, default /tmp/ort).
Both on all of this machine's threads. A depthwise layer is matched by its
ONNX node's path (/features/features.N/conv/conv.M), which Kiln's profile
gives as the kernel's source and ORT keeps in its fused node's name. Its
bias and ReLU6 are fused in both.
"""
import os
import re
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
build = os.path.join(here, "..", "build", "bin")
folder = sys.argv[1]
runs = sys.argv[2] if len(sys.argv) > 2 else "50"
ort_dir = sys.argv[3] if len(sys.argv) > 3 else "/tmp/ort"
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
threads = str(os.cpu_count())
model = os.path.join(folder, "mobilenet_v2.onnx")
x = os.path.join(folder, "mobilenet_v2_x.npy")

subprocess.run([os.path.join(build, "kiln-compile"), model, "-o", "/tmp/mnv2_dw.kiln",
                "--target", "cpu"], check=True, capture_output=True)
layer = re.compile(r"(/features/features\.\d+/conv/conv\.\d)")


def kiln_once():
    table = subprocess.run([os.path.join(build, "kiln-run"), "/tmp/mnv2_dw.kiln", "--device", "cpu:0",
                            "--input", f"x={x}", "--profile", runs],
                           check=True, capture_output=True, text=True).stdout
    times = {}
    for line in table.splitlines():
        # (A program's clamp bounds are literals: "constant+max+constant+min".)
        m = re.match(r"\s*([0-9.]+)\s.*conv2d\+reshape\+add\+(?:constant\+)?max\+(?:constant\+)?min"
                     r" -> \[1, (\d+), (\d+), (\d+)\].*\[(.*)\]", line)
        if m and layer.search(m.group(5)):
            times[layer.search(m.group(5)).group(1)] = (float(m.group(1)), m.group(2), m.group(3))
    return times


def ort_once():
    out = subprocess.run(["node", os.path.join(here, "ort_profile.js"), model, x, runs, threads],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, NODE_PATH=os.path.join(ort_dir, "node_modules"))).stdout
    times = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 4 and fields[0] == "Conv" and layer.search(fields[1]):
            times[layer.search(fields[1]).group(1)] = float(fields[3])
    return times


# Rounds alternate Kiln and ORT, so a drift of this shared VM's speed (up to
# 40% between minutes) hits both; each layer keeps its median over rounds.
kiln_rounds, ort_rounds = [], []
for _ in range(rounds):
    kiln_rounds.append(kiln_once())
    ort_rounds.append(ort_once())
kiln = {k: (statistics.median(r[k][0] for r in kiln_rounds),) + v[1:]
        for k, v in kiln_rounds[0].items()}
ort_times = {k: statistics.median(r[k] for r in ort_rounds if k in r) for k in ort_rounds[0]}

# The depthwise layers: features.1's first conv, every later block's second.
depthwise = [k for k in kiln if k.endswith("features.1/conv/conv.0") or
             (k.endswith("conv.1") and not k.startswith("/features/features.1/"))]
print(f"{threads} threads; medians of {runs} runs, median of {rounds} alternating rounds, "
      "microseconds per layer")
print("| layer | output | Kiln | ONNX Runtime | Kiln / ORT |")
print("|---|---|---|---|---|")
total_kiln = total_ort = 0
for k in sorted(depthwise, key=lambda s: [int(n) for n in re.findall(r"\d+", s)]):
    if k not in ort_times:
        continue
    t, c, size = kiln[k]
    total_kiln += t
    total_ort += ort_times[k]
    print(f"| {k.replace('/features/', '')} | {c} x {size}x{size} | {t:.1f} | {ort_times[k]:.0f} | "
          f"{t / ort_times[k]:.2f}x |")
print(f"| all depthwise | | {total_kiln:.0f} | {total_ort:.0f} | {total_kiln / total_ort:.2f}x |")
