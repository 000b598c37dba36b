#!/usr/bin/env bash
# Hopper's warpgroup MMA (wgmma) reached through Vulkan: the f16
# 4096^3 matmul as PTX (bench/wgmma/make_ptx.py) launched by the NVIDIA
# driver's VK_NVX_binary_import (bench/wgmma/wgmma_gemm.cpp: buffer device
# addresses as the kernel's pointers), and the same PTX through CUDA's driver
# API (bench/wgmma/cuda_launch.py) with and without more shared memory per
# CTA than Vulkan allows, next to cuBLAS. A prototype outside Kiln's
# compiler: it measures whether this path could reach 0.70x of cuBLAS.
# Here:  scripts/wgmma-gpu.sh dump   (writes .dev/wgmma, fetches the loader)
# There: scripts/wgmma-gpu.sh run    (carry .gl and .dev/wgmma)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. "$root/scripts/vulkan-loader.sh"
case "${1:-}" in
dump)
  fetch_vulkan_loader
  rm -rf .dev/wgmma && mkdir -p .dev/wgmma
  /usr/bin/python3 bench/wgmma/make_ptx.py .dev/wgmma
  g++ -O2 -std=c++17 bench/wgmma/wgmma_gemm.cpp -o .dev/wgmma/wgmma_gemm -lvulkan
  cat .dev/wgmma/variants.txt
  ;;
run)
  install_vulkan_loader
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  cd .dev/wgmma
  echo "== through Vulkan (VK_NVX_binary_import), one process per variant"
  while read -r v bm bn smem rest; do
    regs=$(/usr/local/cuda/bin/ptxas -arch=sm_90a -v "$v.ptx" -o /tmp/wgmma.cubin 2>&1 |
      grep -o "Used [0-9]* registers" | head -1 || true)
    printf '%s (%s, %s B shared)\n' "$v" "$regs" "$smem"
    timeout 60 ./wgmma_gemm . 4096 4096 4096 200 "$v" | grep -v '^   C\[' || true
  done < variants.txt
  cd "$root"
  echo "== the same PTX through CUDA's driver API; then padded to fewer CTAs per SM"
  /usr/bin/env python3 bench/wgmma/cuda_launch.py .dev/wgmma 4096
  awk '$4 <= 49152' .dev/wgmma/variants.txt > /tmp/wgmma-small.txt
  mkdir -p /tmp/wgmma-small && cp .dev/wgmma/*.ptx /tmp/wgmma-small/ && cp /tmp/wgmma-small.txt /tmp/wgmma-small/variants.txt
  /usr/bin/env python3 bench/wgmma/cuda_launch.py /tmp/wgmma-small 4096 80000,116000 | tail -n +2
  ;;
*)
  echo "usage: $0 dump|run" >&2
  exit 2
  ;;
esac
