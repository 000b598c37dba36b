#!/usr/bin/python3
"""One command for the CPU comparison: runs kiln-bench-cpu and the same chain
through PyTorch (Debian's python3-torch: apt-get install python3-torch) and
prints GB/s side by side with the ratios.

    /usr/bin/python3 bench/compare_cpu.py [build dir]
"""
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "build")
out = subprocess.run(
    [os.path.join(build, "bin", "kiln-bench-cpu"), "--benchmark_format=json",
     "--benchmark_min_time=1"], check=True, capture_output=True, text=True).stdout
rows = {b["name"].split("/")[0]: b["bytes_per_second"] / 1e9
        for b in json.loads(out)["benchmarks"]}

try:
    torch_out = subprocess.run(["/usr/bin/python3", os.path.join(here, "torch_chain.py")],
                               check=True, capture_output=True, text=True).stdout
    rows["PyTorch eager (CPU)"] = float(torch_out.rsplit(",", 1)[1].split()[0])
    print(torch_out.strip())
except (subprocess.CalledProcessError, FileNotFoundError, ValueError) as error:
    print(f"PyTorch not measured ({error}); install it with: apt-get install python3-torch")

limit = rows.get("BM_AddLoop")
fused = rows["BM_KilnCpuFused"]
print(f"{'':28} {'GB/s':>8} {'vs add loop':>12} {'Kiln fused is':>14}")
for name, gbs in rows.items():
    share = f"{100 * gbs / limit:.0f}%" if limit else ""
    print(f"{name:28} {gbs:8.2f} {share:>12} {fused / gbs:13.1f}x")
