#!/usr/bin/env python3
"""Exports models the way PyTorch exports them today: torch.onnx.export's
default (dynamo) exporter at its default opset, random weights from a fixed
seed, batch 1, eval mode. Needs torch, torchvision, transformers and onnx
(a GPU host with PyTorch 2.11 has them; Debian 12's torch is too old):

    python3 scripts/export-onnx-today.py DIR [NAME...]

Weights: every float parameter or buffer larger than PERIOD elements is
refilled from a table of PERIOD random values (PERIOD a prime, the table drawn
with the tensor's own mean and spread), repeated along the tensor. Neighbours
and rows still differ, but the files compress (xz) to a few MiB each, compiled
or not, where random weights would not: vit_b_16 has 330 MiB of them.

For each NAME it writes NAME.onnx (weights inside the file), NAME_<input>.npy
for every input and NAME_y.npy, PyTorch's output on the CPU (float32 on
disk for f16/bf16 models, whose output it rounds from; a bf16 input is saved
as its bits, uint16, as kiln-run reads it). An f16 or bf16 copy
(NAME ending in _f16 or _bf16) also writes NAME_y32.npy: the f32 model's
output on the same inputs, so a compare can allow what PyTorch's own half
precision run differs by.
"""
import os
import sys

import numpy as np
import onnx
import torch
import torchvision


class LogitsOnly(torch.nn.Module):
    """A transformers model with its first output alone (no cache, no dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        return self.model(*args, use_cache=False, return_dict=False)[0] \
            if self.model.config.model_type != "bert" else self.model(*args, return_dict=False)[0]


def transformers_model(kind):
    import transformers as tf
    if kind == "bert":
        config = tf.BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=512,
                               max_position_embeddings=128)
        return tf.BertModel(config)
    if kind == "gpt2":
        config = tf.GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=4, n_positions=128)
        return tf.GPT2LMHeadModel(config)
    if kind == "llama":
        config = tf.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=344,
                                num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=2, max_position_embeddings=128)
        return tf.LlamaForCausalLM(config)
    raise KeyError(kind)


# Prime, and shorter than most rows: the exporter folds batch norms into the
# convolutions before them, scaling each output channel's row, so only a
# period within a row still repeats.
PERIOD = 127


def compressible_weights(model):
    """Refills each large float tensor from a PERIOD-long random table."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if not t.is_floating_point() or t.numel() <= PERIOD:
                continue
            mean, spread = t.float().mean(), t.float().std() * 3 ** 0.5
            if spread == 0:  # zeros or ones at init (a head, a norm): vary them too
                spread = 0.02 * 3 ** 0.5
            table = mean + spread * (torch.rand(PERIOD, generator=g) * 2 - 1)
            t.copy_(table[torch.arange(t.numel()) % PERIOD].view(t.shape).to(t.dtype))


def build(name):
    """(model, inputs as a dict of name -> tensor)."""
    torch.manual_seed(0)
    if name in ("bert", "gpt2", "llama"):
        model = LogitsOnly(transformers_model(name))
        compressible_weights(model)
        ids = torch.randint(0, 1000, (1, 16), dtype=torch.int64)
        if name == "bert":
            mask = torch.ones(1, 16, dtype=torch.int64)
            mask[0, 12:] = 0
            return model, {"ids": ids, "mask": mask}
        return model, {"ids": ids}
    model = getattr(torchvision.models, name)()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    compressible_weights(model)
    return model, {"x": torch.randn(1, 3, 224, 224)}


def run(model, inputs):
    with torch.no_grad():
        return model(*inputs.values()).float().numpy()


def export(out, name):
    precision = "f16" if name.endswith("_f16") else "bf16" if name.endswith("_bf16") else ""
    base = name[:-len(precision) - 1] if precision else name
    model, inputs = build(base)
    model.eval()
    path = os.path.join(out, name)
    if precision:
        y32 = run(model, inputs)
        np.save(path + "_y32.npy", y32)
        dtype = torch.float16 if precision == "f16" else torch.bfloat16
        model = model.to(dtype)
        inputs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}
    torch.onnx.export(model, tuple(inputs.values()), path + ".onnx",
                      input_names=list(inputs), output_names=["y"])
    # One file: the exporter may write the weights beside the model.
    m = onnx.load(path + ".onnx")
    onnx.save(m, path + ".onnx")
    if os.path.exists(path + ".onnx.data"):
        os.remove(path + ".onnx.data")
    for k, v in inputs.items():
        # numpy has no bfloat16: a bf16 input is saved as its bits (uint16),
        # as kiln-run reads and writes bf16.
        np.save(f"{path}_{k}.npy", v.view(torch.int16).numpy().view(np.uint16)
                if v.dtype == torch.bfloat16 else v.numpy())
    np.save(path + "_y.npy", run(model, inputs))
    try:  # the export itself, checked by ONNX Runtime where it is installed
        import onnxruntime as ort
        session = ort.InferenceSession(path + ".onnx", providers=["CPUExecutionProvider"])
        feed = {k: (v.float().numpy() if v.dtype == torch.bfloat16 else v.numpy())
                for k, v in inputs.items()}
        got = session.run(None, feed)[0].astype(np.float32)
        ref = np.load(path + "_y.npy")
        print(f"{name}: onnxruntime max |diff| {np.abs(got - ref).max():.3g} "
              f"of max |y| {np.abs(ref).max():.3g}", flush=True)
    except Exception as e:
        print(f"{name}: onnxruntime: {type(e).__name__}: {str(e)[:300]}", flush=True)
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"{name}: opset {m.opset_import[0].version}, {len(m.graph.node)} nodes, "
          f"{os.path.getsize(path + '.onnx') >> 10} KiB: {' '.join(ops)}", flush=True)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    names = sys.argv[2:] or ["resnet18", "mobilenet_v3_small", "efficientnet_b0",
                             "convnext_tiny", "vit_b_16", "bert", "gpt2", "llama",
                             "mobilenet_v3_small_f16", "mobilenet_v3_small_bf16",
                             "gpt2_f16", "gpt2_bf16"]
    for name in names:
        try:
            export(out, name)
        except Exception as e:  # report every model, then fail
            print(f"{name}: export failed: {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()
