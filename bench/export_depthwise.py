#!/usr/bin/python3
"""Exports every depthwise convolution shape of torchvision's MobileNetV2
(3x3, padding 1, batch 1, 224x224 input) as its own ONNX model with a bias,
for bench/compare_onnx_networks.py (Kiln against ONNX Runtime and PyTorch,
shape by shape):

    /usr/bin/python3 bench/export_depthwise.py DIR

writes dw_C_HxW_sS.onnx, its _x.npy input, _y.npy (PyTorch's output) and .pt
(TorchScript). Needs python3-torch (Debian 12).
"""
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
# (channels, input size, stride), in network order.
shapes = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1),
          (192, 28, 2), (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1)]
for channels, size, stride in shapes:
    model = torch.nn.Conv2d(channels, channels, 3, stride, 1, groups=channels).eval()
    x = torch.randn(1, channels, size, size)
    name = f"dw_{channels}_{size}x{size}_s{stride}"
    path = os.path.join(out, name)
    torch.onnx.export(model, x, path + ".onnx", input_names=["x"], output_names=["y"],
                      opset_version=13)
    with torch.no_grad():
        np.save(path + "_x.npy", x.numpy())
        np.save(path + "_y.npy", model(x).numpy())
        torch.jit.trace(model, x).save(path + ".pt")
    print(f"{name}: {path}.onnx")
