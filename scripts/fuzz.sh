#!/usr/bin/env bash
# Fuzzes the .kiln loader and the .npy reader with libFuzzer (clang-22,
# -fsanitize=fuzzer,address), runtime sources only (no MLIR or LLVM), and
# the ONNX importer: its sources instrumented, linked against the libraries
# of the build in ${KILN_BUILD_DIR:-build} (skipped, saying so, without one).
#
#   scripts/fuzz.sh [seconds per target, default 60]
#
# Seeds: test/fuzz/corpus/{kiln,npy,onnx} (valid files made by kiln-compile
# and writeNpy; small ONNX models and damaged ones). The .kiln seeds are
# files without their 48-byte seal (the fuzz target seals each input):
#   kiln-compile test/fuzz/corpus/mlp.mlir --target vulkan -o m.kiln &&
#   head -c -48 m.kiln > test/fuzz/corpus/kiln/mlp-vulkan.kiln The growing corpus and any crash input are kept in
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
# kiln/runtime/Version.h, as CMake writes it from project(kiln VERSION ...).
version=$(sed -n 's/^project(kiln VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
IFS=. read -r major minor patch <<<"$version"
mkdir -p "$out/generated/kiln/runtime"
sed -e "s/@PROJECT_VERSION@/$version/" -e "s/@PROJECT_VERSION_MAJOR@/$major/" \
    -e "s/@PROJECT_VERSION_MINOR@/$minor/" -e "s/@PROJECT_VERSION_PATCH@/$patch/" \
    "$root/runtime/include/kiln/runtime/Version.h.in" >"$out/generated/kiln/runtime/Version.h"
# FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (OSS-Fuzz's convention): CPU code
# that passes every check is not handed to the dynamic loader. The fuzzer
# writes the hash it watches being compared into the file, so it can reach
# dlopen with any bytes, and glibc's loader trusts what it maps.
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer
       -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -DVK_NO_PROTOTYPES
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
    "${objects[@]}" -o "$bin" -lsqlite3 -ldl -lpthread
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

# The ONNX importer: instrumented here, the rest of Kiln from the build.
build=${KILN_BUILD_DIR:-$root/build}
if [ ! -f "$build/lib/libkiln_onnx.a" ]; then
  echo "fuzz: onnx skipped: no build in $build (set KILN_BUILD_DIR)"
  exit $status
fi
bin="$out/onnx-fuzzer"
"$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address -fno-omit-frame-pointer -fexceptions \
  -DONNX_NAMESPACE=onnx -DONNX_ML=1 -I"$root" -I"$root/include" -I"$root/runtime/include" -I"$root/lib/Import/ONNX" \
  "$root/test/fuzz/OnnxFuzzer.cpp" "$root"/lib/Import/ONNX/*.cpp \
  "$build/lib/libkiln.a" "$build/lib/libKilnCompiler.a" "$build/lib/libKilnDialect.a" \
  "$build/runtime/libkiln_runtime.a" /usr/lib/llvm-22/lib/libMLIR.so.22.1 /usr/lib/llvm-22/lib/libLLVM.so.1 \
  /usr/lib/x86_64-linux-gnu/libSPIRV-Tools.a -lspirv-cross-c-shared -lsqlite3 -lonnx_proto \
  -lprotobuf -ldl -lpthread "$(g++ -print-file-name=libbacktrace.a)" -Wl,-rpath,/usr/lib/llvm-22/lib -o "$bin"
corpus="$out/corpus-onnx"
mkdir -p "$corpus" "$out/crashes-onnx"
echo "fuzz: onnx for ${seconds}s (seeds: test/fuzz/corpus/onnx)"
log="$out/onnx.log"
# MLIR's and LLVM's process-wide singletons live until exit: no leak check.
if ! (cd "$out/crashes-onnx" && "$bin" -max_total_time="$seconds" -timeout=10 -detect_leaks=0 \
      -rss_limit_mb=4096 -print_final_stats=1 "$corpus" "$root/test/fuzz/corpus/onnx") >"$log" 2>&1; then
  echo "fuzz: onnx FAILED: see $log and $out/crashes-onnx" >&2
  grep -E "ERROR|==[0-9]+==|Test unit written|terminate" "$log" | head -20 >&2 || true
  status=1
fi
grep -E "^stat::number_of_executed_units|^stat::new_units_added|^stat::peak_rss_mb" "$log" |
  sed "s/^/fuzz: onnx: /"
exit $status
