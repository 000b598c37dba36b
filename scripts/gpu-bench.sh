#!/usr/bin/env bash
# Measures Kiln's Vulkan kernels on a machine that has a GPU but no MLIR
# (an H200), next to PyTorch CUDA on the same chain.
#
# Here (with the compiler):   scripts/gpu-bench.sh dump
#   compiles the six-op chain of bench_ops.cpp and its op-by-op kernels into
#   .dev/kernels (KILN_DUMP_SPIRV), and the kernels of bench_kernels.cpp at
#   GPU sizes into .dev/kernels/table, and downloads the Vulkan loader
#   packages to .gl (see the device tool's README).
# There (carry .gl, .dev/kernels, build/bin/kiln-spirv-replay):
#   scripts/gpu-bench.sh run
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. "$root/scripts/vulkan-loader.sh"
case "${1:-}" in
dump)
  rm -rf .dev/kernels && mkdir -p .dev/kernels
  KILN_DUMP_SPIRV=$root/.dev/kernels build/bin/kiln-bench-ops \
    --benchmark_filter=vulkan --benchmark_min_time=0.01 >/dev/null
  mkdir -p .dev/kernels/table
  # Compiled for the H200's limits (TOOLCHAIN.md); lavapipe runs them only
  # to get them compiled, its results are not looked at.
  KILN_GPU_LIMITS=subgroup=32,invocations=1024,shared=49152,groups=2147483647 \
  KILN_BENCH_SIZES=gpu KILN_DUMP_SPIRV=$root/.dev/kernels/table build/bin/kiln-bench-kernels \
    --benchmark_filter=vulkan:0 --benchmark_min_time=0.001s >/dev/null
  ls .dev/kernels/*.kernel .dev/kernels/table/*.kernel
  fetch_vulkan_loader
  ;;
run)
  install_vulkan_loader
  # One process per kernel: in one long-lived process later kernels were
  # measured up to 5x slower on the H200 (the same kernel, the same inputs).
  for k in .dev/kernels/*.kernel; do build/bin/kiln-spirv-replay --runs 50 "$k" | tail -n 1; done
  python3 bench/torch_chain_cuda.py
  for k in .dev/kernels/table/*.kernel; do
    build/bin/kiln-spirv-replay --runs 20 "$k" | tail -n 1
  done | tee /tmp/replay.txt
  python3 bench/torch_kernels_cuda.py /tmp/replay.txt
  ;;
*)
  echo "usage: scripts/gpu-bench.sh dump|run" >&2
  exit 2
  ;;
esac
