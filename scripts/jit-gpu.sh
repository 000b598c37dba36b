#!/usr/bin/env bash
# The whole compiler on a lent GPU machine, which has no MLIR or LLVM: the
# JIT, kiln-compile and the unit tests run there on the real GPU.
#
# Here:  scripts/jit-gpu.sh pack [program...]
#   writes .dev/jit: the test and tool binaries, ld.lld, and every shared
#   library they need beyond the C and C++ runtimes and the Vulkan loader
#   (libMLIR, libLLVM and theirs), each compressed with xz (about 60 MB,
#   under the device tool's 64 MiB); fetches the Vulkan loader into .gl.
# There (carry .gl and .dev/jit):
#   scripts/jit-gpu.sh run [gtest filter]
#   unpacks them, lists the devices, then runs kiln-runtime-tests and
#   kiln-api-tests (8 shards at once) on the GPU with the tests' own
#   settings (two logical devices per adapter); writes $OUT/jit-*.log and
#   ends with one line per binary: passed, failed, skipped.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. "$root/scripts/vulkan-loader.sh"
bins="kiln-api-tests kiln-runtime-tests kiln-run kiln-compile kiln-test-load-and-run
  kiln-example-devices kiln-example-aot"
# stub_library SONAME PREFIX: .dev/jit/lib/SONAME.xz, whose every function
# named PREFIX* that libLLVM imports aborts when called.
stub_library() {
  local dir imports
  dir=$(mktemp -d)
  imports=$(nm -D --undefined-only "$(readlink -f /usr/lib/llvm-22/lib/libLLVM.so)" |
    awk -v p="$2" '$2 ~ "^" p {print $2}')
  {
    echo '#include <stdlib.h>'
    echo "$imports" | sed 's/@.*//' | sort -u | sed 's/.*/void &(void) { abort(); }/'
  } >"$dir/stub.c"
  { # one version node per version libLLVM asks for
    for v in $(echo "$imports" | grep @ | sed 's/.*@//' | sort -u); do
      echo "$v { global: $(echo "$imports" | grep "@$v\$" | sed 's/@.*/;/' | tr '\n' ' ') };"
    done
    echo "STUB { local: *; };"
  } >"$dir/versions"
  if ! grep -q @ <<<"$imports"; then echo '{ global: *; };' >"$dir/versions"; fi
  clang -shared -fPIC -O1 -o "$dir/$1" -Wl,-soname,"$1" -Wl,--version-script,"$dir/versions" \
    "$dir/stub.c" -w
  xz -9 -c "$dir/$1" >".dev/jit/lib/$1.xz"
  rm -rf "$dir"
}
case "${1:-}" in
pack)
  fetch_vulkan_loader
  mkdir -p .dev/jit/lib .dev/jit/bin
  rm -f .dev/jit/bin/*
  lld=$(readlink -f "$(command -v ld.lld-22)")
  for b in $bins; do xz -6 -T2 -c "build/bin/$b" >".dev/jit/bin/$b.xz"; done
  # Programs of one's own (linked against the same build) go along too.
  for extra in "${@:2}"; do xz -6 -T2 -c "$extra" >".dev/jit/bin/$(basename "$extra").xz"; done
  xz -6 -T2 -c "$lld" >.dev/jit/bin/ld.lld-22.xz
  # Every library the binaries load, less what any Linux machine has (and
  # the newer copy there serves): libc, libm, libstdc++, libgcc_s, the loader.
  libs=$(for b in $bins; do ldd "build/bin/$b"; done; ldd "$lld"; for e in "${@:2}"; do ldd "$e"; done) || true
  # Z3 (the static analyzer's solver) and libxml2 (llvm-mt's manifests; it
  # brings 30 MB of ICU data) are never called by Kiln: stand-ins that
  # define what libLLVM imports from them, with its symbol versions, keep
  # the kit under the carry limit.
  stub_library libz3.so.4 Z3_
  stub_library libxml2.so.2 xml
  echo "$libs" | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libvulkan|libz3|libxml2|libicu[a-z]*)\.so' |
    while read -r lib; do
    out=.dev/jit/lib/$(basename "$lib").xz
    # The libraries do not change between packs: compress each once (libLLVM
    # takes two minutes).
    if [ ! -f "$out" ] || [ "$lib" -nt "$out" ]; then xz -9e -T2 -c "$(readlink -f "$lib")" >"$out"; fi
  done
  du -sh .dev/jit .gl
  ;;
run)
  install_vulkan_loader
  kit=/tmp/kiln-jit
  mkdir -p $kit/lib $kit/bin build/bin
  for f in .dev/jit/lib/*.xz; do xz -dc "$f" >"$kit/lib/$(basename "$f" .xz)"; done
  for f in .dev/jit/bin/*.xz; do
    xz -dc "$f" >"build/bin/$(basename "$f" .xz)"
    chmod +x "build/bin/$(basename "$f" .xz)"
  done
  mv build/bin/ld.lld-22 $kit/bin/
  export LD_LIBRARY_PATH=$kit/lib PATH=$kit/bin:$PATH
  # The tests run kiln-run and kiln-compile where they were built.
  if [ "$root" != /work/main ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
  out=${OUT:-/tmp/kiln-jit-out}
  mkdir -p "$out"
  export XDG_CACHE_HOME=/tmp/kiln-jit-cache
  build/bin/kiln-example-devices 2>&1 | tee "$out/jit-devices.log" | head -n 40
  filter=${2:-*}
  summary=""
  run_shards() { # binary, shards
    local name=$1 shards=$2 pids=() i
    for ((i = 0; i < shards; i++)); do
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "build/bin/$name" --gtest_filter="$filter" \
        >"$out/jit-$name-$i.log" 2>&1 &
      pids+=($!)
    done
    local failed=0
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    cat "$out"/jit-"$name"-*.log >"$out/jit-$name.log"
    rm -f "$out"/jit-"$name"-*.log
    grep -E '^\[  (FAILED|SKIPPED) ' "$out/jit-$name.log" | sort -u | head -n 60 || true
    local log=$out/jit-$name.log passed skipped failedn
    passed=$(grep -cE '^\[       OK \]' "$log" || true)
    skipped=$( (grep -E '^\[  SKIPPED \] [A-Za-z].*\(' "$log" || true) | wc -l)
    failedn=$( (grep -E '^\[  FAILED  \] [A-Za-z].*\(' "$log" || true) | wc -l)
    summary+="$name: $passed passed, $failedn failed, $skipped skipped (exit $failed)"$'\n'
  }
  run_shards kiln-runtime-tests 4
  run_shards kiln-api-tests 8
  printf '%s' "$summary"
  ;;
*)
  echo "usage: $0 pack | run [gtest filter]" >&2
  exit 2
  ;;
esac
