#!/usr/bin/env bash
# Command 2: build everything and run every test (lit, unit, end-to-end,
# layering check, benchmark smoke runs). Ends with ctest's summary line.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
mkdir -p "$cache/mesa"
export XDG_CACHE_HOME=$cache MESA_SHADER_CACHE_DIR=$cache/mesa
cd "$build"
# ctest lists skipped tests (hardware this machine lacks) after its
# summary; the summary is printed again last.
set +e
ctest --output-on-failure -j "${KILN_JOBS:-$(nproc)}" 2>&1 | tee "$cache/ctest.log"
status=${PIPESTATUS[0]}
set -e
grep -E "tests passed|tests failed" "$cache/ctest.log" | tail -n 1
exit "$status"
