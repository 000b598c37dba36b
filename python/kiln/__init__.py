"""Kiln from Python: the lazy Tensor API, ahead-of-time compile, .kiln files
and the ONNX importer.

    import numpy as np, kiln
    x = kiln.tensor(np.ones((2, 3), np.float32))
    y = kiln.relu(x * 2 - 1)
    print(y.numpy())                      # realizes the graph

    p = kiln.compile([y], [x], targets=["cpu"])
    p.save("model.kiln")
    kiln.load("model.kiln", "cpu:0").run([np.zeros((2, 3), np.float32)])

Kiln's errors are kiln.Error (and DeviceMismatchError, DeviceError,
OutOfMemoryError, CompileError), with the messages the C++ API gives.
"""
from ._kiln import *  # noqa: F401,F403
from ._kiln import __version__  # noqa: F401
