#!/bin/sh
# ONNX's node test cases (one folder per case with model.onnx and
# test_data_set_0/{input,output}_N.pb) for the installed onnx, packed for the
# repo:
#
#   test/onnx/pack-node-data.sh OUT.tar.xz
#
# Run it where onnx 1.23 is installed (Debian 12 has 1.12, which lacks the
# opsets after 17). Wheels that ship onnx/backend/test/data/node are packed as
# they are; wheels without it (onnx 1.23.1's) regenerate the same cases from
# onnx.backend.test.case, which every wheel carries. onnx.NodeConformance
# unpacks test/onnx/node-1.23.tar.xz into a temporary folder and runs every
# case in it.
set -eu
out=${1:?usage: pack-node-data.sh OUT.tar.xz}
version=$(python3 -c "import onnx; print(onnx.__version__)")
data=$(python3 -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data'))")
if [ ! -d "$data/node" ]; then
  # cmd_tools' generate-data writes the model cases alone since ONNX 1.13:
  # hand it the node cases instead, written the same way.
  data=$(mktemp -d)
  python3 - "$data" <<'PY'
import argparse, sys
import onnx.backend.test.case.model as model_cases
import onnx.backend.test.case.node as node_cases
from onnx.backend.test import cmd_tools
model_cases.collect_testcases = node_cases.collect_testcases
cmd_tools.generate_data(argparse.Namespace(output=sys.argv[1]))
PY
fi
echo "onnx $version: $(ls "$data/node" | wc -l) cases in $data/node" >&2
# Sorted names, no owners or times: the same cases pack to the same bytes.
tar -C "$data" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - node |
  xz -9e -T0 > "$out"
ls -l "$out" >&2
