#!/usr/bin/env bash
# Installs what Kiln needs (Debian 12, as root or with sudo), configures and
# builds. Safe to run again: installs only what is missing, builds
# incrementally. Usage: scripts/setup.sh [ninja targets...]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}

packages=(cmake ninja-build g++ python3 ccache
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  spirv-tools libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers
  libgtest-dev libbenchmark-dev flatbuffers-compiler libflatbuffers-dev
  lld-22 libspirv-cross-c-shared-dev clang-22 libclang-rt-22-dev libsqlite3-dev libvulkan-volk-dev
  libonnx-dev libprotobuf-dev python3-onnx dpkg-dev
  pybind11-dev python3-dev python3-numpy python3-pytest)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kiln: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir
fi
cmake --build "$build" -j "${KILN_JOBS:-$(nproc)}" ${1:+--target "$@"}
