#!/usr/bin/env python3
"""Half-precision matmul cases for scripts/half-gpu-bench.sh: kiln graphs
(.mlir), their inputs (.npy) and, where the answer is known exactly, the
expected output.

    python3 bench/half/make_cases.py OUTDIR [--mm4096-inputs]

--mm4096-inputs writes only the large inputs (mm4096's, conv_resnet's and
add_relu's, made on the GPU machine: they are too large to carry there).

- exact_ragged: [100, 70] x [70, 130] + bias, relu; small integers, so
  every product and sum is exact in f32 and the result exact in f16.
- exact_aligned: [256, 512] x [512, 384]; integers in {-1, 0, 1}.
- linear_gelu: x [128, 768] times W^T for W [3072, 768] (B read through a
  transpose) + bias, GELU (the exact, erf form); values of N(0, 0.1);
  reference in float64.
- mm4096: 4096^3, N(0, 1) values, for speed.
- exact_conv: [2, 16, 12, 12] conv [32, 16, 3, 3], padding 1, + bias, relu;
  integers in {-1, 0, 1}.
- exact_batched: [4, 48, 64] x [4, 64, 80] and, through a transpose,
  [4, 48, 64] x [80, 64]^T shared by the batch (attention's q k^T);
  integers in {-1, 0, 1}.
- exact_conv_strided: [2, 32, 15, 13] conv [128, 16, 3, 3], groups 2,
  stride 2, padding 2, dilation 2 (k = 144 and 56 columns per image: ragged
  tiles); integers in {-1, 0, 1}.
- conv_resnet: the ResNet stage at batch 32, [32, 64, 56, 56] conv
  [64, 64, 3, 3], padding 1, for speed (inputs made there, as mm4096's).
- exact_conv_rows: [2, 64, 8, 24] conv [64, 64, 3, 3], padding 1, + bias
  (rows of whole 8-groups: the gather of 8 columns from two 16-byte reads);
  exact_conv_rows5: [3, 16, 5, 24] conv [32, 16, 5, 5], padding 2 (ragged
  k and n, windows two groups wide); integers in {-1, 0, 1}.
- add_relu_f32, add_relu_f16: relu(a + b) of two [4096, 4096] tensors, for
  bandwidth (inputs made there): half the bytes, about half the time.
- bf16 (on cooperative matrices where the device multiplies bf16; .npy of
  uint16 bits, Kiln's convention): exact_bf16_ragged, exact_bf16_conv64 and
  exact_bf16_conv_rows (exact_ragged's, exact_conv64's and exact_conv_rows'
  integers), linear_gelu_bf16, and
  mm4096_bf16 for speed (inputs made there).
"""
import math
import os
import sys

import numpy as np

out = sys.argv[1]
large_only = "--mm4096-inputs" in sys.argv[2:]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)


def save(name, *inputs, want=None):
    """The inputs as <name>_in<i>.npy, in the graph's order."""
    for i, value in enumerate(inputs):
        np.save(os.path.join(out, f"{name}_in{i}.npy"), value)
    if want is not None:
        np.save(os.path.join(out, f"{name}_want.npy"), want)


def bf16(x):
    """float values as bf16 bits (uint16), rounded to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


if large_only:
    n = 4096
    save("mm4096", rng.standard_normal((n, n)).astype(np.float16),
         rng.standard_normal((n, n)).astype(np.float16))
    save("mm4096_bf16", bf16(rng.standard_normal((n, n))), bf16(rng.standard_normal((n, n))))
    save("conv_resnet", rng.standard_normal((32, 64, 56, 56)).astype(np.float16),
         (rng.standard_normal((64, 64, 3, 3)) * 0.1).astype(np.float16))
    for ty in (np.float32, np.float16):
        name = "add_relu_" + np.dtype(ty).name.replace("float", "f")
        save(name, rng.standard_normal((4096, 4096)).astype(ty),
             rng.standard_normal((4096, 4096)).astype(ty))
    sys.exit(0)


def graph(name, body, inputs, result):
    lines = ["module {", f"  func.func @graph() -> {result} {{"]
    for i, t in enumerate(inputs):
        lines.append(f'    %in{i} = kiln.input {i} on "cpu:0" : {t}')
    lines += ["    " + line for line in body]
    lines += [f"    return %y : {result}", "  }", "}"]
    with open(os.path.join(out, f"{name}.mlir"), "w") as f:
        f.write("\n".join(lines) + "\n")


def t(*shape):
    return "tensor<" + "x".join(map(str, shape)) + "xf16>"


def tb(*shape):
    return "tensor<" + "x".join(map(str, shape)) + "xbf16>"


# The graphs that run in f16 and in bf16; `ty` gives the tensor types.
def ragged_graph(name, ty):
    graph(name, [
        f"%m = kiln.matmul %in0, %in1 : {ty(100, 70)}, {ty(70, 130)} -> {ty(100, 130)}",
        f"%s = kiln.add %m, %in2 : {ty(100, 130)}, {ty(130)} -> {ty(100, 130)}",
        f"%y = kiln.relu %s : {ty(100, 130)}"], [ty(100, 70), ty(70, 130), ty(130)], ty(100, 130))


def linear_gelu_graph(name, ty):
    graph(name, [
        f"%wt = kiln.transpose %in1 [1, 0] : {ty(3072, 768)} -> {ty(768, 3072)}",
        f"%m = kiln.matmul %in0, %wt : {ty(128, 768)}, {ty(768, 3072)} -> {ty(128, 3072)}",
        f"%s = kiln.add %m, %in2 : {ty(128, 3072)}, {ty(3072)} -> {ty(128, 3072)}",
        f"%y = kiln.gelu %s : {ty(128, 3072)}"], [ty(128, 768), ty(3072, 768), ty(3072)],
        ty(128, 3072))


def mm4096_graph(name, ty):
    n = 4096
    graph(name, [f"%y = kiln.matmul %in0, %in1 : {ty(n, n)}, {ty(n, n)} -> {ty(n, n)}"],
          [ty(n, n), ty(n, n)], ty(n, n))


def conv64_graph(name, ty):
    graph(name, [
        f"%c = kiln.conv2d %in0, %in1 strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : {ty(2, 32, 10, 10)}, {ty(64, 32, 3, 3)} -> {ty(2, 64, 10, 10)}",
        f"%y = kiln.add %c, %in2 : {ty(2, 64, 10, 10)}, {ty(64, 1, 1)} -> {ty(2, 64, 10, 10)}"],
        [ty(2, 32, 10, 10), ty(64, 32, 3, 3), ty(64, 1, 1)], ty(2, 64, 10, 10))


def conv_rows_graph(name, ty):
    graph(name, [
        f"%c = kiln.conv2d %in0, %in1 strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : {ty(2, 64, 8, 24)}, {ty(64, 64, 3, 3)} -> {ty(2, 64, 8, 24)}",
        f"%y = kiln.add %c, %in2 : {ty(2, 64, 8, 24)}, {ty(64, 1, 1)} -> {ty(2, 64, 8, 24)}"],
        [ty(2, 64, 8, 24), ty(64, 64, 3, 3), ty(64, 1, 1)], ty(2, 64, 8, 24))


def conv3x3(x, w):
    """A 3x3 convolution with padding 1, stride 1, in float64."""
    n, _, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, w.shape[0], h, wd))
    for kh in range(3):
        for kw in range(3):
            y += np.einsum("nchw,oc->nohw", xp[:, :, kh:kh + h, kw:kw + wd], w[:, :, kh, kw])
    return y


def conv_general(x, w, stride, pad, dil, groups):
    """A convolution in float64, PyTorch's conv2d semantics."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    wo = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, o, ho, wo))
    og = o // groups
    for g in range(groups):
        xs, ws = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dil:i * dil + stride * (ho - 1) + 1:stride,
                           j * dil:j * dil + stride * (wo - 1) + 1:stride]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return y


# exact_ragged
a = rng.integers(-2, 3, (100, 70)).astype(np.float16)
b = rng.integers(-2, 3, (70, 130)).astype(np.float16)
c = rng.integers(-3, 4, (130,)).astype(np.float16)
want = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + c, 0).astype(np.float16)
save("exact_ragged", a, b, c, want=want)
ragged_graph("exact_ragged", t)

# exact_aligned
a = rng.integers(-1, 2, (256, 512)).astype(np.float16)
b = rng.integers(-1, 2, (512, 384)).astype(np.float16)
save("exact_aligned", a, b, want=(a.astype(np.float64) @ b).astype(np.float16))
graph("exact_aligned", [f"%y = kiln.matmul %in0, %in1 : {t(256, 512)}, {t(512, 384)} -> {t(256, 384)}"],
      [t(256, 512), t(512, 384)], t(256, 384))

# linear_gelu
x = (rng.standard_normal((128, 768)) * 0.1).astype(np.float16)
w = (rng.standard_normal((3072, 768)) * 0.1).astype(np.float16)
bias = (rng.standard_normal(3072) * 0.1).astype(np.float16)
h = x.astype(np.float64) @ w.astype(np.float64).T + bias
gelu = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
save("linear_gelu", x, w, bias, want=gelu.astype(np.float16))
linear_gelu_graph("linear_gelu", t)

# mm4096 (its inputs: --mm4096-inputs)
mm4096_graph("mm4096", t)

# exact_conv
x = rng.integers(-1, 2, (2, 16, 12, 12)).astype(np.float16)
w = rng.integers(-1, 2, (32, 16, 3, 3)).astype(np.float16)
bias = rng.integers(-2, 3, (32, 1, 1)).astype(np.float16)
save("exact_conv", x, w, bias, want=np.maximum(conv3x3(x, w) + bias, 0).astype(np.float16))
graph("exact_conv", [
    f"%c = kiln.conv2d %in0, %in1 strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : {t(2, 16, 12, 12)}, {t(32, 16, 3, 3)} -> {t(2, 32, 12, 12)}",
    f"%s = kiln.add %c, %in2 : {t(2, 32, 12, 12)}, {t(32, 1, 1)} -> {t(2, 32, 12, 12)}",
    f"%y = kiln.relu %s : {t(2, 32, 12, 12)}"], [t(2, 16, 12, 12), t(32, 16, 3, 3), t(32, 1, 1)],
    t(2, 32, 12, 12))

def exact_conv_case(name, xs, ws, stride, pad, dil, groups):
    """A convolution of integers in {-1, 0, 1}, its float64 reference."""
    x = rng.integers(-1, 2, xs).astype(np.float16)
    w = rng.integers(-1, 2, ws).astype(np.float16)
    want = conv_general(x, w, stride, pad, dil, groups).astype(np.float16)
    save(name, x, w, want=want)
    graph(name, [
        f"%y = kiln.conv2d %in0, %in1 strides [{stride}, {stride}] padding [{pad}, {pad}] dilation [{dil}, {dil}] groups {groups} : {t(*xs)}, {t(*ws)} -> {t(*want.shape)}"],
        [t(*xs), t(*ws)], t(*want.shape))


# exact_conv_strided: every term of the gather's window (stride, padding,
# dilation, groups) and ragged k and n
exact_conv_case("exact_conv_strided", (2, 32, 15, 13), (128, 16, 3, 3), 2, 2, 2, 2)

# conv_resnet (its inputs: --mm4096-inputs)
graph("conv_resnet", [
    f"%y = kiln.conv2d %in0, %in1 strides [1, 1] padding [1, 1] dilation [1, 1] groups 1 : {t(32, 64, 56, 56)}, {t(64, 64, 3, 3)} -> {t(32, 64, 56, 56)}"],
    [t(32, 64, 56, 56), t(64, 64, 3, 3)], t(32, 64, 56, 56))

# exact_batched
a = rng.integers(-1, 2, (4, 48, 64)).astype(np.float16)
b = rng.integers(-1, 2, (4, 64, 80)).astype(np.float16)
k = rng.integers(-1, 2, (80, 64)).astype(np.float16)
want = (a.astype(np.float64) @ b + a.astype(np.float64) @ k.astype(np.float64).T).astype(np.float16)
save("exact_batched", a, b, k, want=want)
graph("exact_batched", [
    f"%m = kiln.matmul %in0, %in1 : {t(4, 48, 64)}, {t(4, 64, 80)} -> {t(4, 48, 80)}",
    f"%kt = kiln.transpose %in2 [1, 0] : {t(80, 64)} -> {t(64, 80)}",
    f"%n = kiln.matmul %in0, %kt : {t(4, 48, 64)}, {t(64, 80)} -> {t(4, 48, 80)}",
    f"%y = kiln.add %m, %n : {t(4, 48, 80)}, {t(4, 48, 80)} -> {t(4, 48, 80)}"],
    [t(4, 48, 64), t(4, 64, 80), t(80, 64)], t(4, 48, 80))

# exact_conv64: 64 filters, the convolutions' own default shape (64 x 64 x
# 32 tiles, 2 x 4 subgroups, two stages), a ragged plane (10 x 10 = 100
# columns per image) and a bias
x = rng.integers(-1, 2, (2, 32, 10, 10)).astype(np.float16)
w = rng.integers(-1, 2, (64, 32, 3, 3)).astype(np.float16)
bias = rng.integers(-2, 3, (64, 1, 1)).astype(np.float16)
save("exact_conv64", x, w, bias, want=(conv3x3(x, w) + bias).astype(np.float16))
conv64_graph("exact_conv64", t)

# exact_conv_rows, exact_conv_rows5: widths of whole 8-groups
x = rng.integers(-1, 2, (2, 64, 8, 24)).astype(np.float16)
w = rng.integers(-1, 2, (64, 64, 3, 3)).astype(np.float16)
bias = rng.integers(-2, 3, (64, 1, 1)).astype(np.float16)
save("exact_conv_rows", x, w, bias, want=(conv3x3(x, w) + bias).astype(np.float16))
conv_rows_graph("exact_conv_rows", t)
rows_x, rows_w, rows_bias = x, w, bias

exact_conv_case("exact_conv_rows5", (3, 16, 5, 24), (32, 16, 5, 5), 1, 2, 1, 1)

# add_relu_f32, add_relu_f16 (their inputs: --mm4096-inputs)
for name, ty in (("add_relu_f32", lambda *d: t(*d).replace("f16", "f32")), ("add_relu_f16", t)):
    graph(name, [f"%s = kiln.add %in0, %in1 : {ty(4096, 4096)}, {ty(4096, 4096)} -> {ty(4096, 4096)}",
                 f"%y = kiln.relu %s : {ty(4096, 4096)}"], [ty(4096, 4096), ty(4096, 4096)], ty(4096, 4096))

# The bf16 cases: the same integers (exact in bf16: 8 bits of mantissa hold
# every partial sum here), a linear layer, and the 4096^3 matmul for speed.
a = rng.integers(-2, 3, (100, 70))
b = rng.integers(-2, 3, (70, 130))
c = rng.integers(-3, 4, (130,))
save("exact_bf16_ragged", bf16(a), bf16(b), bf16(c), want=bf16(np.maximum(a @ b + c, 0)))
ragged_graph("exact_bf16_ragged", tb)

x = rng.integers(-1, 2, (2, 32, 10, 10))
w = rng.integers(-1, 2, (64, 32, 3, 3))
bias = rng.integers(-2, 3, (64, 1, 1))
save("exact_bf16_conv64", bf16(x), bf16(w), bf16(bias), want=bf16(conv3x3(x, w) + bias))
conv64_graph("exact_bf16_conv64", tb)

save("exact_bf16_conv_rows", bf16(rows_x.astype(np.float64)), bf16(rows_w.astype(np.float64)),
     bf16(rows_bias.astype(np.float64)), want=bf16(conv3x3(rows_x, rows_w) + rows_bias))
conv_rows_graph("exact_bf16_conv_rows", tb)

x = bf16(rng.standard_normal((128, 768)) * 0.1)
w = bf16(rng.standard_normal((3072, 768)) * 0.1)
bias = bf16(rng.standard_normal(3072) * 0.1)
as_float = lambda v: (v.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
h = as_float(x) @ as_float(w).T + as_float(bias)
save("linear_gelu_bf16", x, w, bias,
     want=bf16(0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))))
linear_gelu_graph("linear_gelu_bf16", tb)

mm4096_graph("mm4096_bf16", tb)
