#!/usr/bin/env bash
# The half-precision criteria in one run on an H200 without the compiler, against PyTorch CUDA in
# the same process tree: the f16 4096^3 matmul (compiled here for the H200
# with ptx=90: PTX on warpgroup MMA through CUDA) against cuBLAS, the f16
# ResNet-stage convolution (cooperative matrices) against cuDNN, and the f16
# blocks (aot-gpu-bench.sh half) against PyTorch eager and torch.compile.
#
# Here:  scripts/half-criteria-gpu.sh dump
#   writes .dev/i14 (the two .kiln files) and .dev/aot-half (the blocks),
#   fetches the Vulkan loader.
# There (carry .gl, .dev/i14, .dev/aot-half, build/bin/kiln-run):
#   scripts/half-criteria-gpu.sh run
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. "$root/scripts/vulkan-loader.sh"
limits=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132,coop=1
case "${1:-}" in
dump)
  rm -rf .dev/i14 && mkdir -p .dev/i14
  cases=$(mktemp -d) cache=$(mktemp -d)
  /usr/bin/python3 bench/half/make_cases.py "$cases"
  KILN_CACHE_DIR=$cache KILN_GPU_LIMITS=$limits,ptx=90 build/bin/kiln-compile "$cases/mm4096.mlir" \
    --target vulkan --ptx -o .dev/i14/mm4096.kiln | grep '^// entry'
  KILN_CACHE_DIR=$cache KILN_GPU_LIMITS=$limits build/bin/kiln-compile "$cases/conv_resnet.mlir" \
    --target vulkan -o .dev/i14/conv_resnet.kiln
  rm -rf "$cases" "$cache"
  scripts/aot-gpu-bench.sh half-dump
  # f16 only: with bf16 and f32 the blocks are past the device tool's carry.
  rm -f .dev/aot-half/*bf16* .dev/aot-half/*f32*
  du -sh .dev/i14 .dev/aot-half .gl
  ;;
run)
  install_vulkan_loader
  export XDG_CACHE_HOME=/tmp/kiln-cache
  cases=/tmp/i14-cases out=/tmp/i14-out
  mkdir -p "$cases" "$out"
  python3 bench/half/make_cases.py "$cases" --mm4096-inputs
  for c in mm4096 conv_resnet; do
    inputs=(--input "$cases/${c}_in0.npy" --input "$cases/${c}_in1.npy")
    build/bin/kiln-run .dev/i14/$c.kiln "${inputs[@]}" --output "$out/$c.npy"
    for round in 1 2; do
      echo "$c, round $round:"
      build/bin/kiln-run .dev/i14/$c.kiln "${inputs[@]}" --benchmark 50 --profile 20 |
        grep -E "runs on|kernel 0"
    done
  done
  python3 - "$cases" "$out" <<'PY'
import sys
import numpy as np
import torch
sys.path.insert(0, "bench")
from torch_timing import measure_cuda
cases, out = sys.argv[1], sys.argv[2]
a, b = (torch.from_numpy(np.load(f"{cases}/mm4096_in{i}.npy")).cuda() for i in (0, 1))
x, w = (torch.from_numpy(np.load(f"{cases}/conv_resnet_in{i}.npy")).cuda() for i in (0, 1))
conv = lambda: torch.nn.functional.conv2d(x, w, padding=1)
for name, fn, got, flop in [("matmul 4096^3 (cuBLAS)", lambda: a @ b, "mm4096", 2 * 4096 ** 3),
                            ("conv ResNet stage (cuDNN)", conv, "conv_resnet",
                             2 * 32 * 64 * 64 * 9 * 56 * 56)]:
    want = fn().float().cpu().numpy()
    kiln = np.load(f"{out}/{got}.npy").astype(np.float32)
    err = np.abs(kiln - want).max() / max(np.abs(want).max(), 1e-30)
    times = [measure_cuda(fn) * 1e3 for _ in range(2)]
    print(f"torch {torch.__version__} f16 {name}: {times[0]:.4f} / {times[1]:.4f} ms, "
          f"{flop / min(times) * 1e-9:.0f} TFLOP/s; Kiln's result: max |error| / max |value| = {err:.2e}")
PY
  scripts/aot-gpu-bench.sh half
  ;;
*)
  echo "usage: $0 dump | run" >&2
  exit 2
  ;;
esac
