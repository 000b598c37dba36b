//===- CpuGemm.cpp - register-blocked matmul and convolution on the CPU ---===//
//
// The GEMM form (Gemm.h) for the host. The outer loop (split across threads
// by its [begin, end) range) runs over (batch, panel of B's columns, and a
// split of the rows when there are few panels). Each
// iteration packs its panel of B contiguously, zero past N (for a
// convolution this is where im2col happens, one panel at a time), then
// sweeps A in blocks of `rows` rows: per block and per register block of
// columns, rows x vectors accumulators stay in vector registers for the
// whole k loop, each step one vector load per column vector, one broadcast
// per row and rows x vectors FMAs. The block goes through a small scratch
// buffer to the epilogue (bias, activation, residual): on vectors of
// columns where its reads allow, per element for the rest.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "kiln/Codegen/KernelConfigAttr.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;
using namespace kiln;

std::optional<PackedMatrix> kiln::packedMatrixOf(KernelOp kernel) {
  Operation *root = nullptr;
  kernel.getBody().walk([&](MatmulOp matmul) { root = matmul; });
  std::optional<Gemm> gemm = root ? describeGemm(kernel, root, /*minRowsPerGroup=*/4)
                                  : std::nullopt;
  if (!gemm || !gemm->bAccess || gemm->conv)
    return std::nullopt;
  auto [arg, index] = *gemm->bAccess;
  Value b = kernel.getBody().front().getArgument(arg);
  auto type = cast<RankedTensorType>(b.getType());
  if (!type.getElementType().isF32() || type.getNumElements() != gemm->k * gemm->n)
    return std::nullopt;
  // Read by the matmul alone, through views (a transposed W): packing the
  // weight changes what any other reader would see.
  Value v = b;
  while (v.hasOneUse() && v.getUsers().begin()->hasTrait<View>())
    v = v.getUsers().begin()->getResult(0);
  auto matmul = cast<MatmulOp>(root);
  if (!v.hasOneUse() || *v.getUsers().begin() != root || matmul.getRhs() != v ||
      matmul.getLhs() == v)
    return std::nullopt;
  std::optional<int64_t> o = elementAt(index, 0, 0, 0), sb = elementAt(index, 1, 0, 0),
                         sk = elementAt(index, 0, 1, 0), sn = elementAt(index, 0, 0, 1);
  if (dividesIndex(index) || !o || !sb || !sk || !sn || (gemm->batch > 1 && *sb != *o))
    return std::nullopt;
  return PackedMatrix{arg, gemm->k, gemm->n, *o, *sk - *o, *sn - *o};
}

bool kiln::fitsPackedB(KernelOp kernel, Operation *root, const CpuMatmulConfig &config) {
  std::optional<PackedMatrix> matrix = packedMatrixOf(kernel);
  return matrix && isa_and_nonnull<MatmulOp>(root) && config.check().empty() &&
         matrix->n % config.panelColumns == 0;
}

// At k = 2048 (a transformer's MLP down projection) a block of 8 rows of A
// is 64 KB and a strip of the panel 256 KB, both streamed per block.
int64_t kiln::cpuGemmSliceDepth(const Gemm &gemm) {
  return !gemm.conv && gemm.k > 1024 ? 512 : gemm.k;
}

FailureOr<func::FuncOp> kiln::buildCpuGemmFunction(KernelOp kernel, Operation *root,
                                                    OpBuilder &builder, StringRef name,
                                                    const CpuMatmulConfig &config) {
  if (std::string problem = config.check(); !problem.empty())
    return root->emitOpError("cpu matmul configuration: ") << problem, failure();
  std::optional<Gemm> described = describeGemm(kernel, root, /*minRowsPerGroup=*/4);
  if (!described)
    return func::FuncOp();
  const Gemm &gemm = *described;
  // B stored as the panels (packed when the program was compiled): read in
  // place, nothing packed per inference.
  const bool packedB = config.packedB;
  if (packedB && !fitsPackedB(kernel, root, config))
    return root->emitOpError("does not fit the cpu gemm form with a packed right operand"),
           failure();
  if (!packedB) {
    FailureOr<func::FuncOp> gemv =
        buildCpuGemvFunction(kernel, root, gemm, builder, name, config.lanes);
    if (failed(gemv) || *gemv)
      return gemv;
  }
  Location loc = kernel.getLoc();
  MLIRContext *ctx = builder.getContext();
  Type f32 = Float32Type::get(ctx);
  // A convolution's A is its filter, [M][K] in memory: a network's weights
  // come from memory, and each block of rows prefetches the next block's
  // into L2 while its panel passes run (MobileNetV2's expansions).
  std::optional<unsigned> filterArg;
  if (auto conv = dyn_cast<Conv2dOp>(root);
      conv && conv.getGroupsAttr().getInt() == 1 && isa<BlockArgument>(conv.getFilter()) &&
      getElementTypeOrSelf(conv.getFilter().getType()).isF32())
    filterArg = cast<BlockArgument>(conv.getFilter()).getArgNumber();
  const int64_t MR = config.rows, W = config.lanes, V = config.vectors;
  const int64_t NR = W * V, NC = config.panelColumns;
  const int64_t panels = (gemm.n + NC - 1) / NC;
  // Few panels (a narrow B, a matrix-vector product) would leave threads
  // idle: split the rows too, each split packing its own copy of the panel.
  // 16 outer iterations cover the thread counts this runs with, but a split
  // keeps about 128 rows (two splits at least), or packing its panel again
  // costs as much as its FMAs (a 3x3 conv on a 7x7 image, 512 rows: 16
  // splits packed 16 copies of a 4608 x 64 panel).
  const int64_t rowBlocks = (gemm.m + MR - 1) / MR;
  int64_t wanted = (16 + gemm.batch * panels - 1) / (gemm.batch * panels);
  int64_t splits = std::clamp<int64_t>(std::min<int64_t>(wanted, std::max<int64_t>(2, gemm.m / 128)),
                                       1, rowBlocks);
  const int64_t splitRows = (rowBlocks + splits - 1) / splits * MR;
  splits = (gemm.m + splitRows - 1) / splitRows;
  int64_t results = cast<RankedTensorType>(root->getResult(0).getType()).getNumElements();
  func::FuncOp func = createFlatKernelFunction(kernel, builder, name, results * gemm.k,
                                               gemm.batch * panels * splits);
  Block *entry = func.addEntryBlock();
  *gemm.entry = entry;
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };
  auto widen = [&](OpBuilder &wb, Value v) { return widenToF32(wb, loc, v); };
  VectorType vec = VectorType::get({W}, f32);
  const bool vectorEpilogue =
      vectorizableGemmEpilogue(kernel, root, {gemm.batch, gemm.m, gemm.n}, gemm.resultIndex);
  // Up to this many per-row epilogue values (a batch norm's scale and shift
  // per channel), computed once per block of rows and panel rather than in
  // every tile: with a short k (MobileNet's expansions, k = 24) a batch
  // norm's per-tile-row rsqrt and loads cost a third of the kernel.
  constexpr int64_t kRowValues = 8;

  // 64-byte aligned: every 16-lane load of the panel is one cache line
  // (+13% for matmul here). Not for a convolution: knowing the alignment,
  // LLVM vectorized its im2col packing into gathers, which halved its speed.
  Value packed = packedB ? Value(entry->getArgument(gemm.bAccess->first))
                         : memref::AllocOp::create(b, loc, MemRefType::get({gemm.k * NC}, f32),
                                                   gemm.plainB ? b.getI64IntegerAttr(64)
                                                               : IntegerAttr())
                               .getResult();
  Value block = memref::AllocaOp::create(b, loc, MemRefType::get({MR * NR}, f32));
  // A long k in slices of KC: each slice's strip of the panel (KC x NR) and
  // each block's rows of A (MR x KC) stay in L1 while every block of rows
  // passes over them; the sums wait in `sliceSums` (the split's rows x the
  // panel) between slices, added in the same order. Matmuls only: a
  // convolution's im2col panel measured slower in slices.
  const int64_t KC = cpuGemmSliceDepth(gemm);
  const int64_t slices = (gemm.k + KC - 1) / KC;
  Value sliceSums =
      slices > 1 ? memref::AllocOp::create(b, loc, MemRefType::get({splitRows * NC}, f32),
                                           b.getI64IntegerAttr(64))
                       .getResult()
                 : Value();
  // A convolution's per-column tables (packConv below), allocated once:
  // an alloca inside the loop would grow the stack every iteration.
  auto table = [&] {
    return memref::AllocaOp::create(b, loc, MemRefType::get({NC}, b.getIndexType())).getResult();
  };
  Value tabBase, tabH, tabW;
  if (gemm.conv) {
    tabBase = table();
    tabH = table();
    tabW = table();
  }
  Value rowValueBuffer =
      vectorEpilogue ? memref::AllocaOp::create(b, loc, MemRefType::get({MR * kRowValues}, f32))
                           .getResult()
                     : Value();
  // The (batch, panel) unit `packed` holds (none yet).
  Value packedFor = packedB ? Value() : heldSlot(b, loc, gemm.batch * panels);
  bool failed = false;
  scf::ForOp::create(
      b, loc, idx(b, 0), idx(b, gemm.batch * panels * splits), idx(b, 1), ValueRange{},
      [&](OpBuilder &ob, Location, Value outer, ValueRange) {
        Value unit = arith::DivUIOp::create(ob, loc, outer, idx(ob, splits));
        Value firstRow = arith::MulIOp::create(
            ob, loc, arith::RemUIOp::create(ob, loc, outer, idx(ob, splits)), idx(ob, splitRows));
        Value lastRow = arith::MinUIOp::create(
            ob, loc, arith::AddIOp::create(ob, loc, firstRow, idx(ob, splitRows)), idx(ob, gemm.m));
        Value batch = arith::DivUIOp::create(ob, loc, unit, idx(ob, panels));
        Value j0 = arith::MulIOp::create(
            ob, loc, arith::RemUIOp::create(ob, loc, unit, idx(ob, panels)), idx(ob, NC));
        // Pack B[batch, :, j0 : j0 + NC], zero past N; only the last panel
        // needs the checks.
        auto pack = [&](OpBuilder &pb, bool guarded) {
          scf::ForOp::create(
              pb, loc, idx(pb, 0), idx(pb, gemm.k), idx(pb, 1), ValueRange{},
              [&](OpBuilder &kb, Location, Value k, ValueRange) {
                scf::ForOp::create(
                    kb, loc, idx(kb, 0), idx(kb, NC), idx(kb, 1), ValueRange{},
                    [&](OpBuilder &jb, Location, Value j, ValueRange) {
                      Value col = arith::AddIOp::create(jb, loc, j0, j);
                      Value v;
                      if (guarded) {
                        Value inside = arith::CmpIOp::create(jb, loc, arith::CmpIPredicate::ult,
                                                             col, idx(jb, gemm.n));
                        v = widen(jb, gemm.readB(jb, loc, batch, k,
                                                 arith::MinUIOp::create(jb, loc, col,
                                                                        idx(jb, gemm.n - 1))));
                        v = arith::SelectOp::create(jb, loc, inside, v,
                                                    floatConstant(jb, loc, f32, 0.0));
                      } else {
                        v = widen(jb, gemm.readB(jb, loc, batch, k, col));
                      }
                      Value at = arith::AddIOp::create(
                          jb, loc, arith::MulIOp::create(jb, loc, k, idx(jb, NC)), j);
                      memref::StoreOp::create(jb, loc, v, packed, ValueRange{at});
                      scf::YieldOp::create(jb, loc);
                    });
                scf::YieldOp::create(kb, loc);
              });
        };
        // A convolution's panel through per-column tables: each column's
        // image offset and top-left input position, decomposed once per
        // panel; per k only a shift and two bounds checks remain (decomposing
        // every column index per element cost as much as the FMAs with 64
        // output channels).
        // A convolution's GEMMs are one per (image, group): the image and
        // the group's first channel come from the batch index, and k is
        // (channel in the group, window row, window column).
        struct Tap {
          Value channel, dh, dw;
        };
        auto imageOf = [&](OpBuilder &ib, const ConvGeometry &g) -> Value {
          return arith::DivUIOp::create(ib, loc, batch, idx(ib, g.groups));
        };
        // The channel is the source's own (k counts from the first source).
        auto tapOf = [&](OpBuilder &kb, const ConvGeometry &g, const ConvSource &s,
                         Value k) -> Tap {
          const int64_t taps = g.kernelH * g.kernelW;
          Value tap = arith::RemUIOp::create(kb, loc, k, idx(kb, taps));
          Value channel = arith::AddIOp::create(
              kb, loc,
              arith::MulIOp::create(kb, loc, arith::RemUIOp::create(kb, loc, batch, idx(kb, g.groups)),
                                    idx(kb, g.groupChannels)),
              arith::SubIOp::create(kb, loc, arith::DivUIOp::create(kb, loc, k, idx(kb, taps)),
                                    idx(kb, s.firstChannel)));
          Value dh = arith::MulIOp::create(
              kb, loc, arith::DivUIOp::create(kb, loc, tap, idx(kb, g.kernelW)), idx(kb, g.dilationH));
          Value dw = arith::MulIOp::create(
              kb, loc, arith::RemUIOp::create(kb, loc, tap, idx(kb, g.kernelW)), idx(kb, g.dilationW));
          return {channel, dh, dw};
        };
        // `body(kb, source, k)` for every k, source by source: each source
        // holds the rows of its channels' taps.
        auto forEachK = [&](OpBuilder &pb, const ConvGeometry &g,
                            function_ref<void(OpBuilder &, const ConvSource &, Value)> body) {
          const int64_t taps = g.kernelH * g.kernelW;
          for (const ConvSource &s : g.sources) {
            // (groups > 1 has one source of all channels: k spans one group's)
            int64_t lo = s.firstChannel * taps,
                    hi = g.sources.size() == 1 ? gemm.k : lo + s.channels * taps;
            scf::ForOp::create(pb, loc, idx(pb, lo), idx(pb, hi), idx(pb, 1), ValueRange{},
                               [&](OpBuilder &kb, Location, Value k, ValueRange) {
                                 body(kb, s, k);
                                 scf::YieldOp::create(kb, loc);
                               });
          }
        };
        auto packConv = [&](OpBuilder &pb, const ConvGeometry &g) {
          const int64_t plane = g.height * g.width;
          Value image = imageOf(pb, g);
          scf::ForOp::create(
              pb, loc, idx(pb, 0), idx(pb, NC), idx(pb, 1), ValueRange{},
              [&](OpBuilder &tb, Location, Value j, ValueRange) {
                Value col = arith::AddIOp::create(tb, loc, j0, j);
                // The output position in the image (clamped: past N the
                // checks below fail anyway).
                Value at = arith::MinUIOp::create(tb, loc, col, idx(tb, gemm.n - 1));
                Value h = arith::SubIOp::create(
                    tb, loc,
                    arith::MulIOp::create(tb, loc,
                                          arith::DivUIOp::create(tb, loc, at, idx(tb, g.outWidth)),
                                          idx(tb, g.strideH)),
                    idx(tb, g.padH));
                Value w = arith::SubIOp::create(
                    tb, loc,
                    arith::MulIOp::create(tb, loc,
                                          arith::RemUIOp::create(tb, loc, at, idx(tb, g.outWidth)),
                                          idx(tb, g.strideW)),
                    idx(tb, g.padW));
                // Past N: a row far above the image, so every check fails.
                Value past = arith::CmpIOp::create(tb, loc, arith::CmpIPredicate::uge, col,
                                                   idx(tb, gemm.n));
                h = arith::SelectOp::create(tb, loc, past, idx(tb, -(int64_t(1) << 40)), h);
                Value base = arith::AddIOp::create(
                    tb, loc, arith::MulIOp::create(tb, loc, h, idx(tb, g.width)), w);
                memref::StoreOp::create(tb, loc, base, tabBase, ValueRange{j});
                memref::StoreOp::create(tb, loc, h, tabH, ValueRange{j});
                memref::StoreOp::create(tb, loc, w, tabW, ValueRange{j});
                scf::YieldOp::create(tb, loc);
              });
          forEachK(pb, g, [&](OpBuilder &kb, const ConvSource &s, Value k) {
                const int64_t last = g.images * s.channels * plane - 1;
                Value input = entry->getArgument(s.arg);
                auto [channel, dh, dw] = tapOf(kb, g, s, k);
                Value shift = arith::AddIOp::create(
                    kb, loc,
                    arith::MulIOp::create(
                        kb, loc,
                        arith::AddIOp::create(
                            kb, loc, arith::MulIOp::create(kb, loc, image, idx(kb, s.channels)),
                            channel),
                        idx(kb, plane)),
                    arith::AddIOp::create(kb, loc,
                                          arith::MulIOp::create(kb, loc, dh, idx(kb, g.width)), dw));
                Value row = arith::MulIOp::create(kb, loc, k, idx(kb, NC));
                scf::ForOp::create(
                    kb, loc, idx(kb, 0), idx(kb, NC), idx(kb, 1), ValueRange{},
                    [&](OpBuilder &jb, Location, Value j, ValueRange) {
                      auto within = [&](Value table, Value delta, int64_t size) {
                        Value v = arith::AddIOp::create(
                            jb, loc, memref::LoadOp::create(jb, loc, table, ValueRange{j}), delta);
                        return arith::CmpIOp::create(jb, loc, arith::CmpIPredicate::ult, v,
                                                     idx(jb, size));
                      };
                      Value inside = arith::AndIOp::create(jb, loc, within(tabH, dh, g.height),
                                                           within(tabW, dw, g.width));
                      Value flat = arith::AddIOp::create(
                          jb, loc, memref::LoadOp::create(jb, loc, tabBase, ValueRange{j}), shift);
                      flat = arith::MinSIOp::create(
                          jb, loc, arith::MaxSIOp::create(jb, loc, flat, idx(jb, 0)), idx(jb, last));
                      Value v = widen(jb, memref::LoadOp::create(jb, loc, input, ValueRange{flat}));
                      v = arith::SelectOp::create(jb, loc, inside, v, floatConstant(jb, loc, f32, 0.0));
                      memref::StoreOp::create(jb, loc, v, packed,
                                              ValueRange{arith::AddIOp::create(jb, loc, row, j)});
                      scf::YieldOp::create(jb, loc);
                    });
              });
        };
        // (Not for a convolution: without the checks LLVM turned its im2col
        // reads into vector gathers, which halved the kernel's speed here.)
        // Stride 1 along the row: the panel's columns are runs of one output
        // row each, and each run reads a contiguous stretch of an input row
        // per k. So per k and run: zeros where the window hangs past the
        // row's ends, a plain copy between (LLVM vectorizes it), no
        // per-element table or check.
        auto packConvRuns = [&](OpBuilder &pb, const ConvGeometry &g) {
          const int64_t plane = g.height * g.width, OW = g.outWidth;
          const int64_t runs = (NC - 1) / OW + 2; // the most a panel can touch
          Value zeroF = floatConstant(pb, loc, f32, 0.0);
          Value image = imageOf(pb, g);
          // The first column's output row and column.
          Value col0 = j0;
          Value row0 = arith::DivUIOp::create(pb, loc, col0, idx(pb, OW));
          Value first = arith::RemUIOp::create(pb, loc, col0, idx(pb, OW));
          Value firstLen = arith::SubIOp::create(pb, loc, idx(pb, OW), first);
          auto fill = [&](OpBuilder &fb, Value rowAt, Value from, Value to) {
            scf::ForOp::create(fb, loc, from, to, idx(fb, 1), ValueRange{},
                [&](OpBuilder &zb, Location, Value c, ValueRange) {
                  memref::StoreOp::create(zb, loc, zeroF, packed,
                                          ValueRange{arith::AddIOp::create(zb, loc, rowAt, c)});
                  scf::YieldOp::create(zb, loc);
                });
          };
          scf::ForOp::create(pb, loc, idx(pb, 0), idx(pb, runs), idx(pb, 1), ValueRange{},
              [&](OpBuilder &rb, Location, Value run, ValueRange) {
                // Run `run` covers panel columns [start, start + len).
                Value isFirst =
                    arith::CmpIOp::create(rb, loc, arith::CmpIPredicate::eq, run, idx(rb, 0));
                Value start = arith::SelectOp::create(
                    rb, loc, isFirst, idx(rb, 0),
                    arith::AddIOp::create(
                        rb, loc, firstLen,
                        arith::MulIOp::create(rb, loc,
                                              arith::SubIOp::create(rb, loc, run, idx(rb, 1)),
                                              idx(rb, OW))));
                Value ow = arith::SelectOp::create(rb, loc, isFirst, first, idx(rb, 0));
                // Columns past the panel or past N are not this run's.
                Value end = arith::MinSIOp::create(
                    rb, loc,
                    arith::MinSIOp::create(
                        rb, loc, arith::AddIOp::create(rb, loc, start,
                                                       arith::SubIOp::create(rb, loc, idx(rb, OW),
                                                                             ow)),
                        idx(rb, NC)),
                    arith::SubIOp::create(rb, loc, idx(rb, gemm.n), j0));
                Value len = arith::MaxSIOp::create(
                    rb, loc, arith::SubIOp::create(rb, loc, end, start), idx(rb, 0));
                // (A run past the image's last row has no columns: len 0.)
                Value outRow = arith::AddIOp::create(rb, loc, row0, run);
                Value h = arith::SubIOp::create(
                    rb, loc, arith::MulIOp::create(rb, loc, outRow, idx(rb, g.strideH)),
                    idx(rb, g.padH));
                Value w0 = arith::SubIOp::create(rb, loc, ow, idx(rb, g.padW));
                Value rowBase = arith::AddIOp::create(
                    rb, loc, arith::MulIOp::create(rb, loc, h, idx(rb, g.width)), w0);
                forEachK(rb, g, [&](OpBuilder &kb, const ConvSource &s, Value k) {
                      Value input = entry->getArgument(s.arg);
                      Value base = arith::AddIOp::create(
                          kb, loc,
                          arith::MulIOp::create(kb, loc, image, idx(kb, s.channels * plane)),
                          rowBase);
                      auto [channel, dh, dw] = tapOf(kb, g, s, k);
                      Value rowAt = arith::AddIOp::create(
                          kb, loc, arith::MulIOp::create(kb, loc, k, idx(kb, NC)), start);
                      Value hh = arith::AddIOp::create(kb, loc, h, dh);
                      Value rowInside = arith::CmpIOp::create(kb, loc, arith::CmpIPredicate::ult,
                                                              hh, idx(kb, g.height));
                      // The run's columns whose input column lies in the row:
                      // w0 + dw + c in [0, W).
                      Value ws = arith::AddIOp::create(kb, loc, w0, dw);
                      Value lo = arith::MinSIOp::create(
                          kb, loc,
                          arith::MaxSIOp::create(kb, loc,
                                                 arith::SubIOp::create(kb, loc, idx(kb, 0), ws),
                                                 idx(kb, 0)),
                          len);
                      Value hi = arith::MaxSIOp::create(
                          kb, loc,
                          arith::MinSIOp::create(kb, loc,
                                                 arith::SubIOp::create(kb, loc, idx(kb, g.width),
                                                                       ws),
                                                 len),
                          lo);
                      hi = arith::SelectOp::create(kb, loc, rowInside, hi, lo);
                      fill(kb, rowAt, idx(kb, 0), lo);
                      Value from = arith::AddIOp::create(
                          kb, loc, base,
                          arith::AddIOp::create(
                              kb, loc, arith::MulIOp::create(kb, loc, channel, idx(kb, plane)),
                              arith::AddIOp::create(
                                  kb, loc, arith::MulIOp::create(kb, loc, dh, idx(kb, g.width)),
                                  dw)));
                      scf::ForOp::create(kb, loc, lo, hi, idx(kb, 1), ValueRange{},
                          [&](OpBuilder &cb, Location, Value c, ValueRange) {
                            Value v = widen(cb, memref::LoadOp::create(
                                                    cb, loc, input,
                                                    ValueRange{arith::AddIOp::create(cb, loc, from,
                                                                                     c)}));
                            memref::StoreOp::create(
                                cb, loc, v, packed,
                                ValueRange{arith::AddIOp::create(cb, loc, rowAt, c)});
                            scf::YieldOp::create(cb, loc);
                          });
                      fill(kb, rowAt, hi, len);
                    });
                scf::YieldOp::create(rb, loc);
              });
          // Panel columns past N (the last panel): zero, as packConv leaves them.
          Value valid = arith::MaxSIOp::create(
              pb, loc,
              arith::MinSIOp::create(pb, loc, idx(pb, NC),
                                     arith::SubIOp::create(pb, loc, idx(pb, gemm.n), j0)),
              idx(pb, 0));
          scf::ForOp::create(pb, loc, idx(pb, 0), idx(pb, gemm.k), idx(pb, 1), ValueRange{},
              [&](OpBuilder &kb, Location, Value k, ValueRange) {
                fill(kb, arith::MulIOp::create(kb, loc, k, idx(kb, NC)), valid, idx(kb, NC));
                scf::YieldOp::create(kb, loc);
              });
        };
        // The splits of one panel are consecutive outer iterations, so a
        // thread packs each panel once and its later splits reuse it (one
        // thread packed a 7x7 stage's panel once per split: 10 copies of
        // 320 x 64 for a 1x1 convolution to 1280 channels).
        if (!packedB) {
          OpBuilder sb = whenHeldChanges(ob, loc, packedFor, unit);
          // (Runs of under 16 columns cost more in loop overhead than the
          // per-column tables: 7x7 outputs keep those.)
          if (gemm.conv && gemm.conv->strideW == 1 && gemm.conv->outWidth >= 16) {
            packConvRuns(sb, *gemm.conv);
          } else if (gemm.conv) {
            packConv(sb, *gemm.conv);
          } else if (!gemm.plainB) {
            pack(sb, true);
          } else if (gemm.n % NC == 0) {
            pack(sb, false);
          } else {
            Value full = arith::CmpIOp::create(
                sb, loc, arith::CmpIPredicate::ule,
                arith::AddIOp::create(sb, loc, j0, idx(sb, NC)), idx(sb, gemm.n));
            auto choice = scf::IfOp::create(sb, loc, full, /*withElseRegion=*/true);
            OpBuilder fb = OpBuilder::atBlockBegin(&choice.getThenRegion().front());
            pack(fb, false);
            OpBuilder gb = OpBuilder::atBlockBegin(&choice.getElseRegion().front());
            pack(gb, true);
          }
        }
        // Sweep A in blocks of MR rows, the panel in blocks of NR columns,
        // over k in [kLo, kHi): sums start at zero or from `sliceSums`
        // (`resume`), and end in the epilogue or back in `sliceSums`
        // (`finish` false).
        // Packed B: panel j0 / NC starts at j0 * K.
        Value panelBase = packedB ? arith::MulIOp::create(ob, loc, j0, idx(ob, gemm.k)).getResult()
                                  : idx(ob, 0);
        // The last panel's register blocks past N hold only zeros: not
        // swept (a [128, 2048] x [2048, 512] product's panels of 96 computed
        // 576 columns for 512).
        Value panelEnd = idx(ob, NC);
        if (gemm.n % NC != 0)
          panelEnd = arith::MinUIOp::create(
              ob, loc, panelEnd,
              arith::MulIOp::create(
                  ob, loc,
                  arith::DivUIOp::create(
                      ob, loc, arith::SubIOp::create(ob, loc, idx(ob, gemm.n + NR - 1), j0),
                      idx(ob, NR)),
                  idx(ob, NR)));
        auto sweep = [&](OpBuilder &sw, Value kLo, Value kHi, bool resume, bool finish) {
          scf::ForOp::create(
              sw, loc, firstRow, lastRow, idx(sw, MR), ValueRange{},
              [&](OpBuilder &ib, Location, Value i0, ValueRange) {
                SmallVector<Value> rows;
                for (int64_t r = 0; r < MR; ++r) // past M: read row M - 1, never stored
                  rows.push_back(arith::MinUIOp::create(
                      ib, loc, arith::AddIOp::create(ib, loc, i0, idx(ib, r)),
                      idx(ib, gemm.m - 1)));
                std::optional<GemmRowValues> rowValues;
                if (vectorEpilogue && finish) {
                  SmallVector<SmallVector<Value>> rowCoords;
                  for (Value row : rows)
                    rowCoords.push_back({batch, row, idx(ib, 0)});
                  rowValues = precomputeGemmRowValues(
                      ib, loc, kernel, root, entry, rowCoords, {gemm.batch, gemm.m, gemm.n},
                      gemm.resultIndex, W, rowValueBuffer, kRowValues, failed);
                }
                scf::ForOp::create(
                    ib, loc, idx(ib, 0), panelEnd, idx(ib, NR), ValueRange{},
                    [&](OpBuilder &cb, Location, Value jj, ValueRange) {
                      // This block's place in `sliceSums`: its row in the split,
                      // its column in the panel.
                      auto sliceAt = [&](OpBuilder &sb2, int64_t r, int64_t v) -> Value {
                        Value row = arith::AddIOp::create(
                            sb2, loc, arith::SubIOp::create(sb2, loc, i0, firstRow), idx(sb2, r));
                        return arith::AddIOp::create(
                            sb2, loc, arith::MulIOp::create(sb2, loc, row, idx(sb2, NC)),
                            arith::AddIOp::create(sb2, loc, jj, idx(sb2, v * W)));
                      };
                      SmallVector<Value> init;
                      for (int64_t r = 0; r < MR; ++r)
                        for (int64_t v = 0; v < V; ++v)
                          init.push_back(
                              resume
                                  ? vector::LoadOp::create(cb, loc, vec, sliceSums,
                                                           ValueRange{sliceAt(cb, r, v)})
                                        .getResult()
                                  : arith::ConstantOp::create(
                                        cb, loc, DenseElementsAttr::get(vec, cb.getF32FloatAttr(0)))
                                        .getResult());
                      // Packed B comes from memory in a network: this
                      // block (pass `pass` of the split's passes over the
                      // panel's rows [kLo, kHi)) fetches its share of the
                      // rows read next into L2 (the next slice, or the next
                      // panel: they follow in memory), so the stream runs
                      // under the FMAs.
                      const int64_t passes = splitRows / MR * (NC / NR);
                      const int64_t lines = (NC / kCacheLineFloats + passes - 1) / passes;
                      Value pass, nextStart, nextEnd;
                      if (packedB) {
                        pass = arith::AddIOp::create(
                            cb, loc,
                            arith::MulIOp::create(
                                cb, loc,
                                arith::DivUIOp::create(
                                    cb, loc, arith::SubIOp::create(cb, loc, i0, firstRow),
                                    idx(cb, MR)),
                                idx(cb, NC / NR)),
                            arith::DivUIOp::create(cb, loc, jj, idx(cb, NR)));
                        nextStart = arith::AddIOp::create(
                            cb, loc, panelBase, arith::MulIOp::create(cb, loc, kHi, idx(cb, NC)));
                        nextEnd = arith::MinUIOp::create(
                            cb, loc,
                            arith::AddIOp::create(
                                cb, loc, nextStart,
                                arith::MulIOp::create(cb, loc,
                                                      arith::SubIOp::create(cb, loc, kHi, kLo),
                                                      idx(cb, NC))),
                            idx(cb, panels * NC * gemm.k));
                        nextEnd = arith::SubIOp::create(cb, loc, nextEnd, idx(cb, 1));
                      }
                      // The filter's next block of rows, [i0 + MR, i0 + 2 MR) x K,
                      // over the panel's passes.
                      const int64_t aLines =
                          (MR * gemm.k + kCacheLineFloats - 1) / kCacheLineFloats;
                      const int64_t aPerStep =
                          (aLines + (NC / NR) * gemm.k - 1) / ((NC / NR) * gemm.k);
                      Value aNext, aEnd, aPass;
                      if (filterArg) {
                        Value next = arith::AddIOp::create(cb, loc, i0, idx(cb, MR));
                        aNext = arith::MulIOp::create(cb, loc, next, idx(cb, gemm.k));
                        aEnd = arith::SubIOp::create(
                            cb, loc,
                            arith::MinUIOp::create(
                                cb, loc,
                                arith::MulIOp::create(
                                    cb, loc, arith::AddIOp::create(cb, loc, next, idx(cb, MR)),
                                    idx(cb, gemm.k)),
                                idx(cb, gemm.m * gemm.k)),
                            idx(cb, 1));
                        aPass = arith::DivUIOp::create(cb, loc, jj, idx(cb, NR));
                      }
                      auto sums = scf::ForOp::create(
                          cb, loc, kLo, kHi, idx(cb, 1), init,
                          [&](OpBuilder &fb, Location, Value k, ValueRange acc) {
                            Value step = arith::SubIOp::create(fb, loc, k, kLo);
                            Value depth = arith::SubIOp::create(fb, loc, kHi, kLo);
                            if (filterArg)
                              prefetchShare(fb, loc, entry->getArgument(*filterArg), aNext, aEnd,
                                            aPass, depth, step, aPerStep);
                            if (packedB)
                              prefetchShare(fb, loc, packed, nextStart, nextEnd, pass, depth, step,
                                            lines);
                            Value base = arith::AddIOp::create(
                                fb, loc, arith::MulIOp::create(fb, loc, k, idx(fb, NC)),
                                arith::AddIOp::create(fb, loc, jj, panelBase));
                            SmallVector<Value> bv;
                            for (int64_t v = 0; v < V; ++v)
                              bv.push_back(
                                  vector::LoadOp::create(fb, loc, vec, packed,
                                                         ValueRange{arith::AddIOp::create(
                                                             fb, loc, base, idx(fb, v * W))}));
                            SmallVector<Value> next(acc.begin(), acc.end());
                            for (int64_t r = 0; r < MR; ++r) {
                              Value a = vector::BroadcastOp::create(
                                  fb, loc, vec, widen(fb, gemm.readA(fb, loc, batch, rows[r], k)));
                              for (int64_t v = 0; v < V; ++v)
                                next[r * V + v] =
                                    vector::FMAOp::create(fb, loc, a, bv[v], next[r * V + v]);
                            }
                            scf::YieldOp::create(fb, loc, next);
                          });
                      if (!finish) {
                        for (int64_t r = 0; r < MR; ++r)
                          for (int64_t v = 0; v < V; ++v)
                            vector::StoreOp::create(cb, loc, sums.getResult(r * V + v), sliceSums,
                                                    ValueRange{sliceAt(cb, r, v)});
                        scf::YieldOp::create(cb, loc);
                        return;
                      }
                      for (int64_t r = 0; r < MR; ++r)
                        for (int64_t v = 0; v < V; ++v)
                          vector::StoreOp::create(cb, loc, sums.getResult(r * V + v), block,
                                                  ValueRange{idx(cb, r * NR + v * W)});
                      // The epilogue, once per result inside [M) x [N): loop
                      // bounds clipped to the edges (no per-element branch, so
                      // LLVM can vectorize the column loop).
                      Value col0 = arith::AddIOp::create(cb, loc, j0, jj);
                      Value rowsHere = arith::MinSIOp::create(
                          cb, loc, idx(cb, MR),
                          arith::SubIOp::create(cb, loc, idx(cb, gemm.m), i0));
                      Value colsHere = arith::MaxSIOp::create(
                          cb, loc, idx(cb, 0),
                          arith::MinSIOp::create(
                              cb, loc, idx(cb, NR),
                              arith::SubIOp::create(cb, loc, idx(cb, gemm.n), col0)));
                      scf::ForOp::create(
                          cb, loc, idx(cb, 0), rowsHere, idx(cb, 1), ValueRange{},
                          [&](OpBuilder &rb, Location, Value r, ValueRange) {
                            Value i = arith::AddIOp::create(rb, loc, i0, r);
                            // Whole vectors of columns on vectors where the
                            // epilogue allows, the rest per element.
                            Value scalarFrom = idx(rb, 0);
                            if (vectorEpilogue) {
                              scalarFrom = arith::MulIOp::create(
                                  rb, loc, arith::DivUIOp::create(rb, loc, colsHere, idx(rb, W)),
                                  idx(rb, W));
                              scf::ForOp::create(
                                  rb, loc, idx(rb, 0), scalarFrom, idx(rb, W), ValueRange{},
                                  [&](OpBuilder &eb, Location, Value c, ValueRange) {
                                    Value sums = vector::LoadOp::create(
                                        eb, loc, vec, block,
                                        ValueRange{arith::AddIOp::create(
                                            eb, loc, arith::MulIOp::create(eb, loc, r, idx(eb, NR)),
                                            c)});
                                    emitGemmEpilogueVector(
                                        eb, loc, kernel, root, entry, sums,
                                        ValueRange{batch, i,
                                                   arith::AddIOp::create(eb, loc, col0, c)},
                                        {gemm.batch, gemm.m, gemm.n}, gemm.resultIndex, failed,
                                        rowValues ? &*rowValues : nullptr, r);
                                    scf::YieldOp::create(eb, loc);
                                  });
                            }
                            scf::ForOp::create(
                                rb, loc, scalarFrom, colsHere, idx(rb, 1), ValueRange{},
                                [&](OpBuilder &eb, Location, Value c, ValueRange) {
                                  Value j = arith::AddIOp::create(eb, loc, col0, c);
                                  Value sum = memref::LoadOp::create(
                                      eb, loc, block,
                                      ValueRange{arith::AddIOp::create(
                                          eb, loc, arith::MulIOp::create(eb, loc, r, idx(eb, NR)),
                                          c)});
                                  emitGemmEpilogueAt(
                                      eb, loc, kernel, root, entry, sum, ValueRange{batch, i, j},
                                      {gemm.batch, gemm.m, gemm.n}, gemm.resultIndex, failed);
                                  scf::YieldOp::create(eb, loc);
                                });
                            scf::YieldOp::create(rb, loc);
                          });
                      scf::YieldOp::create(cb, loc);
                    });
                scf::YieldOp::create(ib, loc);
              });
        };
        if (slices == 1) {
          sweep(ob, idx(ob, 0), idx(ob, gemm.k), /*resume=*/false, /*finish=*/true);
        } else {
          sweep(ob, idx(ob, 0), idx(ob, KC), /*resume=*/false, /*finish=*/false);
          if (slices > 2)
            scf::ForOp::create(ob, loc, idx(ob, KC), idx(ob, (slices - 1) * KC), idx(ob, KC),
                               ValueRange{},
                               [&](OpBuilder &mb, Location, Value kLo, ValueRange) {
                                 sweep(mb, kLo, arith::AddIOp::create(mb, loc, kLo, idx(mb, KC)),
                                       /*resume=*/true, /*finish=*/false);
                                 scf::YieldOp::create(mb, loc);
                               });
          sweep(ob, idx(ob, (slices - 1) * KC), idx(ob, gemm.k), /*resume=*/true,
                /*finish=*/true);
        }
        scf::YieldOp::create(ob, loc);
      });
  if (sliceSums)
    memref::DeallocOp::create(b, loc, sliceSums);
  if (!packedB)
    memref::DeallocOp::create(b, loc, packed);
  func::ReturnOp::create(b, loc);
  if (failed) {
    func.erase();
    return failure();
  }
  return func;
}
