#!/usr/bin/python3
"""One command for the CPU kernel table: runs kiln-bench-kernels on cpu:0 and
bench/torch_kernels.py, and prints Kiln and PyTorch side by side with the
ratios (matmul against OpenBLAS: apt-get install libopenblas0-pthread
python3-torch).

    /usr/bin/python3 bench/compare_kernels.py [build dir]
"""
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "build")
out = subprocess.run(
    [os.path.join(build, "bin", "kiln-bench-kernels"), "--benchmark_format=json",
     "--benchmark_filter=cpu:0", "--benchmark_min_time=1"],
    check=True, capture_output=True, text=True).stdout
kiln = {}
for b in json.loads(out)["benchmarks"]:
    name = b["name"].split("/")[0]
    rate = b.get("bytes/s") or b.get("FLOP/s")
    kiln[name] = (rate / 1e9, "GB/s" if "bytes/s" in b else "GFLOP/s")

torch = {}
try:
    text = subprocess.run(["/usr/bin/python3", os.path.join(here, "torch_kernels.py")],
                          check=True, capture_output=True, text=True).stdout
    print(text.splitlines()[0])
    for line in text.splitlines()[1:]:
        fields = line.split()
        torch[fields[0]] = float(fields[3])
except (subprocess.CalledProcessError, FileNotFoundError, ValueError) as error:
    print(f"PyTorch not measured ({error}); apt-get install python3-torch")

print(f"{'kernel':12} {'Kiln cpu:0':>18} {'PyTorch CPU':>18} {'Kiln/PyTorch':>13}")
for name, (rate, unit) in kiln.items():
    theirs = torch.get(name)
    other = f"{theirs:10.1f} {unit:7}" if theirs else f"{'-':>18}"
    ratio = f"{rate / theirs:12.2f}x" if theirs else f"{'-':>13}"
    print(f"{name:12} {rate:10.1f} {unit:7} {other} {ratio}")
