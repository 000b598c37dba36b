#!/usr/bin/python3
"""The Tensor-API networks (bench/bench_networks.cpp, written in
examples/networks/Networks.h) against PyTorch and ONNX Runtime on this CPU,
side by side in one run:

    /usr/bin/python3 bench/compare_networks.py [runs] [--devices cpu:0,vulkan:0]

1. Accuracy: each network is built in PyTorch (torchvision's resnet18 and
   mobilenet_v2 and squeezenet1_1, torch.nn.TransformerEncoderLayer(768, 12, 3072, gelu,
   batch_first)) with seeded random weights; its state_dict goes to .npy
   files that `kiln-bench-networks --check` loads into the same network
   written with the Tensor API. The outputs are compared on each device:
   largest |Kiln - PyTorch| over the largest |PyTorch|, and the kernel count.
2. Latency at batch 1 and 8, with 1 and 2 threads, in alternating rounds:
   kiln-bench-networks (Google Benchmark, KILN_NUM_THREADS; recording each
   inference, and as a Program compiled once), PyTorch eager
   (torch.set_num_threads) and ONNX Runtime's CPU build on the model exported
   from PyTorch (bench/ort_run.js; npm install --ignore-scripts
   onnxruntime-node in ORT_DIR, default /tmp/ort). Medians per inference.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_timing import median  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
build = os.path.join(here, "..", "build", "bin")
args = [a for a in sys.argv[1:] if not a.startswith("--")]
runs = int(args[0]) if args else 20
devices = ["cpu:0"]
for i, a in enumerate(sys.argv):
    if a == "--devices":
        devices = sys.argv[i + 1].split(",")
        args = [x for x in args if x != sys.argv[i + 1]]
ort_dir = os.environ.get("ORT_DIR", "/tmp/ort")
work = tempfile.mkdtemp(prefix="kiln-networks-")

NETS = {  # name: (builder, input shape at batch b, Google Benchmark name)
    "resnet18": (lambda: torchvision.models.resnet18(), lambda b: (b, 3, 224, 224), "ResNet18"),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), lambda b: (b, 3, 224, 224),
                     "MobileNetV2"),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(), lambda b: (b, 3, 224, 224),
                      "SqueezeNet11"),
    "encoder": (lambda: torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0,
                                                         activation="gelu", batch_first=True),
                lambda b: (b, 128, 768), "EncoderLayer"),
}


def model(name):
    torch.manual_seed(0)
    m = NETS[name][0]().eval()
    # Batch norm statistics away from their defaults, so they are exercised.
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.1, 0.1)
    return m


def accuracy():
    print("| network | device | kernels | max abs diff / max abs PyTorch |")
    print("|---|---|---|---|")
    for name in NETS:
        m = model(name)
        folder = os.path.join(work, name)
        os.makedirs(folder, exist_ok=True)
        for key, value in m.state_dict().items():
            if value.dtype == torch.float32:
                numpy.save(os.path.join(folder, key + ".npy"), value.numpy())
        torch.manual_seed(1)
        x = torch.randn(NETS[name][1](1))
        numpy.save(os.path.join(folder, "x.npy"), x.numpy())
        with torch.no_grad():
            want = m(x).numpy()
        for device in devices:
            out = subprocess.run([os.path.join(build, "kiln-bench-networks"), "--check", name,
                                  folder, device], capture_output=True, text=True)
            if out.returncode:
                print(f"| {name} | {device} | failed: {out.stderr.strip()[:200]} | |")
                continue
            kernels = re.search(r"([0-9]+) kernels", out.stdout).group(1)
            got = numpy.load(os.path.join(folder, "kiln_y.npy"))
            rel = abs(got - want).max() / abs(want).max()
            print(f"| {name} | {device} | {kernels} | {rel:.2g} |", flush=True)


def torch_ms(m, x, threads):
    torch.set_num_threads(threads)
    with torch.no_grad():
        return median(lambda: m(x), runs) * 1e3


def kiln_ms(name, batch, threads, suffix=""):
    out = subprocess.run([os.path.join(build, "kiln-bench-networks"),
                          f"--benchmark_filter=^{NETS[name][2]}{suffix}/{batch}/",
                          f"--benchmark_repetitions={runs}", "--benchmark_min_time=0.01",
                          "--benchmark_format=json"], capture_output=True, text=True, check=True,
                         env=dict(os.environ, KILN_NUM_THREADS=str(threads))).stdout
    data = json.loads(out)
    for b in data["benchmarks"]:
        if b.get("aggregate_name") == "median":
            return b["real_time"]
    raise RuntimeError("no median in kiln-bench-networks' output")


def ort_ms(name, batch, threads):
    m = model(name)
    path = os.path.join(work, f"{name}_{batch}.onnx")
    x = os.path.join(work, f"{name}_{batch}_x.npy")
    if not os.path.exists(path):
        inp = torch.randn(NETS[name][1](batch))
        numpy.save(x, inp.numpy())
        # With gradients on: under no_grad the encoder takes PyTorch's fused
        # fast path, which has no ONNX export.
        torch.onnx.export(m, inp, path, input_names=["x"], opset_version=14)
    out = subprocess.run(["node", os.path.join(here, "ort_run.js"), path, x, str(runs),
                          str(threads), os.path.join(work, "ort.bin")], capture_output=True,
                         text=True, env=dict(os.environ,
                                             NODE_PATH=os.path.join(ort_dir, "node_modules")))
    if out.returncode:
        return None
    return float(re.search(r"median ([0-9.]+)", out.stdout).group(1))


def latency():
    print(f"\nmedians of {runs} runs, ms per inference; ratios are Kiln / peer")
    print("| network | batch | threads | Kiln | Kiln Program | PyTorch | ONNX Runtime | Kiln/PyTorch "
          "| Kiln/ORT | Program/ORT |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in NETS:
        m = model(name)
        for batch in (1, 8):
            x = torch.randn(NETS[name][1](batch))
            for threads in (1, 2):
                k = kiln_ms(name, batch, threads)
                kp = kiln_ms(name, batch, threads, "Program")
                p = torch_ms(m, x, threads)
                o = ort_ms(name, batch, threads)
                o_text = f"{o:.2f}" if o else "-"
                o_ratio = f"{k / o:.2f}x" if o else "-"
                op_ratio = f"{kp / o:.2f}x" if o else "-"
                print(f"| {name} | {batch} | {threads} | {k:.2f} | {kp:.2f} | {p:.2f} | {o_text} | "
                      f"{k / p:.2f}x | {o_ratio} | {op_ratio} |", flush=True)


accuracy()
if "--accuracy-only" not in sys.argv:
    latency()
