#!/usr/bin/env bash
# Builds the runtime, kiln-run and kiln-cache with the compiler off
# (-DKILN_BUILD_COMPILER=OFF: no MLIR, no LLVM) and checks that what it made
# links neither and runs: kiln-run refuses a file that is not a whole .kiln
# with its own error. The build goes to $KILN_RUNTIME_ALONE_DIR (default
# build-runtime-alone/ beside build/). Usage: scripts/runtime-alone.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${KILN_RUNTIME_ALONE_DIR:-$root/build-runtime-alone}
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKILN_BUILD_COMPILER=OFF -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_TESTS=OFF >/dev/null
cmake --build "$dir" -j "${KILN_JOBS:-2}" --target kiln-run kiln-cache
for tool in kiln-run kiln-cache; do
  if ldd "$dir/bin/$tool" | grep -E "libLLVM|libMLIR"; then
    echo "runtime-alone: $tool links LLVM or MLIR" >&2
    exit 1
  fi
done
# A .kiln body without its seal: refused, with the reason, exit status 1.
set +e
output=$("$dir/bin/kiln-run" "$root/test/fuzz/corpus/kiln/mlp-cpu.kiln" 2>&1)
status=$?
set -e
echo "$output"
if [ "$status" -ne 1 ] || ! grep -q "seal" <<<"$output"; then
  echo "runtime-alone: kiln-run did not refuse an unsealed file as expected (status $status)" >&2
  exit 1
fi
echo "runtime-alone: kiln-run and kiln-cache build and run without MLIR or LLVM"
