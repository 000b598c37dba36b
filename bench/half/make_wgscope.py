#!/usr/bin/env python3
"""Workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2) on the
4096^3 f16 matmul: how fast a GEMM runs when the driver stages the
tiles through shared memory itself.

  make_wgscope.py OUT_DIR BIN_DIR

Each variant is a whole GEMM, C = A @ B (f16 in, f32 accumulators, f16
out): a workgroup owns one BM x BN tile of C as one workgroup-scope matrix
and steps k by BK, loading its A and B tiles straight from the storage
buffers. MLIR's GPU dialect knows only subgroup fragments of 16 x 16, so the
kernel is written with those, lowered by `kiln-opt --kiln-linalg-to-spirv`,
and its matrix types rewritten to workgroup scope and the tile's sizes; the
f32 result is converted to f16 before the store. `kiln-spirv-check --output`
serializes it and the words of `OpExtension "SPV_NV_cooperative_matrix2"`
(absent from MLIR's SPIR-V dialect) are inserted after the capabilities.
Writes NAME.spv and NAME.kernel (kiln-spirv-replay manifests).
"""
import os
import re
import struct
import subprocess
import sys

M = N = K = 4096


def kernel(bm, bn, bk, threads, prefetch=False):
    a_t = '!gpu.mma_matrix<16x16xf16, "AOp">'
    b_t = '!gpu.mma_matrix<16x16xf16, "BOp">'
    c_t = '!gpu.mma_matrix<16x16xf32, "COp">'
    L = []
    e = L.append
    e(f"func.func @wg(%a: memref<{M * K}xf16>, %b: memref<{K * N}xf16>, %c: memref<{M * N}xf32>) {{")
    e("  %c1 = arith.constant 1 : index")
    e(f"  %gx = arith.constant {N // bn} : index")
    e(f"  %gy = arith.constant {M // bm} : index")
    e(f"  %t = arith.constant {threads} : index")
    e("  gpu.launch blocks(%bx, %by, %bz) in (%x = %gx, %y = %gy, %z = %c1)")
    e("             threads(%tx, %ty, %tz) in (%sx = %t, %sy = %c1, %sz = %c1) {")
    e("    %c0 = arith.constant 0 : index")
    e(f"    %cK = arith.constant {K} : index")
    e(f"    %cN = arith.constant {N} : index")
    e(f"    %cbm = arith.constant {bm} : index")
    e(f"    %cbn = arith.constant {bn} : index")
    e(f"    %cbk = arith.constant {bk} : index")
    e("    %row0 = arith.muli %by, %cbm : index")
    e("    %col0 = arith.muli %bx, %cbn : index")
    e("    %arow = arith.muli %row0, %cK : index")
    e("    %zf = arith.constant 0.0 : f32")
    e(f"    %zero = gpu.subgroup_mma_constant_matrix %zf : {c_t}")
    if prefetch:
        # The next tiles loaded before this step's multiply (registers
        # rotate through the loop), the last step peeled off.
        e(f"    %fa0 = gpu.subgroup_mma_load_matrix %a[%arow] {{leadDimension = {K} : index}} : memref<{M * K}xf16> -> {a_t}")
        e(f"    %fb0 = gpu.subgroup_mma_load_matrix %b[%col0] {{leadDimension = {N} : index}} : memref<{K * N}xf16> -> {b_t}")
        e(f"    %res0:3 = scf.for %k = %cbk to %cK step %cbk iter_args(%acc = %zero, %ca = %fa0, %cb = %fb0) -> ({c_t}, {a_t}, {b_t}) {{")
        e("      %ao = arith.addi %arow, %k : index")
        e(f"      %fa = gpu.subgroup_mma_load_matrix %a[%ao] {{leadDimension = {K} : index}} : memref<{M * K}xf16> -> {a_t}")
        e("      %krow = arith.muli %k, %cN : index")
        e("      %bo = arith.addi %krow, %col0 : index")
        e(f"      %fb = gpu.subgroup_mma_load_matrix %b[%bo] {{leadDimension = {N} : index}} : memref<{K * N}xf16> -> {b_t}")
        e(f"      %n = gpu.subgroup_mma_compute %ca, %cb, %acc : {a_t}, {b_t} -> {c_t}")
        e(f"      scf.yield %n, %fa, %fb : {c_t}, {a_t}, {b_t}")
        e("    }")
        e(f"    %res = gpu.subgroup_mma_compute %res0#1, %res0#2, %res0#0 : {a_t}, {b_t} -> {c_t}")
    else:
        e(f"    %res = scf.for %k = %c0 to %cK step %cbk iter_args(%acc = %zero) -> ({c_t}) {{")
        e("      %ao = arith.addi %arow, %k : index")
        e(f"      %fa = gpu.subgroup_mma_load_matrix %a[%ao] {{leadDimension = {K} : index}} : memref<{M * K}xf16> -> {a_t}")
        e("      %krow = arith.muli %k, %cN : index")
        e("      %bo = arith.addi %krow, %col0 : index")
        e(f"      %fb = gpu.subgroup_mma_load_matrix %b[%bo] {{leadDimension = {N} : index}} : memref<{K * N}xf16> -> {b_t}")
        e(f"      %n = gpu.subgroup_mma_compute %fa, %fb, %acc : {a_t}, {b_t} -> {c_t}")
        e(f"      scf.yield %n : {c_t}")
        e("    }")
    e("    %crow = arith.muli %row0, %cN : index")
    e("    %co = arith.addi %crow, %col0 : index")
    e(f"    gpu.subgroup_mma_store_matrix %res, %c[%co] {{leadDimension = {N} : index}} : {c_t}, memref<{M * N}xf32>")
    e("    gpu.terminator")
    e("  }")
    e("  return")
    e("}")
    return "\n".join(L) + "\n"


def to_workgroup(spirv, bm, bn, bk):
    """The lowered module with workgroup-scope matrices of the tile's sizes
    and an f16 C buffer (the store converts)."""
    s = spirv.replace("!spirv.coopmatrix<16x16xf16, Subgroup, MatrixA>",
                      f"!spirv.coopmatrix<{bm}x{bk}xf16, Workgroup, MatrixA>")
    s = s.replace("!spirv.coopmatrix<16x16xf16, Subgroup, MatrixB>",
                  f"!spirv.coopmatrix<{bk}x{bn}xf16, Workgroup, MatrixB>")
    acc = f"!spirv.coopmatrix<{bm}x{bn}xf32, Workgroup, MatrixAcc>"
    s = s.replace("!spirv.coopmatrix<16x16xf32, Subgroup, MatrixAcc>", acc)
    s = s.replace(f"!spirv.array<{M * N} x f32, stride=4>", f"!spirv.array<{M * N} x f16, stride=2>")
    s = s.replace("!spirv.ptr<f32, StorageBuffer>", "!spirv.ptr<f16, StorageBuffer>")
    half = acc.replace("xf32", "xf16")
    store = re.compile(r"( *)spirv\.KHR\.CooperativeMatrixStore (%\S+), (%\S+), (.*) : (\S+ \S+), "
                       + re.escape(acc) + r", i32")
    m = store.search(s)
    assert m, "no store to rewrite"
    ind, ptr, val, rest, ptr_t = m.groups()
    new = (f"{ind}%half_out = spirv.FConvert {val} : {acc} to {half}\n"
           f"{ind}spirv.KHR.CooperativeMatrixStore {ptr}, %half_out, {rest} : {ptr_t}, {half}, i32")
    return s[:m.start()] + new + s[m.end():]


def instructions(words):
    i, out = 5, []
    while i < len(words):
        n = words[i] >> 16
        out.append(words[i:i + n])
        i += n
    return out


def add_capability(words, cap):
    i = 5
    while i < len(words) and (words[i] & 0xFFFF) == 17:
        i += words[i] >> 16
    return words[:i] + [(2 << 16) | 17, cap] + words[i:]


def to_tensor_loads(words, bm, bn, bk):
    """Each A and B load becomes OpCooperativeMatrixLoadTensorNV through a
    2-d tensor layout (SPV_NV_tensor_addressing) of the tile's rows and the
    whole row length, sliced to the tile: the driver then knows the tile's
    shape and strides and may copy it asynchronously."""
    insts = instructions(words)
    bound = words[3]
    consts, int32, uses = {}, None, {}
    for w in insts:
        op = w[0] & 0xFFFF
        if op == 21 and w[2] == 32 and int32 is None:
            int32 = w[1]
        elif op == 43:
            consts[w[2]] = w[3]
    for w in insts:
        if (w[0] & 0xFFFF) == 4456:  # OpTypeCooperativeMatrixKHR
            uses[w[1]] = consts[w[6]]

    def fresh():
        nonlocal bound
        bound += 1
        return bound - 1
    new_consts = {}

    def const(v):
        if v not in new_consts:
            new_consts[v] = fresh()
        return new_consts[v]
    tl = fresh()
    body = []
    for w in insts:
        op = w[0] & 0xFFFF
        if op != 4457 or uses.get(w[1]) not in (0, 1):
            body.append(w)
            continue
        rtype, res, ptr = w[1], w[2], w[3]
        # A: the tile's bm rows of K, sliced to bm x bk; B: bk rows of N, to bk x bn.
        (rows, cols), first = ((bm, K), (bm, bk)) if uses[rtype] == 0 else ((bk, N), (bk, bn))
        l0, l1, l2, undef = fresh(), fresh(), fresh(), fresh()
        body.append([(3 << 16) | 5372, tl, l0])
        body.append([(6 << 16) | 5373, tl, l1, l0, const(rows), const(cols)])
        body.append([(8 << 16) | 5375, tl, l2, l1, const(0), const(first[0]), const(0), const(first[1])])
        body.append([(3 << 16) | 1, rtype, undef])
        body.append([(8 << 16) | 5367, rtype, res, ptr, undef, l2, 0, 0])
    layout_type = [(4 << 16) | 5370, tl, const(2), const(0)]  # 2-d, no clamping
    decls = [[(4 << 16) | 43, int32, cid, v] for v, cid in new_consts.items()] + [layout_type]
    out = []
    for w in body:
        if (w[0] & 0xFFFF) == 54 and decls:  # first OpFunction
            out.extend(decls)
            decls = []
        out.append(w)
    flat = words[:5] + [x for w in out for x in w]
    flat[3] = bound
    flat = add_capability(flat, 5439)  # TensorAddressingNV
    flat = add_capability(flat, 5433)  # CooperativeMatrixTensorAddressingNV
    return add_extension(flat, "SPV_NV_tensor_addressing")


def add_extension(words, name):
    """Inserts OpExtension `name` after the module's OpCapability words."""
    data = name.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    operands = list(struct.unpack(f"<{len(data) // 4}I", data))
    inst = [((1 + len(operands)) << 16) | 10] + operands
    i = 5
    while i < len(words) and (words[i] & 0xFFFF) == 17:  # OpCapability
        i += words[i] >> 16
    return words[:i] + inst + words[i:]


def main():
    out, bins = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    shapes = [(128, 128, 32, 256), (128, 256, 32, 256), (256, 128, 32, 256),
              (128, 128, 64, 256), (128, 256, 64, 256), (256, 128, 64, 256),
              (128, 128, 32, 128), (128, 128, 64, 128), (256, 256, 32, 256)]
    variants = [(s, pre, tensor) for s in shapes for pre in (False, True) for tensor in (False, True)]
    for (bm, bn, bk, threads), prefetch, tensor in variants:
        name = f"wg_{bm}x{bn}x{bk}_t{threads}" + ("_pre" if prefetch else "") + ("_tensor" if tensor else "")
        text = kernel(bm, bn, bk, threads, prefetch)
        lowered = subprocess.run([f"{bins}/kiln-opt", "-", "--kiln-linalg-to-spirv"], input=text,
                                 capture_output=True, text=True, check=True).stdout
        start = lowered.index("  spirv.module")
        end = lowered.index("\n  }\n", lowered.index("spirv.func")) + 4
        module = "module {\n" + to_workgroup(lowered[start:end], bm, bn, bk) + "}\n"
        spv = os.path.join(out, name + ".spv")
        r = subprocess.run([f"{bins}/kiln-spirv-check", "-", "--output", spv], input=module,
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{name}: kiln-spirv-check failed:\n{r.stdout}{r.stderr}\n{module}")
        raw = open(spv, "rb").read()
        words = list(struct.unpack(f"<{len(raw) // 4}I", raw))
        if tensor:
            words = to_tensor_loads(words, bm, bn, bk)
        words = add_extension(words, "SPV_NV_cooperative_matrix2")
        with open(spv, "wb") as f:
            f.write(struct.pack(f"<{len(words)}I", *words))
        flop = 2 * M * N * K
        with open(os.path.join(out, name + ".kernel"), "w") as f:
            f.write(f"spirv {name}.spv\nentry wg_kernel\ngroups {N // bn} {M // bm} 1\n"
                    f"bindings {2 * M * K} {2 * K * N} {2 * M * N}\nhalves 0 1 2\noutputs 2\n"
                    f"label {name} {flop} FLOP\n")


if __name__ == "__main__":
    main()
