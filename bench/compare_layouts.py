#!/usr/bin/python3
"""Does a blocked channel layout beat plain NCHW for convolutions on this
CPU? One library, three layouts, side by side: PyTorch's
oneDNN convolution on NCHW tensors, on channels-last (NHWC) tensors, and on
oneDNN's own blocked layout (nChw16c on AVX-512, nChw8c on AVX2, through
torch.utils.mkldnn), for 1x1, 3x3 and depthwise convolutions of ResNet-18
and MobileNetV2 at batch 1, each alone. Same library, same kernels' author:
what differs is the layout.

    /usr/bin/python3 bench/compare_layouts.py [runs] [threads]

Medians of `runs` calls, microseconds. Layout conversions are outside the
timing: a network would keep its activations blocked from layer to layer.
"""
import os
import sys

import torch
import torch.utils.mkldnn as mkldnn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_timing import median  # noqa: E402

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
torch.set_num_threads(threads)

SHAPES = [  # (name, cin, cout, size, kernel, stride, groups)
    ("resnet 3x3 64", 64, 64, 56, 3, 1, 1),
    ("resnet 3x3 128", 128, 128, 28, 3, 1, 1),
    ("resnet 3x3 256", 256, 256, 14, 3, 1, 1),
    ("resnet 3x3 512", 512, 512, 7, 3, 1, 1),
    ("mobilenet 1x1 24->144", 24, 144, 56, 1, 1, 1),
    ("mobilenet 1x1 192->32", 192, 32, 28, 1, 1, 1),
    ("mobilenet 1x1 576->96", 576, 96, 14, 1, 1, 1),
    ("mobilenet dw 144", 144, 144, 56, 3, 1, 144),
    ("mobilenet dw 384", 384, 384, 14, 3, 1, 384),
]


def median_us(fn):
    return median(fn, runs) * 1e6


print(f"{threads} thread(s); medians of {runs} runs, microseconds; ratios against NCHW")
print("| conv | GFLOP | NCHW | NHWC | blocked (oneDNN) | NHWC / NCHW | blocked / NCHW |")
print("|---|---|---|---|---|---|---|")
with torch.no_grad():
    for name, cin, cout, size, k, stride, groups in SHAPES:
        conv = torch.nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=True).eval()
        x = torch.randn(1, cin, size, size)
        flops = 2 * cout * (cin // groups) * k * k * (size // stride) ** 2 / 1e9
        nchw = median_us(lambda: conv(x))
        conv_nhwc = conv.to(memory_format=torch.channels_last)
        x_nhwc = x.to(memory_format=torch.channels_last)
        nhwc = median_us(lambda: conv_nhwc(x_nhwc))
        conv_blocked = mkldnn.to_mkldnn(conv)
        x_blocked = x.to_mkldnn()
        blocked = median_us(lambda: conv_blocked(x_blocked))
        print(f"| {name} | {flops:.3f} | {nchw:.0f} | {nhwc:.0f} | {blocked:.0f} | "
              f"{nhwc / nchw:.2f}x | {blocked / nchw:.2f}x |", flush=True)
