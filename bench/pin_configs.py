#!/usr/bin/env python3
"""Writes a `kiln-tune --import` file that pins every kernel to its default
config with one knob taken out, for an A/B of that knob on a machine without
the compiler (scripts/aot-gpu-bench.sh dump builds .kiln files both ways).

  bench/pin_configs.py OUT.json KNOB EMIT_DIR...

EMIT_DIR: what `kiln-tune --emit-candidates` wrote (candidates.json). A
kernel whose default config has ` KNOB=...` is pinned to the same config
without it, when that is one of its candidates; other kernels keep their
defaults.
"""
import json
import os
import re
import sys

out_path, knob, *emit_dirs = sys.argv[1:]
kernels, keys, defaults = {}, {}, {}
for emit_dir in emit_dirs:
    index = json.load(open(os.path.join(emit_dir, "candidates.json")))
    for h, entry in index.items():
        configs = [c for c in entry["configs"] if c]
        default = configs[0]
        without = re.sub(r" " + re.escape(knob) + r"=\S+", "", default)
        if without == default:
            continue
        if without not in configs:
            print(f"{entry['summary']}: '{without}' is not a candidate; left at '{default}'")
            continue
        kernels[h] = {without: 1.0}
        keys[h] = entry["key"]
        defaults[h] = default
        print(f"{entry['summary']}: '{default}' -> '{without}'")
json.dump({"kernels": kernels, "keys": keys, "defaults": defaults}, open(out_path, "w"), indent=1)
print(f"wrote {out_path}: {len(kernels)} kernels pinned")
