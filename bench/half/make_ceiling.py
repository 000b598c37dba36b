#!/usr/bin/env python3
"""Cooperative-matrix ceilings on a GPU: kernels that only
multiply, so the rate a GEMM could reach is known before tuning one.

  make_ceiling.py OUT_DIR

writes one .mlir per variant; scripts/half-gpu-bench.sh ceiling-dump lowers
each with kiln-opt to SPIR-V and writes kiln-spirv-replay manifests.
Variants (every subgroup holds fm x fn f32 accumulators of 16 x 16 and
runs `iters` steps of fm x fn multiply-adds, k 16 each):
  reg   fragments loaded once, kept in registers: the multiply-add rate.
  smem  A and B fragments loaded from workgroup memory every step (two
        buffers alternating, as the coop_gemm form's stages): the rate with
        the shared-memory loads a GEMM cannot avoid.
  bar   smem, with a workgroup barrier every `kk` steps (the form's k slices).
"""
import os
import sys

GROUPS = 132 * 8  # several waves of workgroups on 132 compute units


def kernel(mode, sm, sn, fm, fn, iters, kk=2):
    subgroups = sm * sn
    threads = subgroups * 32
    frag = 16 * 16
    a_t = '!gpu.mma_matrix<16x16xf16, "AOp">'
    b_t = '!gpu.mma_matrix<16x16xf16, "BOp">'
    c_t = '!gpu.mma_matrix<16x16xf32, "COp">'
    # The coop_gemm form's shared tiles: A [TM][TK + 8], B [TK][TN + 8], two
    # buffers; k slices of TK = 16 * kk; step `it` reads slice it / kk of
    # buffer (it / kk) % 2 at k (it % kk) * 16.
    tm, tn, tk = sm * fm * 16, sn * fn * 16, 16 * kk
    lda, ldb = tk + 8, tn + 8
    a_units, b_units = tm * lda, tk * ldb
    src = 2 * max(a_units, b_units, (fm + fn) * frag)
    out_elems = GROUPS * subgroups * fm * fn * frag
    L = []
    e = L.append
    e(f"func.func @ceiling(%src: memref<{src}xf16>, %out: memref<{out_elems}xf32>) {{")
    for c in (0, 1, 2, 16, 32):
        e(f"  %c{c} = arith.constant {c} : index")
    e(f"  %groups = arith.constant {GROUPS} : index")
    e(f"  %threads = arith.constant {threads} : index")
    e(f"  %iters = arith.constant {iters} : index")
    e("  gpu.launch blocks(%bx, %by, %bz) in (%gx = %groups, %gy = %c1, %gz = %c1)")
    e("             threads(%tx, %ty, %tz) in (%sx = %threads, %sy = %c1, %sz = %c1) {")
    e("    %sg = arith.divui %tx, %c32 : index")
    e(f"    %csn = arith.constant {sn} : index")
    e("    %sr = arith.divui %sg, %csn : index")
    e("    %sc = arith.remui %sg, %csn : index")
    e("    %zf = arith.constant 0.0 : f32")
    e(f"    %zero = gpu.subgroup_mma_constant_matrix %zf : {c_t}")
    if mode != "reg":
        e(f"    %sa = memref.alloc() : memref<{2 * a_units}xf16, 3>")
        e(f"    %sb = memref.alloc() : memref<{2 * b_units}xf16, 3>")
        # The tiles filled from the source once (the values do not matter).
        e(f"    %per = arith.constant {(src + threads - 1) // threads} : index")
        e(f"    %ca = arith.constant {2 * a_units} : index")
        e(f"    %cb = arith.constant {2 * b_units} : index")
        e(f"    %csrc = arith.constant {src} : index")
        e("    scf.for %i = %c0 to %per step %c1 {")
        e("      %t = arith.muli %i, %threads : index")
        e("      %f = arith.addi %t, %tx : index")
        e("      %ins = arith.cmpi ult, %f, %csrc : index")
        e("      scf.if %ins {")
        e(f"        %v = memref.load %src[%f] : memref<{src}xf16>")
        e("        %ina = arith.cmpi ult, %f, %ca : index")
        e("        scf.if %ina {")
        e(f"          memref.store %v, %sa[%f] : memref<{2 * a_units}xf16, 3>")
        e("        }")
        e("        %inb = arith.cmpi ult, %f, %cb : index")
        e("        scf.if %inb {")
        e(f"          memref.store %v, %sb[%f] : memref<{2 * b_units}xf16, 3>")
        e("        }")
        e("      }")
        e("    }")
        e("    gpu.barrier")
        # This subgroup's first A row and B column.
        e(f"    %wm = arith.constant {fm * 16 * lda} : index")
        e(f"    %wn = arith.constant {fn * 16} : index")
        e("    %arow = arith.muli %sr, %wm : index")
        e("    %bcol = arith.muli %sc, %wn : index")
    else:
        for i in range(fm):
            e(f"    %o_a{i} = arith.constant {i * frag} : index")
            e(f"    %fa{i} = gpu.subgroup_mma_load_matrix %src[%o_a{i}] {{leadDimension = 16 : index}} : memref<{src}xf16> -> {a_t}")
        for j in range(fn):
            e(f"    %o_b{j} = arith.constant {(fm + j) * frag} : index")
            e(f"    %fb{j} = gpu.subgroup_mma_load_matrix %src[%o_b{j}] {{leadDimension = 16 : index}} : memref<{src}xf16> -> {b_t}")
    accs = [f"%acc{i}_{j}" for i in range(fm) for j in range(fn)]
    inits = ", ".join(f"{a} = %zero" for a in accs)
    types = ", ".join([c_t] * len(accs))
    e(f"    %res:{len(accs)} = scf.for %it = %c0 to %iters step %c1 iter_args({inits}) -> ({types}) {{")
    if mode != "reg":
        e(f"      %ckk = arith.constant {kk} : index")
        e("      %slice = arith.divui %it, %ckk : index")
        e("      %step = arith.remui %it, %ckk : index")
        e("      %par = arith.remui %slice, %c2 : index")
        e("      %k = arith.muli %step, %c16 : index")
        e(f"      %au = arith.constant {a_units} : index")
        e(f"      %bu = arith.constant {b_units} : index")
        e(f"      %ldbc = arith.constant {ldb} : index")
        e("      %abuf = arith.muli %par, %au : index")
        e("      %bbuf = arith.muli %par, %bu : index")
        e("      %a0 = arith.addi %abuf, %arow : index")
        e("      %abase = arith.addi %a0, %k : index")
        e("      %krow = arith.muli %k, %ldbc : index")
        e("      %b0 = arith.addi %bbuf, %krow : index")
        e("      %bbase = arith.addi %b0, %bcol : index")
        for i in range(fm):
            e(f"      %oa{i} = arith.constant {i * 16 * lda} : index")
            e(f"      %pa{i} = arith.addi %abase, %oa{i} : index")
            e(f"      %fa{i} = gpu.subgroup_mma_load_matrix %sa[%pa{i}] {{leadDimension = {lda} : index}} : memref<{2 * a_units}xf16, 3> -> {a_t}")
        for j in range(fn):
            e(f"      %ob{j} = arith.constant {j * 16} : index")
            e(f"      %pb{j} = arith.addi %bbase, %ob{j} : index")
            e(f"      %fb{j} = gpu.subgroup_mma_load_matrix %sb[%pb{j}] {{leadDimension = {ldb} : index}} : memref<{2 * b_units}xf16, 3> -> {b_t}")
    outs = []
    for i in range(fm):
        for j in range(fn):
            e(f"      %n{i}_{j} = gpu.subgroup_mma_compute %fa{i}, %fb{j}, %acc{i}_{j} : {a_t}, {b_t} -> {c_t}")
            outs.append(f"%n{i}_{j}")
    if mode == "bar":
        e("      %first = arith.cmpi eq, %step, %c0 : index")
        e("      scf.if %first {")
        e("        gpu.barrier")
        e("      }")
    e(f"      scf.yield {', '.join(outs)} : {types}")
    e("    }")
    e(f"    %per_group = arith.constant {subgroups * fm * fn * frag} : index")
    e("    %gbase = arith.muli %bx, %per_group : index")
    e(f"    %per_sg = arith.constant {fm * fn * frag} : index")
    e("    %sbase = arith.muli %sg, %per_sg : index")
    e("    %base = arith.addi %gbase, %sbase : index")
    for n, _ in enumerate(accs):
        e(f"    %so{n} = arith.constant {n * frag} : index")
        e(f"    %sp{n} = arith.addi %base, %so{n} : index")
        e(f"    gpu.subgroup_mma_store_matrix %res#{n}, %out[%sp{n}] {{leadDimension = 16 : index}} : {c_t}, memref<{out_elems}xf32>")
    e("    gpu.terminator")
    e("  }")
    e("  return")
    e("}")
    flop = GROUPS * subgroups * iters * fm * fn * 2 * 16 ** 3
    shared = 2 * 2 * (a_units + b_units) if mode != "reg" else 0
    return "\n".join(L) + "\n", flop, [2 * src, 4 * out_elems], shared


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    # (subgroups M x N, fragments per subgroup M x N): the coop_gemm form's
    # 128 x 128 tiles of 2 x 2, 2 x 4 and 4 x 2 subgroups, and smaller.
    shapes = ((2, 2, 4, 4), (2, 4, 4, 2), (4, 2, 2, 4), (2, 2, 2, 2), (1, 2, 4, 4), (2, 4, 2, 2))
    for mode in ("reg", "smem", "bar"):
        for sm, sn, fm, fn in shapes:
            iters = 8192 // (fm * fn) * 4
            text, flop, bindings, shared = kernel(mode, sm, sn, fm, fn, iters)
            if shared > 49152:
                continue
            name = f"{mode}_sg{sm}x{sn}_f{fm}x{fn}"
            with open(os.path.join(out, name + ".mlir"), "w") as f:
                f.write(text)
            with open(os.path.join(out, name + ".info"), "w") as f:
                f.write(f"groups {GROUPS} 1 1\nbindings {' '.join(map(str, bindings))}\n"
                        f"halves 0\noutputs 1\nlabel {name} {flop} FLOP\n")


if __name__ == "__main__":
    main()
