#!/usr/bin/env python3
"""Prototype: f16 GEMM on Hopper's warpgroup MMA (wgmma), written as PTX.

C[M,N] (f16) = A[M,K] (f16, row-major) x B[K,N] (f16, row-major), f32
accumulation. One warpgroup per CTA owns a BM x BN tile; S stages of BK
slices go through shared memory by cp.async (16-byte groups, 128- or 64-byte
swizzled rows, the layouts wgmma's descriptors name), and each stage feeds
BM/64 x BK/16 wgmma.m64nBNk16 instructions from shared memory. The driver
runs it through Vulkan (VK_NVX_binary_import); wgmma_gemm.cpp launches it.
Requires M % BM == N % BN == K % BK == 0 (a prototype).

usage: make_ptx.py OUTDIR   (writes one .ptx per variant and variants.txt)
"""
import os
import sys


def enc_desc_hi(lbo, sbo, swz):
    # bits 16-29 LBO>>4, 32-45 SBO>>4, 62-63 swizzle; the start address
    # (bits 0-13, >>4) is added at run time.
    return ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | swz << 62


SWZ_CODE = {128: 1, 64: 2, 32: 3}


def swizzle(off, row_bytes):
    mask = row_bytes // 16 - 1
    return off ^ (((off >> 7) & mask) << 4)


def gen(BM=128, BN=128, BK=64, S=4, bswap=False, wait=1, WG=1, maxnreg=0, group=0, noload=False, R=0, name="gemm"):
    T = 128 * WG
    assert BM % (64 * WG) == 0 and BN % 64 == 0 and BN <= 256 and BK in (16, 32, 64)
    MH = BM // WG // 64               # m64 slabs per warpgroup
    # Stages a load may overwrite: with one warpgroup the previous tile's
    # (its wgmma waited for), with more only the one before (all waited
    # for by the time of this iteration's barrier).
    D = S - 1 if (WG == 1 or wait == 0) else S - 2
    assert D >= 1
    a_row = BK * 2                     # bytes per A row in shared memory
    a_bytes = BM * a_row
    b_bytes = BK * BN * 2
    stage = a_bytes + b_bytes
    assert stage % 1024 == 0
    cpr = BK // 8                      # 16-byte chunks per A row
    a_pass = T // cpr                  # A rows per pass
    a_iters = BM // a_pass
    bcr = BN // 8                      # chunks per B row (k)
    b_pass = T // bcr
    b_iters = BK // b_pass
    assert a_iters * a_pass == BM and b_iters * b_pass == BK
    # every pass must see the same swizzle phase (rows step by whole 8-row atoms)
    assert a_pass % 8 == 0 and b_pass % 8 == 0
    assert MH * BN // 2 <= 128, "accumulators past the register file"
    nacc = BN // 2                     # f32 per thread per m64 slab
    descA = enc_desc_hi(16, 8 * a_row, SWZ_CODE[a_row])
    lbo_b, sbo_b = BK * 128, 1024
    if bswap:
        lbo_b, sbo_b = sbo_b, lbo_b
    descB = enc_desc_hi(lbo_b, sbo_b, 1)
    L = []
    e = L.append
    e(".version 8.0\n.target sm_90a\n.address_size 64\n")
    e(".extern .shared .align 1024 .b8 smem[];\n")
    e(f".visible .entry {name}(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 pm, .param .u32 pn, .param .u32 pk)")
    e(f".maxntid {T}, 1, 1")
    if maxnreg:
        e(f".maxnreg {maxnreg}")
    e("{")
    e("  .reg .pred %p<8>;\n  .reg .b32 %r<128>;\n  .reg .b64 %rd<128>;")
    e(f"  .reg .f32 %acc<{MH * nacc}>;")
    n_ld = a_iters + b_iters
    if R:
        e(f"  .reg .b32 %v<{R * n_ld * 4}>;")
    e("  ld.param.u64 %rd1, [pa];\n  ld.param.u64 %rd2, [pb];\n  ld.param.u64 %rd3, [pc];")
    e("  ld.param.u32 %r1, [pm];\n  ld.param.u32 %r2, [pn];\n  ld.param.u32 %r3, [pk];")
    e("  cvta.to.global.u64 %rd1, %rd1;\n  cvta.to.global.u64 %rd2, %rd2;\n  cvta.to.global.u64 %rd3, %rd3;")
    e("  mov.u32 %r4, %tid.x;\n  mov.u32 %r5, %ctaid.x;\n  mov.u32 %r6, %ctaid.y;")
    if group:
        # one-dimensional grid: GROUP tile rows at a time, column by column
        # inside the group, so the CTAs resident together share A and B in L2
        e(f"  div.u32 %r100, %r1, {BM};   // tile rows")
        e(f"  div.u32 %r101, %r2, {BN};   // tile columns")
        e(f"  mul.lo.u32 %r102, %r101, {group};")
        e("  div.u32 %r103, %r5, %r102;  // group")
        e(f"  mul.lo.u32 %r104, %r103, {group};  // first row")
        e("  sub.u32 %r105, %r100, %r104;\n  min.u32 %r105, %r105, " + str(group) + ";  // rows in group")
        e("  rem.u32 %r106, %r5, %r102;")
        e("  rem.u32 %r107, %r106, %r105;\n  add.u32 %r6, %r104, %r107;")
        e("  div.u32 %r5, %r106, %r105;")
    e(f"  mul.lo.u32 %r7, %r6, {BM};   // m0")
    e(f"  mul.lo.u32 %r8, %r5, {BN};   // n0")
    e("  mov.u32 %r9, smem;")
    # A source: row m0 + t/cpr, chunk t%cpr
    e(f"  div.u32 %r10, %r4, {cpr};\n  rem.u32 %r11, %r4, {cpr};")
    e("  add.u32 %r12, %r7, %r10;      // A row")
    e("  mul.wide.u32 %rd4, %r12, %r3;  // row*K")
    e("  mul.lo.u32 %r13, %r11, 8;")
    e("  cvt.u64.u32 %rd5, %r13;\n  add.u64 %rd4, %rd4, %rd5;\n  shl.b64 %rd4, %rd4, 1;\n  add.u64 %rd10, %rd1, %rd4;  // A src, pass 0")
    e(f"  mul.wide.u32 %rd6, %r3, {a_pass * 2};  // bytes between passes")
    for i in range(1, a_iters):
        e(f"  add.u64 %rd{10 + i}, %rd{10 + i - 1}, %rd6;")
    # A smem offset (swizzled), pass 0: row r = t/cpr, chunk c
    e(f"  mul.lo.u32 %r14, %r10, {a_row};\n  shl.b32 %r15, %r11, 4;\n  add.u32 %r14, %r14, %r15;")
    e(f"  shr.u32 %r16, %r14, 7;\n  and.b32 %r16, %r16, {a_row // 16 - 1};\n  shl.b32 %r16, %r16, 4;\n  xor.b32 %r14, %r14, %r16;  // A dst offset")
    # B source: k row t/bcr, chunk cn = t%bcr
    e(f"  div.u32 %r20, %r4, {bcr};\n  rem.u32 %r21, %r4, {bcr};")
    e("  mul.wide.u32 %rd7, %r20, %r2;   // k*N")
    e("  mul.lo.u32 %r22, %r21, 8;\n  add.u32 %r22, %r22, %r8;\n  cvt.u64.u32 %rd8, %r22;\n  add.u64 %rd7, %rd7, %rd8;\n  shl.b64 %rd7, %rd7, 1;")
    e("  add.u64 %rd30, %rd2, %rd7;  // B src, pass 0")
    e(f"  mul.wide.u32 %rd9, %r2, {b_pass * 2};")
    for i in range(1, b_iters):
        e(f"  add.u64 %rd{30 + i}, %rd{30 + i - 1}, %rd9;")
    # B dst: block mb = cn/8, chunk c = cn%8, row k: mb*(BK*128) + k*128 + c*16
    e(f"  shr.u32 %r23, %r21, 3;\n  mul.lo.u32 %r23, %r23, {BK * 128};\n  and.b32 %r24, %r21, 7;\n  shl.b32 %r24, %r24, 4;")
    e(f"  shl.b32 %r25, %r20, 7;\n  add.u32 %r23, %r23, %r25;\n  add.u32 %r23, %r23, %r24;")
    e(f"  shr.u32 %r26, %r23, 7;\n  and.b32 %r26, %r26, 7;\n  shl.b32 %r26, %r26, 4;\n  xor.b32 %r23, %r23, %r26;\n  add.u32 %r23, %r23, {a_bytes};  // B dst offset")
    e(f"  mul.wide.u32 %rd50, %r2, {BK * 2};  // B bytes per k slice")
    e(f"  div.u32 %r30, %r3, {BK};   // k tiles")
    e("  mov.u32 %r31, 0;  // k tile issued next")
    e("  mov.u32 %r32, 0;  // its stage")

    def next_sources():
        # every source pointer one k slice on
        for i in range(a_iters):
            e(f"  add.u64 %rd{10 + i}, %rd{10 + i}, {BK * 2};")
        for i in range(b_iters):
            e(f"  add.u64 %rd{30 + i}, %rd{30 + i}, %rd50;")

    def stage_targets():
        # this thread's A and B addresses in stage %r32
        e(f"  mul.lo.u32 %r33, %r32, {stage};\n  add.u32 %r33, %r33, %r9;")
        e("  add.u32 %r34, %r33, %r14;\n  add.u32 %r35, %r33, %r23;")

    def next_stage():
        e("  add.u32 %r31, %r31, 1;")
        e(f"  add.u32 %r32, %r32, 1;\n  setp.eq.u32 %p2, %r32, {S};\n  @%p2 mov.u32 %r32, 0;")

    def chunks():
        # (shared address, global pointer register, chunk number) of each
        # 16-byte group this thread moves per tile: A's, then B's
        for i in range(a_iters):
            yield f"%r34+{i * a_pass * a_row}", f"%rd{10 + i}", i
        for i in range(b_iters):
            yield f"%r35+{i * b_pass * 128}", f"%rd{30 + i}", a_iters + i

    def issue_loads(first=False):
        # tile %r31 into stage %r32 (guarded by kt < KT); noload: only the
        # prologue's loads, the loop multiplies what the stages hold (a
        # ceiling: the same kernel with nothing to read)
        e("  setp.lt.u32 %p1, %r31, %r30;")
        if noload and not first:
            e("  setp.lt.u32 %p1, %r31, 0;")
        stage_targets()
        for dst, src, _ in chunks():
            e(f"  @%p1 cp.async.cg.shared.global [{dst}], [{src}], 16;")
        e("  cp.async.commit_group;")
        next_sources()
        next_stage()

    def vregs(u, i):
        return "{" + ", ".join(f"%v{(u * n_ld + i) * 4 + c}" for c in range(4)) + "}"

    def ld_global(u):
        # tile %r36 into register slot u (guarded by kt < KT)
        e("  setp.lt.u32 %p5, %r36, %r30;")
        for _, src, i in chunks():
            e(f"  @%p5 ld.global.nc.v4.b32 {vregs(u, i)}, [{src}];")
        next_sources()
        e("  add.u32 %r36, %r36, 1;")

    def st_shared(u):
        # register slot u (tile %r31) into stage %r32
        e("  setp.lt.u32 %p1, %r31, %r30;")
        stage_targets()
        for dst, _, i in chunks():
            e(f"  @%p1 st.shared.v4.b32 [{dst}], {vregs(u, i)};")
        next_stage()

    for acc in range(MH * nacc):
        e(f"  mov.f32 %acc{acc}, 0f00000000;")
    for s in range(D):
        issue_loads(True)
    if R:
        e("  mov.u32 %r36, %r31;  // next tile into registers")
        for u in range(R):
            ld_global(u)
    e("  setp.eq.u32 %p3, %r9, %r9;  // scale-d: accumulate")
    e("  mov.u32 %r40, 0;  // k tile computed")
    e("  mov.u32 %r41, 0;  // its stage")
    for u in range(max(R, 1)):
        e(f"LOOP{u}:")
        e(f"  cp.async.wait_group {D - 1 if not R else 0};")
        e("  fence.proxy.async.shared::cta;")
        e("  bar.sync 0;")
        e(f"  mul.lo.u32 %r42, %r41, {stage};\n  add.u32 %r42, %r42, %r9;\n  add.u32 %r43, %r42, {a_bytes};")
        e("  shr.u32 %r42, %r42, 4;\n  shr.u32 %r43, %r43, 4;\n  cvt.u64.u32 %rd60, %r42;\n  cvt.u64.u32 %rd61, %r43;")
        e(f"  or.b64 %rd60, %rd60, {descA};\n  or.b64 %rd61, %rd61, {descB};")
        if WG > 1:
            e(f"  shr.u32 %r44, %r4, 7;\n  mul.lo.u32 %r44, %r44, {(BM // WG) * a_row >> 4};\n  cvt.u64.u32 %rd64, %r44;\n  add.s64 %rd60, %rd60, %rd64;")
        e("  wgmma.fence.sync.aligned;")
        for kk in range(BK // 16):
            e(f"  add.s64 %rd63, %rd61, {(kk * 16 * 128) >> 4};")
            for mh in range(MH):
                e(f"  add.s64 %rd62, %rd60, {(mh * 64 * a_row + kk * 32) >> 4};")
                regs = ", ".join(f"%acc{mh * nacc + j}" for j in range(nacc))
                e(f"  wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.f16.f16 {{{regs}}}, %rd62, %rd63, %p3, 1, 1, 0, 1;")
        e("  wgmma.commit_group.sync.aligned;")
        e(f"  wgmma.wait_group.sync.aligned {wait};")
        if wait == 0:
            e("  bar.sync 0;")
        if R:
            st_shared(u)
            ld_global(u)
        else:
            issue_loads()
        e("  add.u32 %r40, %r40, 1;")
        e(f"  add.u32 %r41, %r41, 1;\n  setp.eq.u32 %p2, %r41, {S};\n  @%p2 mov.u32 %r41, 0;")
        e("  setp.ge.u32 %p4, %r40, %r30;\n  @%p4 bra DONE;")
    e("  bra LOOP0;")
    e("DONE:")
    e("  wgmma.wait_group.sync.aligned 0;")
    # epilogue: warp w rows 16w + l/4 (+8), cols 8j + 2(l%4)
    e("  shr.u32 %r50, %r4, 5;\n  and.b32 %r51, %r4, 31;\n  shr.u32 %r52, %r51, 2;\n  and.b32 %r53, %r51, 3;")
    e("  and.b32 %r56, %r50, 3;\n  shr.u32 %r57, %r50, 2;")
    e(f"  mul.lo.u32 %r54, %r56, 16;\n  add.u32 %r54, %r54, %r52;\n  add.u32 %r54, %r54, %r7;\n  mad.lo.u32 %r54, %r57, {BM // WG}, %r54;  // row")
    e("  shl.b32 %r55, %r53, 1;\n  add.u32 %r55, %r55, %r8;  // col")
    e("  mul.wide.u32 %rd70, %r54, %r2;\n  cvt.u64.u32 %rd71, %r55;\n  add.u64 %rd70, %rd70, %rd71;\n  shl.b64 %rd70, %rd70, 1;\n  add.u64 %rd70, %rd3, %rd70;")
    e("  mul.wide.u32 %rd72, %r2, 16;  // 8 rows, bytes")
    for mh in range(MH):
        e(f"  mul.wide.u32 %rd73, %r2, {mh * 64 * 2};\n  add.u64 %rd74, %rd70, %rd73;\n  add.u64 %rd75, %rd74, %rd72;")
        for j in range(BN // 8):
            a = mh * nacc + 4 * j
            e(f"  cvt.rn.f16x2.f32 %r60, %acc{a + 1}, %acc{a};\n  st.global.b32 [%rd74+{16 * j}], %r60;")
            e(f"  cvt.rn.f16x2.f32 %r61, %acc{a + 3}, %acc{a + 2};\n  st.global.b32 [%rd75+{16 * j}], %r61;")
    e("  ret;\n}")
    return "\n".join(L) + "\n", stage * S


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    variants = []
    # Every variant fits Vulkan's 48 KB except the last five, which need
    # CUDA's opt-in (cuda_launch.py): what deeper stages would give.
    for (BM, BN, BK, S, WG, group, R) in [
        (128, 128, 32, 3, 1, 8, 0), (128, 128, 16, 6, 1, 8, 0),
        (128, 256, 16, 4, 2, 8, 6), (128, 256, 32, 2, 2, 8, 2),
        (128, 128, 32, 4, 1, 8, 0),
        (128, 128, 64, 4, 1, 8, 0), (128, 256, 64, 4, 2, 8, 0),
        (128, 256, 32, 6, 2, 8, 0), (256, 128, 64, 4, 2, 8, 0),
    ]:
        maxnreg, noload = 0, False
        wait = 0 if S == 2 and WG > 1 else 1
        name = f"bm{BM}_bn{BN}_bk{BK}_s{S}_wg{WG}" + (f"_r{maxnreg}" if maxnreg else "") + (f"_g{group}" if group else "") + f"_w{wait}" + (f"_rs{R}" if R else "")
        src, smem = gen(BM, BN, BK, S, False, wait, WG, maxnreg, group, noload, R)
        with open(os.path.join(out, name + ".ptx"), "w") as f:
            f.write(src)
        variants.append(f"{name} {BM} {BN} {smem} {WG} {group}")
    with open(os.path.join(out, "variants.txt"), "w") as f:
        f.write("\n".join(variants) + "\n")


if __name__ == "__main__":
    main()
