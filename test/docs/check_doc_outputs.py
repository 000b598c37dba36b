#!/usr/bin/env python3
"""Docs cannot drift from what Kiln prints: every fenced block in a doc that
follows a line `<!-- output of: <program> -->` must appear, line for line and
contiguously, in that program's output (run from the build's bin folder,
source paths made relative to the repository).

usage: check_doc_outputs.py <repo root> <bin dir> <doc.md>...
"""
import os
import re
import subprocess
import sys


def blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    marker = re.compile(r"<!-- output of: (\S+) -->")
    for i, line in enumerate(lines):
        m = marker.match(line.strip())
        if not m:
            continue
        start = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        end = next(j for j in range(start + 1, len(lines)) if lines[j].startswith("```"))
        yield m.group(1), lines[start + 1:end], i + 1


def main():
    root, bindir, docs = sys.argv[1], sys.argv[2], sys.argv[3:]
    failures = 0
    checked = 0
    for doc in docs:
        for program, block, line in blocks(doc):
            run = subprocess.run([os.path.join(bindir, program)], capture_output=True, text=True,
                                 timeout=300)
            out = (run.stdout + run.stderr).replace(root.rstrip("/") + "/", "").split("\n")
            n = len(block)
            found = any(out[k:k + n] == block for k in range(len(out) - n + 1))
            checked += 1
            if not found:
                failures += 1
                print(f"{doc}:{line}: the block differs from what {program} prints now:")
                print("\n".join(out))
    print(f"{checked} doc blocks checked, {failures} differ")
    return 1 if failures or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
