#!/usr/bin/env bash
# Command 1: build and run the main job (examples/demo.cpp) on the default
# device: prints the device, the check against float64, kernels and times.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" kiln-demo
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
mkdir -p "$cache/mesa"
XDG_CACHE_HOME=$cache MESA_SHADER_CACHE_DIR=$cache/mesa "${KILN_BUILD_DIR:-$root/build}/bin/kiln-demo"
