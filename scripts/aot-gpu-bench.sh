#!/usr/bin/env bash
# Model latency at batch 1 on a GPU machine without the compiler (the lent
# H200): kiln-run on .kiln files next to the same blocks in PyTorch.
#
# Here (with the compiler):  scripts/aot-gpu-bench.sh dump
#   compiles bench/aot_blocks.cpp's blocks for the H200's limits into
#   .dev/aot (with weights and inputs as .npy) and fetches the Vulkan loader
#   packages into .gl.
# There (carry .gl, .dev/aot, build/bin/kiln-run):  scripts/aot-gpu-bench.sh run
#   (and `ab`, carrying .dev/aot-nosplit too: the same blocks with every
#   GEMM's k split taken out, rounds of both in one session; `ab aot
#   aot-tuned` after `tuned` here)
# Half precision, here:  scripts/aot-gpu-bench.sh half-dump
#   the same blocks in f16 at batch 1 and 32 for the H200 with cooperative
#   matrices, into .dev/aot-half; there (carry .gl, .dev/aot-half,
#   build/bin/kiln-run):  scripts/aot-gpu-bench.sh half [DIR under .dev]
#   checks and times them next to PyTorch's f16 blocks (eager, compiled);
#   `half-tuned` here compiles them with tuning records (tune-gpu.sh
#   dump-half) into .dev/aot-half-tuned; `half-ab A B` there times two
#   builds of them (.dev/A, .dev/B) in alternating rounds.
# Here, after scripts/tune-gpu.sh run/import:  scripts/aot-gpu-bench.sh tuned
#   compiles the blocks again with the tuning records into .dev/aot-tuned.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. "$root/scripts/vulkan-loader.sh"
case "${1:-}" in
dump)
  rm -rf .dev/aot .dev/aot-nosplit
  # The H200's limits (TOOLCHAIN.md); lavapipe only compiles here. A cache
  # of its own: the default configs, whatever this machine's store holds.
  export KILN_GPU_LIMITS=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132
  cache=$(mktemp -d)
  KILN_CACHE_DIR=$cache/default build/bin/kiln-bench-aot-blocks .dev/aot
  # The same blocks with every GEMM's k split taken out (the A/B of `ab`):
  # tuning records pin each split kernel to its config without split_k.
  for m in transformer resnet_block; do
    KILN_CACHE_DIR=$cache/nosplit build/bin/kiln-tune .dev/aot/$m.mlir --device vulkan:0 \
      --emit-candidates $cache/emit-$m | tail -n 1
  done
  python3 bench/pin_configs.py $cache/nosplit.json split_k $cache/emit-*
  KILN_CACHE_DIR=$cache/nosplit build/bin/kiln-tune --import $cache/nosplit.json
  KILN_CACHE_DIR=$cache/nosplit build/bin/kiln-bench-aot-blocks .dev/aot-nosplit >/dev/null
  rm -rf "$cache"
  unset KILN_GPU_LIMITS
  # The ResNet block's CPU code, for the host CPU there: x86-64-v3 (runs on
  # any AVX2 machine) and this machine's own ISA (refused where it lacks a
  # feature, with the reason).
  for isa in x86-64-v3 host; do
    build/bin/kiln-bench-aot-blocks /tmp/aot-cpu-$isa --target cpu --cpu-isa $isa >/dev/null
    cp /tmp/aot-cpu-$isa/resnet_block.kiln .dev/aot/resnet_block_cpu_$isa.kiln
  done
  fetch_vulkan_loader
  ;;
run)
  install_vulkan_loader
  export XDG_CACHE_HOME=/tmp/kiln-cache
  : > /tmp/kiln-run.log
  for m in transformer resnet_block; do
    p=${m%_block}
    build/bin/kiln-run .dev/aot/$m.kiln --device vulkan:0 --input x=.dev/aot/${p}_x.npy \
      --output y=/tmp/${p}_y_kiln.npy --benchmark 500 | sed "s|^|$m.kiln: |" | tee -a /tmp/kiln-run.log
    cp /tmp/${p}_y_kiln.npy .dev/aot/ 2>/dev/null || cp /tmp/${p}_y_kiln.npy /tmp/aot-out-${p}.npy
  done
  for m in transformer resnet_block; do
    p=${m%_block}
    build/bin/kiln-run .dev/aot/$m.kiln --device vulkan:0 --input x=.dev/aot/${p}_x.npy --profile 50
  done
  for isa in x86-64-v3 host; do
    build/bin/kiln-run .dev/aot/resnet_block_cpu_$isa.kiln --device cpu:0 \
      --input x=.dev/aot/resnet_x.npy --output y=/tmp/resnet_y_cpu.npy --benchmark 20 2>&1 |
      sed "s|^|resnet_block cpu code ($isa) on $(nproc) threads: |" || true
  done
  KILN_REPLAY=0 build/bin/kiln-run .dev/aot/transformer.kiln --device vulkan:0 \
    --input x=.dev/aot/transformer_x.npy --benchmark 200 | sed 's|^|step by step (KILN_REPLAY=0) transformer: |'
  python3 bench/torch_blocks_cuda.py .dev/aot /tmp/kiln-run.log
  ;;
half-dump)
  rm -rf .dev/aot-half
  cache=$(mktemp -d)
  KILN_CACHE_DIR=$cache KILN_GPU_LIMITS=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132,coop=1,coopbf16=1 \
    build/bin/kiln-bench-aot-blocks .dev/aot-half --half on
  rm -rf "$cache"
  # Only what the f16 run reads travels.
  rm -f .dev/aot-half/{transformer,resnet_block}.kiln .dev/aot-half/*.mlir .dev/aot-half/*_y_jit.npy
  fetch_vulkan_loader
  ;;
half-tuned)
  # The f16 blocks with the tuning records of scripts/tune-gpu.sh dump-half
  # / run / import, into .dev/aot-half-tuned (run there: `half aot-half-tuned`).
  rm -rf .dev/aot-half-tuned
  KILN_CACHE_DIR=${KILN_CACHE_DIR:-$root/.dev/tune-cache} \
  KILN_GPU_LIMITS=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132,coop=1 \
    build/bin/kiln-bench-aot-blocks .dev/aot-half-tuned --half on
  rm -f .dev/aot-half-tuned/{transformer,resnet_block}.kiln .dev/aot-half-tuned/*.mlir \
    .dev/aot-half-tuned/*_y_jit.npy
  ;;
half-ab)
  # Two builds of the f16 blocks (.dev/A and .dev/B, as half-dump writes
  # them), rounds alternating in one session, the same inputs (A's).
  install_vulkan_loader
  export XDG_CACHE_HOME=/tmp/kiln-cache
  a=${2:?half-ab A B} b=${3:?half-ab A B}
  for round in 1 2 3; do
    for bt in 1 32; do
      for m in transformer resnet_block; do
        p=${m%_block}
        [ -f .dev/$a/${m}_f16_b$bt.kiln ] || continue
        for dir in $a $b; do
          echo "round $round ${m}_f16_b$bt $dir: $(build/bin/kiln-run .dev/$dir/${m}_f16_b$bt.kiln \
            --device vulkan:0 --input x=.dev/$a/${p}_f16_x_b$bt.npy \
            --output y=/tmp/${p}_$dir.npy --benchmark 300 | tail -n 1)"
        done
        cmp /tmp/${p}_$a.npy /tmp/${p}_$b.npy >/dev/null && echo "${m}_f16_b$bt: same output bytes" ||
          echo "${m}_f16_b$bt: outputs differ"
      done
    done
  done
  ;;
half)
  install_vulkan_loader
  export XDG_CACHE_HOME=/tmp/kiln-cache
  dir=.dev/${2:-aot-half} log=${OUT:-/tmp}/kiln-run-half.log
  : > "$log"
  for t in f16 bf16; do
    for b in 1 32; do
      for m in transformer resnet_block; do
        p=${m%_block}
        [ -f $dir/${m}_${t}_b$b.kiln ] || continue
        build/bin/kiln-run $dir/${m}_${t}_b$b.kiln --device vulkan:0 --input x=$dir/${p}_${t}_x_b$b.npy \
          --output y=$dir/${p}_y_${t}_b$b.npy --benchmark 300 | sed "s|^|${m}_${t}_b$b.kiln: |" | tee -a "$log"
      done
    done
  done
  for t in f16 bf16; do
    for b in 1 32; do
      for m in transformer resnet_block; do
        p=${m%_block}
        [ -f $dir/${m}_${t}_b$b.kiln ] || continue
        echo "== profile ${m}_${t}_b$b"
        build/bin/kiln-run $dir/${m}_${t}_b$b.kiln --device vulkan:0 --input x=$dir/${p}_${t}_x_b$b.npy \
          --profile 50
      done
    done
  done
  python3 bench/torch_blocks_cuda.py $dir "$log" --half
  ;;
tuned)
  rm -rf .dev/aot-tuned
  KILN_CACHE_DIR=${KILN_CACHE_DIR:-$root/.dev/tune-cache} \
  KILN_GPU_LIMITS=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132 \
    build/bin/kiln-bench-aot-blocks .dev/aot-tuned
  ;;
ab)
  # Two builds of the blocks, rounds alternating in one session (same
  # inputs): by default k split against not; `ab aot aot-tuned` compares
  # the defaults with the tuned configs.
  install_vulkan_loader
  export XDG_CACHE_HOME=/tmp/kiln-cache
  a=${2:-aot} b=${3:-aot-nosplit}
  for round in 1 2 3; do
    for m in transformer resnet_block; do
      p=${m%_block}
      for dir in $a $b; do
        echo "round $round $m $dir: $(build/bin/kiln-run .dev/$dir/$m.kiln --device vulkan:0 \
          --input x=.dev/aot/${p}_x.npy --output y=/tmp/${p}_y_$dir.npy --benchmark 1000 | tail -n 1)"
      done
      cmp /tmp/${p}_y_$a.npy /tmp/${p}_y_$b.npy >/dev/null && echo "$m: same output bytes" ||
        python3 -c "import numpy as n; x=n.load('/tmp/${p}_y_$a.npy'); y=n.load('/tmp/${p}_y_$b.npy'); print('$m: max |$a - $b| =', abs(x-y).max())"
    done
  done
  for m in transformer resnet_block; do
    p=${m%_block}
    for dir in $a $b; do
      echo "== profile $m $dir"
      build/bin/kiln-run .dev/$dir/$m.kiln --device vulkan:0 --input x=.dev/aot/${p}_x.npy --profile 50
    done
  done
  ;;
startup)
  # Cold start against warm start, a fresh kiln-run process each: an empty
  # cache directory, then the one the cold run filled (the driver's
  # pipeline cache, kept in Kiln's store). Wall time of the whole process,
  # and kiln-run's own --stats line.
  install_vulkan_loader
  for m in transformer resnet_block; do
    p=${m%_block}
    dir=/tmp/kiln-startup-$m
    rm -rf $dir
    for run in cold warm warm; do
      start=$(date +%s%N)
      line=$(XDG_CACHE_HOME=$dir build/bin/kiln-run .dev/aot/$m.kiln --device vulkan:0 \
        --input x=.dev/aot/${p}_x.npy --stats | grep '^start')
      end=$(date +%s%N)
      echo "$m $run: process $(( (end - start) / 1000000 )) ms; $line"
    done
  done
  ;;
*)
  echo "usage: scripts/aot-gpu-bench.sh dump|tuned|run|ab [A B]|startup|half-dump|half-tuned|half [DIR]|half-ab A B" >&2
  exit 2
  ;;
esac
