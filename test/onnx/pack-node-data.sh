#!/bin/sh
# ONNX's node test cases as its Python package ships them (onnx 1.23.1:
# onnx/backend/test/data/node, one folder per case with model.onnx and
# test_data_set_0/{input,output}_N.pb), packed for the repo:
#
#   test/onnx/pack-node-data.sh OUT.tar.xz
#
# Run it where that onnx is installed (Debian 12 has 1.12, which lacks the
# opsets after 17). onnx.NodeConformance unpacks test/onnx/node-1.23.tar.xz
# into a temporary folder and runs every case in it.
set -eu
out=${1:?usage: pack-node-data.sh OUT.tar.xz}
data=$(python3 -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data'))")
version=$(python3 -c "import onnx; print(onnx.__version__)")
echo "onnx $version: $(ls "$data/node" | wc -l) cases in $data/node" >&2
# Sorted names, no owners or times: the same package packs to the same bytes.
tar -C "$data" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - node |
  xz -9e -T0 > "$out"
ls -l "$out" >&2
