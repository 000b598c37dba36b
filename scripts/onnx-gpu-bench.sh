#!/usr/bin/env bash
# ONNX networks at batch 1 on a GPU machine without the compiler (the lent
# H200): kiln-run on .kiln files compiled here from the exported models,
# next to the same networks in PyTorch CUDA.
#
# Here:  scripts/onnx-gpu-bench.sh dump DIR [names...]
#   DIR from bench/export_onnx_networks.py; compiles each NAME.onnx for the
#   H200's limits into .dev/onnx (with its input) and fetches the Vulkan
#   loader into .gl. The device's carry limit (64 MiB) may need two dumps.
# There (carry .gl, .dev/onnx, build/bin/kiln-run):  scripts/onnx-gpu-bench.sh run
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. "$root/scripts/vulkan-loader.sh"
case "${1:-}" in
dump)
  src=${2:?usage: scripts/onnx-gpu-bench.sh dump DIR [names...]}
  shift 2
  names=("$@")
  [ ${#names[@]} -gt 0 ] || names=(resnet18 mobilenet_v2 squeezenet1_1 encoder)
  rm -rf .dev/onnx && mkdir -p .dev/onnx
  export KILN_GPU_LIMITS=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132
  for n in "${names[@]}"; do
    build/bin/kiln-compile "$src/$n.onnx" -o ".dev/onnx/$n.kiln" --target vulkan
    cp "$src/${n}_x.npy" .dev/onnx/
  done
  fetch_vulkan_loader
  ;;
run)
  install_vulkan_loader
  export XDG_CACHE_HOME=/tmp/kiln-cache
  : > /tmp/kiln-onnx.log
  for k in .dev/onnx/*.kiln; do
    n=$(basename "$k" .kiln)
    build/bin/kiln-run "$k" --device vulkan:0 --input x=.dev/onnx/${n}_x.npy --benchmark 300 |
      sed "s|^|$n.kiln: |" | tee -a /tmp/kiln-onnx.log
  done
  python3 bench/torch_networks_cuda.py /tmp/kiln-onnx.log
  ;;
*)
  echo "usage: scripts/onnx-gpu-bench.sh dump DIR [names...]|run" >&2
  exit 2
  ;;
esac
