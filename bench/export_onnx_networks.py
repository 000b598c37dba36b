#!/usr/bin/python3
"""Exports the networks of the ONNX table (bench/RESULTS.md) with PyTorch:
torchvision's ResNet-18, MobileNetV2 and SqueezeNet 1.1 and a torch.nn
TransformerEncoderLayer (pre-norm, 512 wide, 8 heads, MLP 2048, 128
tokens), random weights from a fixed seed (batch norm statistics drawn too,
so it is not an identity), batch 1, in eval mode:

    /usr/bin/python3 bench/export_onnx_networks.py DIR

writes NAME.onnx, NAME_x.npy (the input), NAME_y.npy (PyTorch's output) and
NAME.pt (TorchScript, for the PyTorch column of
bench/compare_onnx_networks.py). Needs python3-torch and
python3-torchvision (Debian 12).
"""
import os
import sys

import numpy as np
import torch
import torchvision

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
nets = {
    "resnet18": (torchvision.models.resnet18(), (1, 3, 224, 224), 13),
    "mobilenet_v2": (torchvision.models.mobilenet_v2(), (1, 3, 224, 224), 13),
    "squeezenet1_1": (torchvision.models.squeezenet1_1(), (1, 3, 224, 224), 13),
    "encoder": (torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, norm_first=True),
                (1, 128, 512), 14),
}
for name, (model, shape, opset) in nets.items():
    model.eval()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    x = torch.randn(*shape)
    path = os.path.join(out, name)
    torch.onnx.export(model, x, path + ".onnx", input_names=["x"], output_names=["y"],
                      opset_version=opset)
    with torch.no_grad():
        np.save(path + "_x.npy", x.numpy())
        np.save(path + "_y.npy", model(x).numpy())
        torch.jit.trace(model, x).save(path + ".pt")
    print(f"{name}: {path}.onnx (opset {opset})")
