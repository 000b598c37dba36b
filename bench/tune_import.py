#!/usr/bin/env python3
"""Turns candidate timings measured on a GPU without the compiler
(scripts/tune-gpu.sh run) into the JSON that `kiln-tune --import` and
KILN_AUTOTUNE_REPLAY read, and prints tuned against default per kernel.

  bench/tune_import.py EMIT_DIR TIMES_DIR OUT.json

A candidate counts only when its output checksum (sum and sum of absolute
values over every output) is within 1e-3 of the default config's, relative
to the default's sum of absolute values: a fast wrong kernel never wins.
"""
import json
import math
import os
import re
import sys

emit_dir, times_dir, out_path = sys.argv[1:4]
line = re.compile(r"(\S+)/([0-9a-f]{16})-(\d+)\.kernel: ([0-9.]+) ms per dispatch.*output sum (\S+), sum\|\.\| (\S+)")
kernels, keys, defaults = {}, {}, {}
print("| graph | kernel | default | tuned | default ms | tuned ms | speed-up | candidates (wrong) |")
print("|---|---|---|---|---|---|---|---|")
for graph in sorted(os.listdir(emit_dir)):
    index_path = os.path.join(emit_dir, graph, "candidates.json")
    times_path = os.path.join(times_dir, graph + ".times")
    if not os.path.exists(index_path) or not os.path.exists(times_path):
        continue
    index = json.load(open(index_path))
    measured = {}
    for text in open(times_path):
        m = line.search(text)
        if m:
            measured[(m.group(2), int(m.group(3)))] = (float(m.group(4)) * 1e-3, float(m.group(5)), float(m.group(6)))
    for h, entry in index.items():
        configs = entry["configs"]
        if (h, 0) not in measured:
            continue
        base_t, base_sum, base_abs = measured[(h, 0)]
        if math.isnan(base_sum) or math.isnan(base_abs):
            # The replay's random inputs gave the default NaNs (a batch norm
            # of a negative variance): its checksum proves nothing.
            print(f"| {graph} | {entry['summary']} | {configs[0]} | (unverified: NaN outputs) "
                  f"| {base_t*1e3:.4f} | | | |")
            continue
        good, wrong = {}, 0
        for i, config in enumerate(configs):
            if config is None or (h, i) not in measured:
                continue
            t, s, a = measured[(h, i)]
            tol = 1e-3 * max(base_abs, 1e-30)
            if abs(s - base_sum) <= tol and abs(a - base_abs) <= tol:
                good[config] = t
            else:
                wrong += 1
        kernels[h] = good
        keys[h] = entry["key"]
        defaults[h] = configs[0]
        best = min(good, key=good.get)
        print(f"| {graph} | {entry['summary']} | {configs[0]} | {best} | {base_t*1e3:.4f} | "
              f"{good[best]*1e3:.4f} | {base_t/good[best]:.2f}x | {len(good)} ({wrong}) |")
json.dump({"kernels": kernels, "keys": keys, "defaults": defaults}, open(out_path, "w"), indent=1)
print(f"wrote {out_path}: {len(kernels)} kernels")
