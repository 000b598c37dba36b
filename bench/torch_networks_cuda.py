#!/usr/bin/env python3
"""The networks of bench/export_onnx_networks.py in PyTorch CUDA at batch 1:
eager and torch.compile, latency of one call waited for, next to kiln-run's
times from its log (only the networks the log names, when one is given). The
weights are fresh (seed 0): latency does not depend on them; correctness
is checked where the models were exported (bench/RESULTS.md).

    python3 bench/torch_networks_cuda.py [kiln-run log]
"""
import re
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(0)
kiln_log = open(sys.argv[1]).read() if len(sys.argv) > 1 else ""


def latency(fn, runs=200):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1e3


nets = {}
try:
    import torchvision
    nets["resnet18"] = (torchvision.models.resnet18(), (1, 3, 224, 224))
    nets["mobilenet_v2"] = (torchvision.models.mobilenet_v2(), (1, 3, 224, 224))
    nets["squeezenet1_1"] = (torchvision.models.squeezenet1_1(), (1, 3, 224, 224))
except ImportError:
    print("torchvision is not installed here: the CNNs are not timed")
nets["encoder"] = (torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, norm_first=True),
                   (1, 128, 512))
print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, batch 1, f32 (TF32 off)")
print("| network | kiln-run (Vulkan) | PyTorch eager | torch.compile | kiln / compile |")
print("|---|---|---|---|---|")
for name, (model, shape) in nets.items():
    if kiln_log and name + ".kiln:" not in kiln_log:
        continue
    model = model.eval().cuda()
    x = torch.randn(*shape, device="cuda")
    with torch.no_grad():
        eager = latency(lambda: model(x))
        compiled = torch.compile(model)
        comp = latency(lambda: compiled(x))
    m = re.search(name + r"\.kiln: .*median ([0-9.]+) ms", kiln_log)
    kiln = float(m.group(1)) if m else None
    ratio = f"{kiln / comp:.2f}x" if kiln else "-"
    kiln_text = f"{kiln:.3f} ms" if kiln else "-"
    print(f"| {name} | {kiln_text} | {eager:.3f} ms | {comp:.3f} ms | {ratio} |", flush=True)
