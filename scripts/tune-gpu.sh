#!/usr/bin/env bash
# Tunes kernels for a GPU machine without the compiler (an H200),
# docs/tuning.md "Tuning for another machine".
#
# Here:   scripts/tune-gpu.sh dump
#   writes the kernel table's graphs (bench/tune_graphs.cpp) and the two
#   model blocks' graphs (bench/aot_blocks.cpp), and compiles every tuning
#   candidate of every kernel for the H200's limits into .dev/tune/<graph>
#   (kiln-tune --emit-candidates).
# Or:    scripts/tune-gpu.sh dump-half
#   the same for the f16 blocks at batch 32 (kiln-bench-aot-blocks --half
#   on) with cooperative matrices (coop=1 in the limits, so their records
#   are keyed to those limits: scripts/aot-gpu-bench.sh half-tuned).
# There (carry .gl, .dev/tune, build/bin/kiln-spirv-replay):
#   scripts/tune-gpu.sh run [graph...]    times every candidate, one process
#                                         per kernel, into .dev/tune/*.times
#                                         (inputs |normal|: a batch norm's
#                                         variance gives no NaN checksum)
# Here:   scripts/tune-gpu.sh import DIR  (DIR: where the .times came back)
#   keeps the candidates whose output checksum matches the default's, and
#   stores each kernel's fastest as its tuning record (kiln-tune --import)
#   under the H200-limits fingerprint: kiln-bench-aot-blocks with the same
#   KILN_GPU_LIMITS then compiles the tuned configs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. "$root/scripts/vulkan-loader.sh"
# Records and compiled candidates live in a cache of their own.
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$root/.dev/tune-cache}
export KILN_GPU_LIMITS=${KILN_GPU_LIMITS:-subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132}
case "${1:-}" in
dump)
  rm -rf .dev/tune && mkdir -p .dev/tune/graphs
  build/bin/kiln-bench-tune-graphs .dev/tune/graphs
  build/bin/kiln-bench-aot-blocks /tmp/kiln-tune-blocks >/dev/null
  cp /tmp/kiln-tune-blocks/*.mlir .dev/tune/graphs/
  for g in .dev/tune/graphs/*.mlir; do
    name=$(basename "$g" .mlir)
    build/bin/kiln-tune "$g" --device vulkan:0 --emit-candidates ".dev/tune/$name" | tail -n 1
  done
  fetch_vulkan_loader
  ;;
dump-half)
  rm -rf .dev/tune && mkdir -p .dev/tune/graphs
  export KILN_GPU_LIMITS=$KILN_GPU_LIMITS,coop=1
  build/bin/kiln-bench-aot-blocks /tmp/kiln-tune-blocks --half on >/dev/null
  cp /tmp/kiln-tune-blocks/*_f16_b32.mlir .dev/tune/graphs/
  # The H200's driver builds a cooperative-matrix pipeline in about 1.2 s:
  # all 369 tiles of each GEMM take too long there. By default the shapes
  # that won somewhere on the H200 (bench/RESULTS.md) and every row-kernel
  # candidate; KILN_TUNE_ONLY="" emits them all.
  only=${KILN_TUNE_ONLY-"tile=128x128x32 subgroups=2x4 stages=2 | tile=128x64x32 subgroups=2x2 stages=2 \
| tile=64x128x32 subgroups=2x2 stages=2 | tile=64x64x32 subgroups=2x2 stages=2 \
| tile=64x64x64 subgroups=1x2 stages=2 | tile=128x64x32 subgroups=2x4 stages=2 \
| tile=64x64x32 subgroups=4x2 stages=2 | tile=64x128x32 subgroups=2x4 stages=2 | row"}
  for g in .dev/tune/graphs/*.mlir; do
    name=$(basename "$g" .mlir)
    build/bin/kiln-tune "$g" --device vulkan:0 --emit-candidates ".dev/tune/$name" \
      ${only:+--only "$only"} | tail -n 1
  done
  fetch_vulkan_loader
  ;;
run)
  install_vulkan_loader
  shift
  graphs=("$@")
  [ ${#graphs[@]} -gt 0 ] || graphs=($(ls -d .dev/tune/*/ | xargs -n1 basename | grep -v graphs))
  # KILN_TUNE_TIMES=$OUT on the lent machine: a run cut off by its time
  # limit still brings back every kernel it timed.
  times=${KILN_TUNE_TIMES:-.dev/tune}
  mkdir -p "$times"
  for name in "${graphs[@]}"; do
    : > "$times/$name.times"
    # One process per kernel: its candidates compared within one process.
    for hash in $(ls ".dev/tune/$name" | grep '\.kernel$' | sed 's/-[0-9]*\.kernel$//' | sort -u); do
      build/bin/kiln-spirv-replay --positive --runs "${KILN_TUNE_RUNS:-10}" $(ls .dev/tune/$name/$hash-*.kernel | sort -V) \
        | grep -v '^device' >> "$times/$name.times" || echo "replay of $name/$hash failed" >&2
    done
    echo "$name: $(wc -l < "$times/$name.times") candidates timed"
  done
  ;;
import)
  times=${2:?usage: scripts/tune-gpu.sh import DIR-with-.times}
  python3 bench/tune_import.py .dev/tune "$times" /tmp/kiln-tune-timings.json
  build/bin/kiln-tune --import /tmp/kiln-tune-timings.json
  ;;
*)
  echo "usage: scripts/tune-gpu.sh dump|dump-half|run [graph...]|import DIR" >&2
  exit 2
  ;;
esac
