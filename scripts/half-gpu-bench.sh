#!/usr/bin/env bash
# Half-precision matmuls on cooperative matrices, on a GPU machine without
# the compiler (an H200).
#
# Here:  scripts/half-gpu-bench.sh dump
#   writes bench/half/make_cases.py's cases to .dev/half, compiles each for
#   the H200's limits twice, with cooperative matrices (coop=1) and without
#   (the tiled f32-FMA form), and the coop_gemm candidates of the 4096^3
#   matmul and the linear layer (kiln-tune --emit-candidates;
#   KILN_HALF_ONLY="words" narrows them); fetches the Vulkan loader.
# There (carry .gl, .dev/half, build/bin/kiln-run, build/bin/kiln-spirv-replay):
#   scripts/half-gpu-bench.sh run
#   runs every case both ways and checks the outputs (bench/half/check.py:
#   exact on small integers), profiles the 4096^3 matmul both ways next to
#   PyTorch's f16 matmul (cuBLAS), and times the candidates.
# Ceilings (bench/half/make_ceiling.py: kernels that only multiply, from
# registers and from shared memory): `dump` lowers them too (.dev/half/
# ceiling), `run` replays them before the candidates; likewise the 4096^3
# matmul on NVIDIA's workgroup-scope matrices (bench/half/make_wgscope.py,
# .dev/half/wgscope) next to Kiln's compiled default.
# Tensor-core paths (`paths-dump` here, `paths` there; carry .gl, .dev/paths,
# build/bin/kiln-spirv-replay): which instruction the driver makes of
# cooperative matrices (its internal representations of the 2 x 2, 4 x 4
# ceiling kernels and of the compiled 4096^3 default, next to
# bench/half/hmma_peak.cu's mma.sync rate), and what whole Triton GEMMs
# reach on each path (bench/half/mma_paths.py) next to cuBLAS.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. "$root/scripts/vulkan-loader.sh"
limits=subgroup=32,invocations=1024,shared=49152,groups=2147483647,units=132
case "${1:-}" in
dump)
  rm -rf .dev/half && mkdir -p .dev/half
  /usr/bin/python3 bench/half/make_cases.py .dev/half/cases
  cache=$(mktemp -d)
  for g in .dev/half/cases/*.mlir; do
    name=$(basename "$g" .mlir)
    KILN_CACHE_DIR=$cache KILN_GPU_LIMITS=$limits,coop=1,coopbf16=1 \
      build/bin/kiln-compile "$g" --target vulkan -o .dev/half/${name}_coop.kiln
    KILN_CACHE_DIR=$cache KILN_GPU_LIMITS=$limits,coop=0 \
      build/bin/kiln-compile "$g" --target vulkan -o .dev/half/${name}_tiled.kiln
  done
  for g in mm4096 linear_gelu conv_resnet; do
    KILN_CACHE_DIR=$cache KILN_GPU_LIMITS=$limits,coop=1 build/bin/kiln-tune \
      .dev/half/cases/$g.mlir --device vulkan:0 --emit-candidates .dev/half/candidates-$g \
      ${KILN_HALF_ONLY:+--only "$KILN_HALF_ONLY"} | tail -n 1 || true
  done
  # The f16 elementwise kernel's forms (halves one by one, or 4 at a time).
  KILN_CACHE_DIR=$cache KILN_GPU_LIMITS=$limits build/bin/kiln-tune .dev/half/cases/add_relu_f16.mlir \
    --device vulkan:0 --emit-candidates .dev/half/candidates-add_relu_f16 | tail -n 1
  rm -rf "$cache"
  /usr/bin/python3 bench/half/make_ceiling.py .dev/half/ceiling
  for f in .dev/half/ceiling/*.mlir; do
    n=${f%.mlir}
    build/bin/kiln-opt "$f" --kiln-linalg-to-spirv | build/bin/kiln-spirv-check --output "$n.spv" >/dev/null
    { echo "spirv $(basename "$n").spv"; echo "entry ceiling_kernel"; cat "$n.info"; } > "$n.kernel"
  done
  # Workgroup-scope matrices (VK_NV_cooperative_matrix2), next to the
  # compiled default of the 4096^3 matmul (bench/half/make_wgscope.py).
  /usr/bin/python3 bench/half/make_wgscope.py .dev/half/wgscope build/bin
  cache=$(mktemp -d) dump=$(mktemp -d)
  KILN_CACHE_DIR=$cache KILN_DUMP_SPIRV=$dump KILN_GPU_LIMITS=$limits,coop=1 \
    build/bin/kiln-compile .dev/half/cases/mm4096.mlir --target vulkan -o "$cache/mm.kiln"
  cp "$dump"/*.spv .dev/half/wgscope/kiln_default.spv
  { grep -v '^spirv' "$dump"/*.kernel; echo "spirv kiln_default.spv"; echo "halves 0 1 2";
    echo "outputs 2"; echo "label kiln_default $((2 * 4096 ** 3)) FLOP"; } \
    > .dev/half/wgscope/kiln_default.kernel
  rm -rf "$cache" "$dump"
  fetch_vulkan_loader
  ;;
run)
  install_vulkan_loader
  export XDG_CACHE_HOME=/tmp/kiln-cache
  python3 bench/half/make_cases.py .dev/half/cases --mm4096-inputs
  # Outputs here; candidate times to $OUT (on the lent machine: what
  # comes back).
  out=/tmp/half-out times=${OUT:-/tmp/half-out}
  mkdir -p "$out" "$times"
  for k in .dev/half/*_coop.kiln .dev/half/*_tiled.kiln; do
    name=$(basename "$k" .kiln)
    case=${name%_*}
    inputs=()
    for f in $(ls .dev/half/cases/${case}_in*.npy | sort -V); do inputs+=(--input "$f"); done
    build/bin/kiln-run "$k" --device vulkan:0 "${inputs[@]}" --output "$out/$name.npy" \
      || echo "$name: kiln-run failed"
  done
  python3 bench/half/check.py .dev/half/cases "$out" || echo "check: mismatches"
  if [ -d .dev/half/ceiling ]; then
    build/bin/kiln-spirv-replay --runs 5 $(ls .dev/half/ceiling/*.kernel | sort) >/tmp/ceiling.txt \
      || echo "ceiling replay failed"
    grep -v '^device' /tmp/ceiling.txt || true
  fi
  if [ -d .dev/half/wgscope ]; then
    # One process each (later kernels in one process time slow).
    for k in .dev/half/wgscope/*.kernel; do
      build/bin/kiln-spirv-replay --statistics --runs 20 "$k" | grep -v '^device' \
        | sed 's/Binary Size=[0-9]*, Stack Size=0, Local Memory Size=[0-9]*, //' \
        || echo "$k: replay failed"
    done
  fi
  for c in mm4096 mm4096_bf16 conv_resnet add_relu_f32 add_relu_f16; do
    for v in coop tiled; do
      # (Elementwise kernels: one form.)
      case $c/$v in add_relu_*/tiled) continue ;; esac
      echo "$c $v:"
      build/bin/kiln-run .dev/half/${c}_$v.kiln --device vulkan:0 \
        --input .dev/half/cases/${c}_in0.npy --input .dev/half/cases/${c}_in1.npy --profile 20 | grep "kernel 0"
    done
  done
  python3 - <<'PY'
import sys
import torch
sys.path.insert(0, "bench")
from torch_timing import measure_cuda
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
t = measure_cuda(lambda: a @ b)
print(f"torch {torch.__version__} f16 matmul 4096^3: {t * 1e3:.4f} ms, {2 * 4096 ** 3 / t / 1e12:.1f} TFLOP/s")
a, b = a.bfloat16(), b.bfloat16()
t = measure_cuda(lambda: a @ b)
print(f"torch bf16 matmul 4096^3: {t * 1e3:.4f} ms, {2 * 4096 ** 3 / t / 1e12:.1f} TFLOP/s")
x = torch.randn(32, 64, 56, 56, device="cuda", dtype=torch.float16)
w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16)
t = measure_cuda(lambda: torch.nn.functional.conv2d(x, w, padding=1))
flop = 2 * 32 * 64 * 64 * 9 * 56 * 56
print(f"torch f16 conv ResNet stage (cuDNN, NCHW): {t * 1e3:.4f} ms, {flop / t / 1e12:.1f} TFLOP/s")
PY
  for g in mm4096 linear_gelu conv_resnet add_relu_f16; do
    [ -d .dev/half/candidates-$g ] || continue
    build/bin/kiln-spirv-replay --runs 20 $(ls .dev/half/candidates-$g/*.kernel | sort -V) | grep -v '^device' \
      > "$times/$g.times" || echo "candidate replay of $g failed"
    cp .dev/half/candidates-$g/candidates.json "$times/$g.json"
  done
  ;;
paths-dump)
  rm -rf .dev/paths && mkdir -p .dev/paths
  /usr/bin/python3 bench/half/make_ceiling.py .dev/paths/all
  for mode in reg smem bar; do
    n=.dev/paths/${mode}_sg2x2_f4x4
    build/bin/kiln-opt .dev/paths/all/$(basename $n).mlir --kiln-linalg-to-spirv \
      | build/bin/kiln-spirv-check --output "$n.spv" >/dev/null
    { echo "spirv $(basename "$n").spv"; echo "entry ceiling_kernel"; cat .dev/paths/all/$(basename $n).info; } > "$n.kernel"
  done
  rm -rf .dev/paths/all
  /usr/bin/python3 bench/half/make_cases.py .dev/paths/cases
  cache=$(mktemp -d) dump=$(mktemp -d)
  KILN_CACHE_DIR=$cache KILN_DUMP_SPIRV=$dump KILN_GPU_LIMITS=$limits,coop=1 \
    build/bin/kiln-compile .dev/paths/cases/mm4096.mlir --target vulkan -o "$cache/mm.kiln"
  cp "$dump"/*.spv .dev/paths/kiln_default.spv
  { grep -v '^spirv' "$dump"/*.kernel; echo "spirv kiln_default.spv"; echo "halves 0 1 2";
    echo "outputs 2"; echo "label kiln_default $((2 * 4096 ** 3)) FLOP"; } > .dev/paths/kiln_default.kernel
  rm -rf "$cache" "$dump" .dev/paths/cases
  fetch_vulkan_loader
  ;;
paths)
  install_vulkan_loader
  export XDG_CACHE_HOME=/tmp/kiln-cache
  out=${OUT:-/tmp/paths-out}
  mkdir -p "$out"
  nvcc -O3 -arch=sm_90 bench/half/hmma_peak.cu -o /tmp/hmma_peak && /tmp/hmma_peak
  echo "hmma_peak's SASS:"; cuobjdump --dump-sass /tmp/hmma_peak | grep -o '[HG]*MMA[.A-Z0-9]*' | sort | uniq -c
  for k in .dev/paths/*.kernel; do
    build/bin/kiln-spirv-replay --statistics --internals "$out" --runs 10 "$k" | grep -v '^device' \
      | sed 's/Binary Size=[0-9]*, Stack Size=0, Local Memory Size=[0-9]*, //' || echo "$k: replay failed"
  done
  for f in "$out"/*.internals.txt; do
    [ -s "$f" ] || { echo "$f: the driver gave no internal representation"; continue; }
    echo "$(basename "$f"): $(grep -c . "$f") lines; representations: $(grep '^== ' "$f" | tr '\n' ' ')"
    echo "  tensor-core instructions: $(grep -o -i -E '\b[HG]MMA[.A-Z0-9]*|wgmma[.a-z0-9]*|mma\.sync[.a-z0-9]*' "$f" | sort | uniq -c | tr '\n' ' ')"
  done
  for v in 0 1; do
    DISABLE_MMA_V3=$v TRITON_CACHE_DIR=/tmp/triton-$v PYTHONUNBUFFERED=1 python3 bench/half/mma_paths.py \
      || echo "mma_paths.py (DISABLE_MMA_V3=$v) failed"
  done
  ;;
rounds)
  # scripts/half-gpu-bench.sh rounds GRAPH:I,J,... [GRAPH:...]: chosen
  # candidates, one process each (in one process every candidate after the
  # first timed up to 5x slow), in three alternating rounds.
  install_vulkan_loader
  export XDG_CACHE_HOME=/tmp/kiln-cache
  shift
  for round in 1 2 3; do
    for pick in "$@"; do
      g=${pick%%:*}
      for n in ${pick#*:}; do
        n=${n//,/ }
        for i in $n; do
          # Every kernel of the graph with that candidate number (one per
          # kernel hash), its config read under that hash.
          for f in .dev/half/candidates-$g/*-$i.kernel; do
            [ -f "$f" ] || { echo "round $round $g $i: no such candidate"; continue; }
            hash=$(basename "$f" .kernel); hash=${hash%-*}
            config=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]['configs'][int(sys.argv[3])])" \
              .dev/half/candidates-$g/candidates.json "$hash" "$i" || echo "?")
            t=$(build/bin/kiln-spirv-replay --runs 20 "$f" | grep -o '[0-9.]* ms per dispatch' || echo "replay failed")
            echo "round $round $g $hash-$i: $t  $config"
          done
        done
      done
    done
  done
  ;;
*)
  echo "usage: scripts/half-gpu-bench.sh dump|run|rounds|paths-dump|paths" >&2
  exit 2
  ;;
esac
