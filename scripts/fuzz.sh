#!/usr/bin/env bash
# Fuzzes the .kiln loader and the .npy reader with libFuzzer (clang-22,
# -fsanitize=fuzzer,address), runtime sources only (no MLIR or LLVM).
#
#   scripts/fuzz.sh [seconds per target, default 60]
#
# Seeds: test/fuzz/corpus/{kiln,npy} (valid files made by kiln-compile and
# writeNpy). The growing corpus and any crash input are kept in
# ${KILN_FUZZ_DIR:-build-fuzz}. Exits non-zero when a target crashes, leaks
# or trips the sanitizer; prints each target's executions and coverage.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
out=${KILN_FUZZ_DIR:-$root/build-fuzz}
cxx=${KILN_FUZZ_CXX:-clang++-22}
command -v "$cxx" >/dev/null || { echo "fuzz: $cxx not found (apt install clang-22 libclang-rt-22-dev)" >&2; exit 2; }
mkdir -p "$out/obj" "$out/generated"

flatc --cpp -o "$out/generated" "$root/runtime/schema/kiln.fbs"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer
       -I"$root/runtime/include" -I"$root/runtime/lib" -I"$out/generated")
objects=()
for src in "$root"/runtime/lib/*.cpp; do
  obj="$out/obj/$(basename "${src%.cpp}").o"
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find "$root/runtime" "$out/generated" -name '*.h' -newer "$obj" | head -1)" ]; then
    "$cxx" "${flags[@]}" -c "$src" -o "$obj"
  fi
  objects+=("$obj")
done

status=0
for target in Artifact:kiln Npy:npy; do
  name=${target%%:*}; kind=${target##*:}
  bin="$out/${kind}-fuzzer"
  "$cxx" "${flags[@]}" -fsanitize=fuzzer,address "$root/test/fuzz/${name}Fuzzer.cpp" \
    "${objects[@]}" -o "$bin" -lvulkan -lsqlite3 -ldl -lpthread
  corpus="$out/corpus-$kind"
  mkdir -p "$corpus" "$out/crashes-$kind"
  echo "fuzz: $kind for ${seconds}s (seeds: test/fuzz/corpus/$kind)"
  # Each run appends to its own log; the last stats line is the summary.
  log="$out/$kind.log"
  if ! (cd "$out/crashes-$kind" && "$bin" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 "$corpus" "$root/test/fuzz/corpus/$kind") \
        >"$log" 2>&1; then
    echo "fuzz: $kind FAILED: see $log and $out/crashes-$kind" >&2
    grep -E "ERROR|==[0-9]+==|Test unit written" "$log" | head -20 >&2 || true
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added|^stat::peak_rss_mb" "$log" |
    sed "s/^/fuzz: $kind: /"
  grep -E "^#[0-9]+ *DONE" "$log" | tail -1 | sed "s/^/fuzz: $kind: /" || true
done
exit $status
