#!/bin/sh
# runtime/ must build without MLIR or LLVM (DESIGN.md): fail on any include.
dir=${1:?usage: check-runtime-includes.sh <runtime dir>}
[ -d "$dir" ] || { echo "no such directory: $dir"; exit 1; }
bad=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](mlir|llvm|llvm-c)/' "$dir")
if [ -n "$bad" ]; then
  echo "runtime/ includes MLIR/LLVM headers (move the code to lib/ or drop the include):"
  echo "$bad"
  exit 1
fi
echo "runtime/: $(find "$dir" -name '*.h' -o -name '*.cpp' | wc -l) files, no mlir/ or llvm/ includes"
