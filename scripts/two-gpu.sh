#!/usr/bin/env bash
# The two-GPU measurements in one call of a two-GPU machine (`nvidia-h200-x2`): identity,
# the hard-coded second GPU, copies between the GPUs and the split
# transformer stack, with the compiler there (scripts/jit-gpu.sh's kit).
#
# Here:  scripts/two-gpu.sh pack
#   the kit of scripts/jit-gpu.sh plus kiln-bench-transfer and
#   kiln-bench-aot-blocks (which compiles the stack there, for those GPUs).
# There (carry .gl and .dev/jit):
#   scripts/two-gpu.sh run
#   one logical device per GPU (KILN_VIRTUAL_DEVICES=1), so vulkan:1 is the
#   second GPU; on a one-GPU machine KILN_VIRTUAL_DEVICES=2 rehearses it on
#   two logical devices of the one. Writes $OUT/two-gpu-*.log.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
case "${1:-}" in
pack)
  scripts/jit-gpu.sh pack build/bin/kiln-bench-transfer build/bin/kiln-bench-aot-blocks
  ;;
run)
  out=${OUT:-/tmp/kiln-two-gpu}
  mkdir -p "$out"
  export KILN_VIRTUAL_DEVICES=${KILN_VIRTUAL_DEVICES:-1}
  nvidia-smi -L || true
  nvidia-smi topo -m || true
  nvidia-smi nvlink --status 2>/dev/null | head -n 20 || true
  # Unpacks the kit and runs every unit test on these GPUs (the seeds'
  # scenarios, SplitModel, PeerTransferTest and every OnEveryDevice test
  # on each GPU).
  scripts/jit-gpu.sh run | tail -n 12
  export LD_LIBRARY_PATH=/tmp/kiln-jit/lib PATH=/tmp/kiln-jit/bin:$PATH
  export XDG_CACHE_HOME=/tmp/kiln-two-gpu-cache
  echo "== identity and the hard-coded second GPU (examples/devices.cpp)"
  build/bin/kiln-example-devices 2>&1 | tee "$out/two-gpu-devices.log" | tail -n 12
  echo "== copies between vulkan:0 and vulkan:1"
  build/bin/kiln-bench-transfer --benchmark_min_time=0.5 2>&1 | tee "$out/two-gpu-transfer.log" |
    grep -E "^BM_" | head -n 40
  echo "== the transformer stack split 2/2 against whole on vulkan:0"
  dir=/tmp/kiln-split
  rm -rf $dir && mkdir -p $dir
  build/bin/kiln-bench-aot-blocks $dir --split on
  run() { # kiln file, devices, micro-batches
    build/bin/kiln-run "$dir/$1" --device "$2" --input x=$dir/transformer_stack_x.npy \
      --benchmark 20 --micro-batches "$3" 2>&1 | grep "per batch"
  }
  for round in 1 2; do
    for m in 1 8; do
      echo "round $round, $m micro-batches: one GPU: $(run transformer_stack_one.kiln vulkan:0 $m)"
      echo "round $round, $m micro-batches: split:   $(run transformer_stack_split.kiln vulkan:0,vulkan:1 $m)"
    done
  done | tee "$out/two-gpu-split.log"
  build/bin/kiln-run $dir/transformer_stack_one.kiln --device vulkan:0 \
    --input x=$dir/transformer_stack_x.npy --output y=$dir/one.npy >/dev/null
  build/bin/kiln-run $dir/transformer_stack_split.kiln --device vulkan:0,vulkan:1 \
    --input x=$dir/transformer_stack_x.npy --output y=$dir/split.npy >/dev/null
  if cmp $dir/one.npy $dir/split.npy; then
    echo "split output equals the one-GPU output byte for byte"
  else
    echo "split output DIFFERS from the one-GPU output"
  fi
  ;;
*)
  echo "usage: $0 pack | run" >&2
  exit 2
  ;;
esac
