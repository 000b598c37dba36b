//===- WgmmaGemm.cpp - f16 GEMM on Hopper's warpgroup MMA, as PTX ---------===//
//
// The kernel, per CTA: S shared-memory stages, each one k slice of A (bm x
// bk, rows of bk halves in the 32/64/128-byte swizzle wgmma names for that
// row width) and of B (bk x bn, read N-major: blocks of 64 columns, 128-byte
// rows, transposed by the instruction). Every thread moves its 16-byte
// groups with cp.async; the loop waits for the oldest stage, issues
// bm / 64 x bk / 16 wgmma.m64nBNk16 per warpgroup, keeps one wgmma group in
// flight and refills the stage the group before it read. Measured on the
// H200 (bench/RESULTS.md): 128 x 256 x 32 in 6 stages with two
// warpgroups reached 0.80x cuBLAS at 4096^3, 128 x 128 x 64 in 4 stages
// with one 0.70x.
//
//===----------------------------------------------------------------------===//

#include "kiln/Codegen/WgmmaGemm.h"

#include "dialects/Kiln/KilnDialect.h"

#include "mlir/IR/BuiltinTypes.h"

#include <cassert>
#include <sstream>
#include <vector>

using namespace mlir;
using namespace kiln;

std::string WgmmaGemmConfig::str() const {
  return std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) + " s" +
         std::to_string(stages) + " wg" + std::to_string(warpgroups);
}

std::optional<WgmmaGemmShape> kiln::matchWgmmaGemm(Operation *op) {
  auto kernel = dyn_cast<KernelOp>(op);
  if (!kernel || kernel->getNumResults() != 1 || kernel.getBody().getBlocks().size() != 1)
    return std::nullopt;
  Block &body = kernel.getBody().front();
  if (body.getNumArguments() != 2 || body.getOperations().size() != 2)
    return std::nullopt;
  auto matmul = dyn_cast<MatmulOp>(body.front());
  auto yield = dyn_cast<YieldOp>(body.back());
  if (!matmul || !yield || yield->getNumOperands() != 1 ||
      yield->getOperand(0) != matmul.getResult() || matmul.getLhs() != body.getArgument(0) ||
      matmul.getRhs() != body.getArgument(1))
    return std::nullopt;
  auto a = cast<RankedTensorType>(matmul.getLhs().getType());
  auto b = cast<RankedTensorType>(matmul.getRhs().getType());
  auto c = cast<RankedTensorType>(matmul.getResult().getType());
  if (a.getRank() != 2 || b.getRank() != 2 || !a.getElementType().isF16() ||
      !b.getElementType().isF16() || !(c.getElementType().isF16() || c.getElementType().isF32()))
    return std::nullopt;
  WgmmaGemmShape shape;
  shape.m = a.getDimSize(0);
  shape.k = a.getDimSize(1);
  shape.n = b.getDimSize(1);
  shape.f32Result = c.getElementType().isF32();
  return shape;
}

std::optional<WgmmaGemmConfig> kiln::chooseWgmmaGemm(const WgmmaGemmShape &shape,
                                                     int64_t sharedLimit) {
  // The two that won on the H200, widest first; the kernel has no edge
  // handling, so a tile must divide the problem. Operands of under 2^31
  // elements, as the SPIR-V beside it indexes (so M, N, K and the grid fit
  // the kernel's 32-bit parameters).
  WgmmaGemmConfig wide; // 128 x 256 x 32, 6 stages, 2 warpgroups: 144 KB
  WgmmaGemmConfig narrow{128, 128, 64, 4, 1, 8}; // 128 KB
  const int64_t limit = int64_t(1) << 31;
  if (shape.m * shape.k >= limit || shape.k * shape.n >= limit || shape.m * shape.n >= limit)
    return std::nullopt;
  for (const WgmmaGemmConfig &config : {wide, narrow})
    if (shape.m % config.bm == 0 && shape.n % config.bn == 0 && shape.k % config.bk == 0 &&
        shape.m > 0 && shape.n > 0 && shape.k > 0 && config.sharedBytes() <= sharedLimit)
      return config;
  return std::nullopt;
}

namespace {
/// Lines of PTX.
class Ptx {
public:
  template <typename... Args> void operator()(const Args &...args) {
    (os_ << ... << args);
    os_ << "\n";
  }
  std::string str() const { return os_.str(); }

private:
  std::ostringstream os_;
};

/// A shared-memory matrix descriptor's fixed bits: leading and stride byte
/// offsets (>> 4) and the swizzle mode; the start address (>> 4, bits
/// 0-13) is added in the loop.
uint64_t descriptorBits(uint64_t leading, uint64_t stride, uint64_t swizzle) {
  return ((leading >> 4) & 0x3FFF) << 16 | ((stride >> 4) & 0x3FFF) << 32 | swizzle << 62;
}

/// wgmma's swizzle mode for rows of `bytes`.
uint64_t swizzleMode(int bytes) { return bytes == 128 ? 1 : bytes == 64 ? 2 : 3; }
} // namespace

std::string kiln::emitWgmmaGemmPtx(const WgmmaGemmConfig &config, const WgmmaGemmShape &shape,
                                   const std::string &name) {
  const int bm = config.bm, bn = config.bn, bk = config.bk, stages = config.stages;
  const int wg = config.warpgroups, threads = config.threads();
  assert(bm % (64 * wg) == 0 && bn % 64 == 0 && bn <= 256 && (bk == 16 || bk == 32 || bk == 64));
  const int slabs = bm / wg / 64; // m64 slabs per warpgroup
  // Stages a load may overwrite: with one warpgroup the previous slice's
  // (its wgmma group waited for), with more only the one before that.
  const int ahead = wg == 1 ? stages - 1 : stages - 2;
  assert(ahead >= 1 && stages >= 3);
  const int aRow = bk * 2; // bytes per A row in shared memory
  const int aBytes = bm * aRow;
  const int stage = aBytes + bk * bn * 2;
  assert(stage % 1024 == 0);
  const int aChunksPerRow = bk / 8; // 16-byte groups
  const int aPass = threads / aChunksPerRow; // A rows per pass of all threads
  const int aIters = bm / aPass;
  const int bChunksPerRow = bn / 8;
  const int bPass = threads / bChunksPerRow;
  const int bIters = bk / bPass;
  // Every pass must see the same swizzle phase (whole 8-row atoms).
  assert(aIters * aPass == bm && bIters * bPass == bk && aPass % 8 == 0 && bPass % 8 == 0);
  const int perSlab = bn / 2; // f32 accumulators per thread per m64 slab
  assert(slabs * perSlab <= 128 && "accumulators past the register file");
  const uint64_t descA = descriptorBits(16, 8 * aRow, swizzleMode(aRow));
  const uint64_t descB = descriptorBits(bk * 128, 1024, 1);

  Ptx e;
  e(".version 8.0\n.target sm_90a\n.address_size 64\n");
  e("// Kiln wgmma GEMM ", config.str(), ": [", shape.m, ", ", shape.k, "] x [", shape.k, ", ",
    shape.n, "] f16 -> ", shape.f32Result ? "f32" : "f16");
  e(".extern .shared .align 1024 .b8 smem[];\n");
  e(".visible .entry ", name,
    "(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 pm, .param .u32 pn, "
    ".param .u32 pk)");
  e(".maxntid ", threads, ", 1, 1");
  e("{");
  e("  .reg .pred %p<8>;\n  .reg .b32 %r<128>;\n  .reg .b64 %rd<128>;");
  e("  .reg .f32 %acc<", slabs * perSlab, ">;");
  e("  ld.param.u64 %rd1, [pa];\n  ld.param.u64 %rd2, [pb];\n  ld.param.u64 %rd3, [pc];");
  e("  ld.param.u32 %r1, [pm];\n  ld.param.u32 %r2, [pn];\n  ld.param.u32 %r3, [pk];");
  e("  cvta.to.global.u64 %rd1, %rd1;\n  cvta.to.global.u64 %rd2, %rd2;\n"
    "  cvta.to.global.u64 %rd3, %rd3;");
  e("  mov.u32 %r4, %tid.x;\n  mov.u32 %r5, %ctaid.x;");
  // One-dimensional grid: `group` tile rows at a time, column by column
  // inside the group. %r6: tile row, %r5: tile column.
  e("  div.u32 %r100, %r1, ", bm, ";  // tile rows");
  e("  div.u32 %r101, %r2, ", bn, ";  // tile columns");
  e("  mul.lo.u32 %r102, %r101, ", config.group, ";");
  e("  div.u32 %r103, %r5, %r102;  // group");
  e("  mul.lo.u32 %r104, %r103, ", config.group, ";  // its first row");
  e("  sub.u32 %r105, %r100, %r104;\n  min.u32 %r105, %r105, ", config.group, ";  // its rows");
  e("  rem.u32 %r106, %r5, %r102;");
  e("  rem.u32 %r107, %r106, %r105;\n  add.u32 %r6, %r104, %r107;");
  e("  div.u32 %r5, %r106, %r105;");
  e("  mul.lo.u32 %r7, %r6, ", bm, ";   // m0");
  e("  mul.lo.u32 %r8, %r5, ", bn, ";   // n0");
  e("  mov.u32 %r9, smem;");
  // A source: row m0 + t / chunks, chunk t % chunks.
  e("  div.u32 %r10, %r4, ", aChunksPerRow, ";\n  rem.u32 %r11, %r4, ", aChunksPerRow, ";");
  e("  add.u32 %r12, %r7, %r10;\n  mul.wide.u32 %rd4, %r12, %r3;\n  mul.lo.u32 %r13, %r11, 8;");
  e("  cvt.u64.u32 %rd5, %r13;\n  add.u64 %rd4, %rd4, %rd5;\n  shl.b64 %rd4, %rd4, 1;\n"
    "  add.u64 %rd10, %rd1, %rd4;  // A source, pass 0");
  e("  mul.wide.u32 %rd6, %r3, ", aPass * 2, ";  // bytes between passes");
  for (int i = 1; i < aIters; ++i)
    e("  add.u64 %rd", 10 + i, ", %rd", 9 + i, ", %rd6;");
  // A's place in the stage (swizzled), pass 0.
  e("  mul.lo.u32 %r14, %r10, ", aRow, ";\n  shl.b32 %r15, %r11, 4;\n  add.u32 %r14, %r14, %r15;");
  e("  shr.u32 %r16, %r14, 7;\n  and.b32 %r16, %r16, ", aRow / 16 - 1,
    ";\n  shl.b32 %r16, %r16, 4;\n  xor.b32 %r14, %r14, %r16;  // A offset");
  // B source: k row t / chunks, chunk t % chunks.
  e("  div.u32 %r20, %r4, ", bChunksPerRow, ";\n  rem.u32 %r21, %r4, ", bChunksPerRow, ";");
  e("  mul.wide.u32 %rd7, %r20, %r2;\n  mul.lo.u32 %r22, %r21, 8;\n  add.u32 %r22, %r22, %r8;");
  e("  cvt.u64.u32 %rd8, %r22;\n  add.u64 %rd7, %rd7, %rd8;\n  shl.b64 %rd7, %rd7, 1;");
  e("  add.u64 %rd30, %rd2, %rd7;  // B source, pass 0");
  e("  mul.wide.u32 %rd9, %r2, ", bPass * 2, ";");
  for (int i = 1; i < bIters; ++i)
    e("  add.u64 %rd", 30 + i, ", %rd", 29 + i, ", %rd9;");
  // B's place: 64-column block cn / 8, chunk cn % 8, row k.
  e("  shr.u32 %r23, %r21, 3;\n  mul.lo.u32 %r23, %r23, ", bk * 128,
    ";\n  and.b32 %r24, %r21, 7;\n  shl.b32 %r24, %r24, 4;");
  e("  shl.b32 %r25, %r20, 7;\n  add.u32 %r23, %r23, %r25;\n  add.u32 %r23, %r23, %r24;");
  e("  shr.u32 %r26, %r23, 7;\n  and.b32 %r26, %r26, 7;\n  shl.b32 %r26, %r26, 4;\n"
    "  xor.b32 %r23, %r23, %r26;\n  add.u32 %r23, %r23, ",
    aBytes, ";  // B offset");
  e("  mul.wide.u32 %rd50, %r2, ", bk * 2, ";  // B bytes per k slice");
  e("  div.u32 %r30, %r3, ", bk, ";   // k slices");
  e("  mov.u32 %r31, 0;  // slice loaded next");
  e("  mov.u32 %r32, 0;  // its stage");

  auto issueLoads = [&] {
    e("  setp.lt.u32 %p1, %r31, %r30;");
    e("  mul.lo.u32 %r33, %r32, ", stage, ";\n  add.u32 %r33, %r33, %r9;");
    e("  add.u32 %r34, %r33, %r14;\n  add.u32 %r35, %r33, %r23;");
    for (int i = 0; i < aIters; ++i)
      e("  @%p1 cp.async.cg.shared.global [%r34+", i * aPass * aRow, "], [%rd", 10 + i,
        "], 16;");
    for (int i = 0; i < bIters; ++i)
      e("  @%p1 cp.async.cg.shared.global [%r35+", i * bPass * 128, "], [%rd", 30 + i, "], 16;");
    e("  cp.async.commit_group;");
    for (int i = 0; i < aIters; ++i)
      e("  add.u64 %rd", 10 + i, ", %rd", 10 + i, ", ", bk * 2, ";");
    for (int i = 0; i < bIters; ++i)
      e("  add.u64 %rd", 30 + i, ", %rd", 30 + i, ", %rd50;");
    e("  add.u32 %r31, %r31, 1;");
    e("  add.u32 %r32, %r32, 1;\n  setp.eq.u32 %p2, %r32, ", stages,
      ";\n  @%p2 mov.u32 %r32, 0;");
  };

  for (int i = 0; i < slabs * perSlab; ++i)
    e("  mov.f32 %acc", i, ", 0f00000000;");
  for (int s = 0; s < ahead; ++s)
    issueLoads();
  e("  setp.eq.u32 %p3, %r9, %r9;  // scale-d: accumulate");
  e("  mov.u32 %r40, 0;  // slice multiplied next");
  e("  mov.u32 %r41, 0;  // its stage");
  e("LOOP:");
  e("  cp.async.wait_group ", ahead - 1, ";");
  e("  fence.proxy.async.shared::cta;");
  e("  bar.sync 0;");
  e("  mul.lo.u32 %r42, %r41, ", stage, ";\n  add.u32 %r42, %r42, %r9;\n  add.u32 %r43, %r42, ",
    aBytes, ";");
  e("  shr.u32 %r42, %r42, 4;\n  shr.u32 %r43, %r43, 4;\n  cvt.u64.u32 %rd60, %r42;\n"
    "  cvt.u64.u32 %rd61, %r43;");
  e("  or.b64 %rd60, %rd60, ", descA, ";\n  or.b64 %rd61, %rd61, ", descB, ";");
  if (wg > 1)
    e("  shr.u32 %r44, %r4, 7;\n  mul.lo.u32 %r44, %r44, ", ((bm / wg) * aRow) >> 4,
      ";\n  cvt.u64.u32 %rd64, %r44;\n  add.s64 %rd60, %rd60, %rd64;");
  e("  wgmma.fence.sync.aligned;");
  for (int kk = 0; kk < bk / 16; ++kk) {
    e("  add.s64 %rd63, %rd61, ", (kk * 16 * 128) >> 4, ";");
    for (int mh = 0; mh < slabs; ++mh) {
      e("  add.s64 %rd62, %rd60, ", (mh * 64 * aRow + kk * 32) >> 4, ";");
      std::string regs;
      for (int j = 0; j < perSlab; ++j)
        regs += (j ? ", %acc" : "%acc") + std::to_string(mh * perSlab + j);
      e("  wgmma.mma_async.sync.aligned.m64n", bn, "k16.f32.f16.f16 {", regs,
        "}, %rd62, %rd63, %p3, 1, 1, 0, 1;");
    }
  }
  e("  wgmma.commit_group.sync.aligned;");
  e("  wgmma.wait_group.sync.aligned 1;");
  issueLoads();
  e("  add.u32 %r40, %r40, 1;");
  e("  add.u32 %r41, %r41, 1;\n  setp.eq.u32 %p2, %r41, ", stages, ";\n  @%p2 mov.u32 %r41, 0;");
  e("  setp.lt.u32 %p4, %r40, %r30;\n  @%p4 bra LOOP;");
  e("  wgmma.wait_group.sync.aligned 0;");
  // Epilogue: in slab mh, warp w's lanes hold rows 16 (w % 4) + lane / 4
  // (and 8 below) and columns 8 j + 2 (lane % 4), two at a time.
  e("  shr.u32 %r50, %r4, 5;\n  and.b32 %r51, %r4, 31;\n  shr.u32 %r52, %r51, 2;\n"
    "  and.b32 %r53, %r51, 3;");
  e("  and.b32 %r56, %r50, 3;\n  shr.u32 %r57, %r50, 2;");
  e("  mul.lo.u32 %r54, %r56, 16;\n  add.u32 %r54, %r54, %r52;\n  add.u32 %r54, %r54, %r7;\n"
    "  mad.lo.u32 %r54, %r57, ",
    bm / wg, ", %r54;  // row");
  e("  shl.b32 %r55, %r53, 1;\n  add.u32 %r55, %r55, %r8;  // column");
  const int elementBytes = shape.f32Result ? 4 : 2;
  e("  mul.wide.u32 %rd70, %r54, %r2;\n  cvt.u64.u32 %rd71, %r55;\n  add.u64 %rd70, %rd70, %rd71;\n"
    "  mul.lo.u64 %rd70, %rd70, ",
    elementBytes, ";\n  add.u64 %rd70, %rd3, %rd70;");
  e("  mul.wide.u32 %rd72, %r2, ", 8 * elementBytes, ";  // 8 rows");
  for (int mh = 0; mh < slabs; ++mh) {
    e("  mul.wide.u32 %rd73, %r2, ", mh * 64 * elementBytes,
      ";\n  add.u64 %rd74, %rd70, %rd73;\n  add.u64 %rd75, %rd74, %rd72;");
    for (int j = 0; j < bn / 8; ++j) {
      int a = mh * perSlab + 4 * j;
      if (shape.f32Result) {
        e("  st.global.v2.f32 [%rd74+", 32 * j, "], {%acc", a, ", %acc", a + 1, "};");
        e("  st.global.v2.f32 [%rd75+", 32 * j, "], {%acc", a + 2, ", %acc", a + 3, "};");
      } else {
        e("  cvt.rn.f16x2.f32 %r60, %acc", a + 1, ", %acc", a, ";\n  st.global.b32 [%rd74+",
          16 * j, "], %r60;");
        e("  cvt.rn.f16x2.f32 %r61, %acc", a + 3, ", %acc", a + 2, ";\n  st.global.b32 [%rd75+",
          16 * j, "], %r61;");
      }
    }
  }
  e("  ret;\n}");
  return e.str();
}
