#!/usr/bin/env bash
# The API and runtime test suites under sanitizers (not in CI: a sanitizer
# build of the whole compiler takes about half an hour on 2 cores).
#
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/sanitize.sh tsan   ThreadSanitizer
#   scripts/sanitize.sh        both
#
# Each suite runs whole, then twice shuffled (tests must not depend on
# order). Builds go to build-asan/ and build-tsan/ (KILN_SANITIZE_DIR sets
# the parent). MLIR, LLVM and the Vulkan driver are not instrumented: TSan
# reports races inside them only when Kiln's own frames are involved
# (scripts/tsan.supp lists the driver's own threads). Exits non-zero on the
# first report.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
parent=${KILN_SANITIZE_DIR:-$root}
"$root/scripts/setup.sh" kiln-opt >/dev/null # packages, and a configured main build
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
mkdir -p "$cache/mesa"
export XDG_CACHE_HOME=$cache MESA_SHADER_CACHE_DIR=$cache/mesa

run_suites() { # build-dir
  local bin=$1/bin
  for suite in kiln-runtime-tests kiln-api-tests; do
    echo "== $suite (whole)"
    "$bin/$suite" --gtest_brief=1
    for seed in 1 2; do
      echo "== $suite (shuffled, seed $seed)"
      "$bin/$suite" --gtest_brief=1 --gtest_shuffle --gtest_random_seed=$seed
    done
  done
}

build() { # name flags
  local dir=$parent/build-$1
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DKILN_BUILD_BENCH=OFF \
      "-DCMAKE_CXX_FLAGS=$2 -O1 -g1 -fno-omit-frame-pointer" \
      "-DCMAKE_C_FLAGS=$2 -O1 -g1 -fno-omit-frame-pointer" \
      "-DCMAKE_EXE_LINKER_FLAGS=$2" "-DCMAKE_SHARED_LINKER_FLAGS=$2"
  fi
  cmake --build "$dir" -j "${KILN_JOBS:-$(nproc)}" --target kiln-api-tests kiln-runtime-tests
}

mode=${1:-all}
if [ "$mode" = asan ] || [ "$mode" = all ]; then
  build asan "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
  # Leaks: the session and the Vulkan context are leaked on purpose (they
  # must outlive user statics that still hold tensors). Impossible
  # allocations must fail as they would without ASan (tests check the error).
  # No user poisoning: LLVM's BumpPtrAllocator, inlined into Kiln's
  # instrumented code, poisons slab memory that the uninstrumented libMLIR
  # then writes (a false use-after-poison in MLIR's attribute uniquer).
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:allow_user_poisoning=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suites "$parent/build-asan"
  echo "asan+ubsan: clean"
fi
if [ "$mode" = tsan ] || [ "$mode" = all ]; then
  build tsan "-fsanitize=thread"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 allocator_may_return_null=1 suppressions=$root/scripts/tsan.supp" \
    run_suites "$parent/build-tsan"
  echo "tsan: clean"
fi
