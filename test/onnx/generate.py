#!/usr/bin/python3
"""Writes ONNX 1.12's node test cases (about 900: model.onnx and
test_data_set_0/*.pb each) into DIR, for kiln-onnx-conformance:

    /usr/bin/python3 test/onnx/generate.py DIR

Debian 12's python3-onnx (1.12) generators still use numpy aliases that
numpy 1.24 removed (np.float, np.int, ...); they are put back first.
"""
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
for alias, kind in (("float", float), ("int", int), ("bool", bool), ("object", object),
                    ("complex", complex), ("str", str)):
    if alias not in np.__dict__:
        setattr(np, alias, kind)

from onnx.backend.test.cmd_tools import main  # noqa: E402

sys.argv = ["cmd_tools", "generate-data", "-o", sys.argv[1]]
main()
