//===- CoopMatrixGemm.cpp - f16 and bf16 matmul on cooperative matrices ---===//
//
// C[b, i, j] = sum_k A[b, i, k] B[b, k, j] with A and B in f16 (or bf16,
// carried as f16 bits: kiln-spirv-bf16-matrices retypes the lowered
// fragments), on the tensor cores through gpu.subgroup_mma_* (SPIR-V's KHR
// cooperative matrices). Each workgroup computes a tileM x tileN block with
// subgroupsM x subgroupsN subgroups; a subgroup holds its share as 16 x 16
// f32 accumulator fragments across the k loop. Per tileK slice the work
// items stage A and B in shared memory (the global reads of the next slice
// issued before this slice's multiplies, zeros past every edge, so ragged
// shapes need no fragment-level checks), then every subgroup loads its A
// and B fragments from the tiles and multiplies. Tile rows are padded by 8
// halves (16 bytes): fragment loads of consecutive rows then start in
// different banks. An operand that is a plain kernel input, contiguous
// along the tile's rows, moves in 16-byte groups of 8 halves (its buffer
// and tile declared as vector<4xf32>, bits only: the fragment loads read
// them as f16); B contiguous along k (a linear layer's W^T) is staged
// transposed, [n][k], and loaded column-major. With 2 stages the tiles are
// double-buffered, one barrier per slice. A stride-1 convolution over
// widths of whole 8-groups gathers its B 8 columns at a time, shifted out
// of two aligned 16-byte reads of an input row; any other convolution's B
// is gathered through a table of each column's window offsets (where
// shared memory holds it). Other operands go element
// by element through their readers. The epilogue reads the accumulators back through one
// 16 x 16 f32 fragment of shared memory per subgroup, each lane evaluating
// its results as the tiled form does, then one guarded store each.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "kiln/Codegen/KernelToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace kiln;

namespace {
constexpr int64_t kF = CoopMatrixConfig::kFragment;
constexpr int64_t kPad = 8; // halves: 16 bytes

} // namespace

/// Whether the GEMM multiplies bf16 (on f16 fragments of the same bits).
static bool multipliesBF16(Operation *root) {
  return cast<RankedTensorType>(root->getOperand(0).getType()).getElementType().isBF16();
}

/// Whether kernel argument `argNumber` feeds nothing but `root` (through
/// views): its buffer may then be declared as 16-byte vectors.
static bool onlyFeedsRoot(KernelOp kernel, Operation *root, unsigned argNumber) {
  Value arg = kernel.getBody().front().getArgument(argNumber);
  if (cast<RankedTensorType>(arg.getType()).getNumElements() % 8)
    return false;
  for (Value v = arg; v != root->getResult(0);) {
    if (!v.hasOneUse())
      return false;
    Operation *user = *v.getUsers().begin();
    if (user == root)
      break;
    if (!user->hasTrait<View>() || user->getNumResults() != 1)
      return false;
    v = user->getResult(0);
  }
  return true;
}

/// Stride 1 along rows of whole 8-groups (the input's and the output's
/// widths multiples of 8), windows reaching at most 8 columns either side:
/// a k's 8 consecutive output columns read 8 consecutive halves of one
/// input row, inside the two aligned 16-byte groups around them.
static bool gathersRows(KernelOp kernel, Operation *root, const Gemm &gemm) {
  if (!gemm.conv)
    return false;
  const ConvGeometry &cg = *gemm.conv;
  return cg.strideW == 1 && cg.dilationW == 1 && cg.width % 8 == 0 && cg.outWidth % 8 == 0 &&
         cg.padW <= 8 && cg.kernelW - 1 - cg.padW <= 8 && onlyFeedsRoot(kernel, root, cg.inputArg);
}

std::optional<GemmShape> kiln::coopGemmShape(KernelOp kernel, Operation *root, bool bf16) {
  if (!isa_and_nonnull<MatmulOp, Conv2dOp>(root))
    return std::nullopt;
  // Both operands f16, or both bf16 where the device multiplies bf16.
  for (Value operand : root->getOperands()) {
    Type element = cast<RankedTensorType>(operand.getType()).getElementType();
    if (!(element.isF16() || (bf16 && element.isBF16())) ||
        element != cast<RankedTensorType>(root->getOperand(0).getType()).getElementType())
      return std::nullopt;
  }
  // A convolution with at least one fragment of output channels per group,
  // reading one input (a folded concat's sources are the tiled form's).
  std::optional<Gemm> gemm = describeGemm(kernel, root, /*minRowsPerGroup=*/16);
  if (!gemm || gemm->k == 0 || (gemm->conv && gemm->conv->sources.size() != 1))
    return std::nullopt;
  return GemmShape{gemm->batch, gemm->m, gemm->n, gemm->k, gathersRows(kernel, root, *gemm)};
}

FailureOr<func::FuncOp> kiln::buildCoopGemmFunction(KernelOp kernel, Operation *root,
                                                    OpBuilder &builder, StringRef name,
                                                    const DeviceLimits &limits,
                                                    const CoopMatrixConfig &config) {
  std::optional<GemmShape> shape = coopGemmShape(kernel, root, limits.cooperativeMatrixBF16);
  if (!shape)
    return root->emitOpError("the coop_gemm form takes a matmul of two f16 operands read "
                             "through views, or an f16 convolution of one input with at least "
                             "16 filters per group (bf16 where the device multiplies bf16)"),
           failure();
  if (std::string problem = config.check(limits); !problem.empty())
    return root->emitOpError("coop_gemm configuration: ") << problem, failure();
  std::optional<Gemm> described = describeGemm(kernel, root, /*minRowsPerGroup=*/16);
  const Gemm &gemm = *described;
  int64_t results = cast<RankedTensorType>(root->getResult(0).getType()).getNumElements();
  func::FuncOp func =
      createFlatKernelFunction(kernel, builder, name, results * gemm.k, std::max<int64_t>(1, results));
  Block *entry = func.addEntryBlock();
  *gemm.entry = entry;
  OpBuilder fb = OpBuilder::atBlockBegin(entry);
  Location loc = kernel.getLoc();
  MLIRContext *ctx = builder.getContext();
  Type f16 = Float16Type::get(ctx), f32 = Float32Type::get(ctx);
  // An operand's element as fragment bits: f16, or bf16's bits in an f16
  // (kiln-spirv-bf16-matrices makes the fragments bf16 once lowered).
  const bool bf16 = multipliesBF16(root);
  auto fragmentBits = [&](OpBuilder &ib, Value v) -> Value {
    if (!bf16)
      return v.getType() == f16 ? v : arith::TruncFOp::create(ib, loc, f16, v).getResult();
    if (!v.getType().isBF16())
      v = arith::TruncFOp::create(ib, loc, BFloat16Type::get(ctx), v);
    return arith::BitcastOp::create(ib, loc, f16, v);
  };
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };
  auto add = [&](OpBuilder &ib, Value x, Value y) -> Value {
    return arith::AddIOp::create(ib, loc, x, y);
  };
  auto mul = [&](OpBuilder &ib, Value x, int64_t y) -> Value {
    return arith::MulIOp::create(ib, loc, x, idx(ib, y));
  };

  const int64_t TM = config.tileM, TN = config.tileN, TK = config.tileK;
  const int64_t SM = config.subgroupsM, SN = config.subgroupsN, sg = limits.subgroupSize;
  const int64_t WM = TM / SM, WN = TN / SN, FM = WM / kF, FN = WN / kF;
  const int64_t threads = SM * SN * sg;

  auto launch = gpu::LaunchOp::create(fb, loc, idx(fb, (gemm.n + TN - 1) / TN),
                                      idx(fb, (gemm.m + TM - 1) / TM), idx(fb, gemm.batch),
                                      idx(fb, threads), idx(fb, 1), idx(fb, 1));
  func::ReturnOp::create(fb, loc);
  OpBuilder lb = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value batch = launch.getBlockIds().z;
  Value rowBase = mul(lb, launch.getBlockIds().y, TM);
  Value colBase = mul(lb, launch.getBlockIds().x, TN);
  // Subgroups are runs of `sg` consecutive work items (the SubgroupId
  // built-in needs a capability spirv-update-vce drops).
  Value subgroup = arith::DivUIOp::create(lb, loc, tid, idx(lb, sg));
  Value lane = arith::RemUIOp::create(lb, loc, tid, idx(lb, sg));
  Value subRow = mul(lb, arith::DivUIOp::create(lb, loc, subgroup, idx(lb, SN)), WM);
  Value subCol = mul(lb, arith::RemUIOp::create(lb, loc, subgroup, idx(lb, SN)), WN);

  auto space = lb.getI64IntegerAttr(3);
  Type v4 = VectorType::get({4}, f32); // 16 bytes: 8 halves, bits only
  const bool raggedM = gemm.m % TM != 0, raggedN = gemm.n % TN != 0, raggedK = gemm.k % TK != 0;
  // One operand's staging. Its GEMM coordinates are (p, q): A (i, k), B
  // (k, j); the tile is [p][q], or [q][p] when `transposed`.
  struct Staging {
    const OperandReader *reader = nullptr;
    int64_t extentP = 1, extentQ = 1, tileP = 1, tileQ = 1;
    bool raggedP = false, raggedQ = false, transposed = false, wide = false;
    // A convolution's B: 8 consecutive k of one column gathered into one
    // 16-byte group of a [n][k] tile (wide in shared memory only).
    bool gathered = false;
    // A stride-1 convolution's B: 8 consecutive columns of one k, shifted
    // out of two aligned 16-byte groups of an input row ([k][n], wide).
    bool rowGroups = false;
    unsigned arg = 0;
    AffineExpr vectorIndex; // wide: the vector holding (b, p, q), q or p a multiple of 8
    int64_t ld = 0;         // tile row length, in halves
    int64_t units = 0;      // one buffer's size, in the tile's elements
    Value tile;             // `stages` buffers one after the other
    SmallVector<std::pair<Value, Value>> slots; // (tile row, tile column or 8-group)
    int64_t rows() const { return transposed ? tileQ : tileP; }
    int64_t cols() const { return transposed ? tileP : tileQ; }
  };
  // Whether the operand at `access` can move in groups of 8 along dim `d`
  // (1: rows p, 2: columns q of (b, p, q)): contiguous there, every other
  // term and the offset multiples of 8, its size a multiple of 8, and its
  // kernel argument read by nothing but this matmul (through views).
  auto wideAlong = [&](const std::optional<std::pair<unsigned, AffineExpr>> &access, unsigned d,
                       int64_t size) {
    if (!access || size % 8)
      return false;
    AffineExpr e = access->second;
    std::optional<int64_t> o = elementAt(e, 0, 0, 0), sb = elementAt(e, 1, 0, 0),
                           sp = elementAt(e, 0, 1, 0), sq = elementAt(e, 0, 0, 1);
    if (!o || !sb || !sp || !sq)
      return false;
    int64_t along = d == 1 ? *sp - *o : *sq - *o, other = d == 1 ? *sq - *o : *sp - *o;
    if (along != 1 || *o % 8 || (*sb - *o) % 8 || other % 8)
      return false;
    return onlyFeedsRoot(kernel, root, access->first);
  };
  Staging sa, sb;
  sa.reader = &gemm.readA;
  sa.extentP = gemm.m, sa.extentQ = gemm.k, sa.tileP = TM, sa.tileQ = TK;
  sa.raggedP = raggedM, sa.raggedQ = raggedK;
  sb.reader = &gemm.readB;
  sb.extentP = gemm.k, sb.extentQ = gemm.n, sb.tileP = TK, sb.tileQ = TN;
  sb.raggedP = raggedK, sb.raggedQ = raggedN;
  sa.wide = wideAlong(gemm.aAccess, 2, gemm.k);
  if (wideAlong(gemm.bAccess, 2, gemm.n)) {
    sb.wide = true;
  } else if (wideAlong(gemm.bAccess, 1, gemm.k)) {
    sb.wide = sb.transposed = true;
  }
  const ConvGeometry *cg = gemm.conv ? &*gemm.conv : nullptr;
  const int64_t taps = cg ? cg->kernelH * cg->kernelW : 0;
  // Rows of 8 columns: two 16-byte reads and a few shifts per 8 elements,
  // where the table's gather reads (and finds) each element alone (its
  // loads were the kernel: the ResNet stage 0.087 -> 0.062 ms on the H200).
  if (shape->gathersRows && TN % 8 == 0 && (TK * TN / 8) % threads == 0) {
    sb.rowGroups = sb.wide = true;
    sb.arg = cg->inputArg;
  }
  const bool useTable = cg && !sb.rowGroups &&
                        config.sharedBytes() + TN * taps * 4 <= limits.sharedMemoryBytes;
  // With the table, each work item gathers 8 consecutive k of its column
  // and stores them as one 16-byte group: one shared store for 8 (the
  // stores were a third of the staging's memory instructions).
  if (useTable && TK % 8 == 0 && (TN * TK / 8) % threads == 0)
    sb.gathered = sb.wide = sb.transposed = true;
  for (auto [st, access] : {std::pair{&sa, &gemm.aAccess}, std::pair{&sb, &gemm.bAccess}}) {
    if (st->gathered || st->rowGroups)
      continue;
    if (st->wide && (st->rows() * st->cols() / 8) % threads)
      st->wide = st->transposed = false; // groups do not split evenly: element by element
    if (st->wide) {
      st->arg = (*access)->first;
      // The element index at a group's first element, over 8.
      st->vectorIndex = simplifyAffineExpr((*access)->second.floorDiv(8), 3, 0);
    }
  }
  // Where no tile overhangs and each lane's epilogue results come in groups
  // of 4 along a row, the epilogue reads and writes 4 at a time: its grouped
  // arguments and the results are buffers of 4-vectors. (The MLP's GEMM of
  // the f16 transformer, 47 us alone, took 56 us with a bias added and 82
  // with bias and GELU element by element on the H200.)
  const int64_t perLane = kF * kF / sg;
  std::optional<DenseSet<unsigned>> epilogueGroups;
  if (!raggedM && !raggedN && perLane % 4 == 0)
    epilogueGroups = gpuEpilogueGroups(kernel, root, gemm);
  // Wide operands' buffers are declared as 16-byte vectors (the same bytes).
  {
    SmallVector<Type> args(func.getArgumentTypes());
    for (Staging *st : {&sa, &sb})
      if (st->wide && !st->gathered) {
        auto flat = cast<MemRefType>(args[st->arg]);
        args[st->arg] = MemRefType::get({flat.getNumElements() / 8}, v4);
      }
    auto asGroups = [&](unsigned a) {
      auto flat = cast<MemRefType>(args[a]);
      args[a] = MemRefType::get({flat.getNumElements() / 4},
                                VectorType::get({4}, flat.getElementType()));
    };
    if (epilogueGroups) {
      for (unsigned a : *epilogueGroups)
        asGroups(a);
      for (unsigned r = 0; r < kernel.getNumResults(); ++r)
        asGroups(kernel.getInputs().size() + r);
    }
    func.setType(builder.getFunctionType(args, {}));
    for (auto [i, type] : llvm::enumerate(args))
      entry->getArgument(i).setType(type);
  }
  for (Staging *st : {&sa, &sb}) {
    st->ld = st->cols() + kPad;
    st->units = st->rows() * st->ld / (st->wide ? 8 : 1);
    st->tile = memref::AllocOp::create(
        lb, loc,
        MemRefType::get({st->units * config.stages}, st->wide ? v4 : Type(f16), AffineMap(), space));
    // Consecutive work items take consecutive elements (or groups) along
    // the operand's contiguous dimension, so the global reads coalesce.
    int64_t perRow = st->wide ? st->cols() / 8 : st->cols();
    // (A gathered B's consecutive work items take consecutive columns: its
    // global reads coalesce, its 16-byte stores fall in different banks.)
    bool alongCols = !st->gathered && (st->wide || (st == &sa ? !gemm.aAccess || contiguousAlongColumns(gemm.aAccess->second)
                                                              : !gemm.bAccess || contiguousAlongColumns(gemm.bAccess->second)));
    int64_t count = st->rows() * perRow;
    // Where the work items cover whole rows (or columns), every slot of one
    // work item keeps its column (row) and steps the other by a constant:
    // one value and constant offsets, not two registers per slot.
    int64_t inner = alongCols ? perRow : st->rows();
    Value first, fixed;
    if (threads % inner == 0) {
      first = arith::DivUIOp::create(lb, loc, tid, idx(lb, inner));
      fixed = arith::RemUIOp::create(lb, loc, tid, idx(lb, inner));
    }
    for (int64_t e = 0; e < count / threads; ++e) {
      Value outer, along;
      if (fixed) {
        outer = add(lb, first, idx(lb, e * (threads / inner)));
        along = fixed;
      } else {
        Value flat = add(lb, tid, idx(lb, e * threads));
        outer = arith::DivUIOp::create(lb, loc, flat, idx(lb, inner));
        along = arith::RemUIOp::create(lb, loc, flat, idx(lb, inner));
      }
      // (tile row, tile column or 8-group)
      st->slots.push_back(alongCols ? std::pair{outer, along} : std::pair{along, outer});
    }
  }
  Value scratch =
      memref::AllocOp::create(lb, loc, MemRefType::get({SM * SN * kF * kF}, f32, AffineMap(), space));

  // A coordinate clamped into [0, bound) (when it may leave it), with the
  // condition that it was inside.
  auto clamp = [&](OpBuilder &gb, Value v, int64_t bound, bool checked, Value &inside) -> Value {
    if (!checked)
      return v;
    Value ok = arith::CmpIOp::create(gb, loc, arith::CmpIPredicate::ult, v, idx(gb, bound));
    inside = inside ? arith::AndIOp::create(gb, loc, inside, ok).getResult() : ok;
    return arith::MinUIOp::create(gb, loc, v, idx(gb, bound - 1));
  };
  // One slot's global read of slice `kBase`: an f16, or 8 halves as a
  // vector<4xf32>; zeros past the operand's edges.
  auto readSlot = [&](OpBuilder &gb, const Staging &st, std::pair<Value, Value> slot, Value pBase,
                      Value qBase) -> Value {
    Value r = slot.first, c = st.wide ? mul(gb, slot.second, 8) : slot.second;
    Value p = add(gb, pBase, st.transposed ? c : r), q = add(gb, qBase, st.transposed ? r : c);
    Value inside;
    p = clamp(gb, p, st.extentP, st.raggedP, inside);
    q = clamp(gb, q, st.extentQ, st.raggedQ, inside);
    Value v;
    if (st.wide)
      v = memref::LoadOp::create(gb, loc, entry->getArgument(st.arg),
                                 ValueRange{applyExpr(gb, loc, st.vectorIndex, ValueRange{batch, p, q})});
    else {
      v = fragmentBits(gb, (*st.reader)(gb, loc, batch, p, q));
    }
    if (!inside)
      return v;
    if (st.wide)
      return arith::SelectOp::create(
          gb, loc, vector::BroadcastOp::create(gb, loc, VectorType::get({4}, gb.getI1Type()), inside),
          v, arith::ConstantOp::create(gb, loc, DenseElementsAttr::get(cast<VectorType>(v4),
                                                                       gb.getF32FloatAttr(0))));
    return arith::SelectOp::create(gb, loc, inside, v, floatConstant(gb, loc, f16, 0.0));
  };
  // A convolution's B[b, k, j] is gathered from its input x: element
  // (channel, window row, window column) = k of the window of output
  // position j, zero in the padding. Each slot's column is the same in
  // every k slice: its window's top-left corner is found once, here.
  struct ConvColumn {
    Value top, left, inside; // inside: j < N (null when no tile overhangs)
  };
  SmallVector<ConvColumn> convColumns; // per B slot, without the table
  Value convPlanes; // the input plane of the GEMM's channel 0
  if (cg) {
    convPlanes = add(lb, mul(lb, arith::DivUIOp::create(lb, loc, batch, idx(lb, cg->groups)), cg->channels),
                     mul(lb, arith::RemUIOp::create(lb, loc, batch, idx(lb, cg->groups)), cg->groupChannels));
    for (auto slot : sb.slots) {
      if (useTable || sb.rowGroups)
        break;
      ConvColumn column;
      Value j = clamp(lb, add(lb, colBase, slot.second), gemm.n, raggedN, column.inside);
      column.top = arith::SubIOp::create(
          lb, loc, mul(lb, arith::DivUIOp::create(lb, loc, j, idx(lb, cg->outWidth)), cg->strideH),
          idx(lb, cg->padH));
      column.left = arith::SubIOp::create(
          lb, loc, mul(lb, arith::RemUIOp::create(lb, loc, j, idx(lb, cg->outWidth)), cg->strideW),
          idx(lb, cg->padW));
      convColumns.push_back(column);
    }
  }
  // Where shared memory also holds it, a table of each tile column's window:
  // entry (column, tap) is the input element's offset within its plane, or
  // -1 in the padding and past N. A work item's gathers then find their
  // element with one table read instead of dividing k by the taps and
  // checking bounds each time (about 30 instructions per element before,
  // against a few multiply-adds per slice: the gathers were the kernel).
  Value tapTable;
  Type i32 = lb.getI32Type();
  if (useTable) {
    tapTable = memref::AllocOp::create(lb, loc, MemRefType::get({TN * taps}, i32, AffineMap(), space));
    int64_t entries = TN * taps;
    for (int64_t e = 0; e < (entries + threads - 1) / threads; ++e) {
      Value flat = add(lb, tid, idx(lb, e * threads));
      OpBuilder eb = lb;
      if ((e + 1) * threads > entries) {
        auto inRange = scf::IfOp::create(
            lb, loc, arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ult, flat, idx(lb, entries)),
            /*withElseRegion=*/false);
        eb = inRange.getThenBodyBuilder();
      }
      Value column = arith::DivUIOp::create(eb, loc, flat, idx(eb, taps));
      Value tap = arith::RemUIOp::create(eb, loc, flat, idx(eb, taps));
      Value inside;
      Value j = clamp(eb, add(eb, colBase, column), gemm.n, raggedN, inside);
      Value h = add(eb,
                    arith::SubIOp::create(
                        eb, loc, mul(eb, arith::DivUIOp::create(eb, loc, j, idx(eb, cg->outWidth)), cg->strideH),
                        idx(eb, cg->padH)),
                    mul(eb, arith::DivUIOp::create(eb, loc, tap, idx(eb, cg->kernelW)), cg->dilationH));
      Value w = add(eb,
                    arith::SubIOp::create(
                        eb, loc, mul(eb, arith::RemUIOp::create(eb, loc, j, idx(eb, cg->outWidth)), cg->strideW),
                        idx(eb, cg->padW)),
                    mul(eb, arith::RemUIOp::create(eb, loc, tap, idx(eb, cg->kernelW)), cg->dilationW));
      Value ok = insidePlane(eb, loc, h, w, *cg);
      if (inside)
        ok = arith::AndIOp::create(eb, loc, ok, inside);
      Value entry = arith::SelectOp::create(
          eb, loc, ok, arith::IndexCastOp::create(eb, loc, i32, add(eb, mul(eb, h, cg->width), w)),
          arith::ConstantIntOp::create(eb, loc, i32, -1));
      memref::StoreOp::create(eb, loc, entry, tapTable, ValueRange{flat});
    }
    gpu::BarrierOp::create(lb, loc);
  }
  // Element k of a slot's column: through the table (`tableRow`, the
  // column's first entry) or its window (`column`).
  auto gather = [&](OpBuilder &gb, const ConvColumn *column, Value tableRow, Value k) -> Value {
    Value inside = tapTable ? Value() : column->inside;
    k = clamp(gb, k, gemm.k, raggedK, inside);
    Value tap = arith::RemUIOp::create(gb, loc, k, idx(gb, taps));
    Value plane = add(gb, convPlanes, arith::DivUIOp::create(gb, loc, k, idx(gb, taps)));
    Value at;
    if (tapTable) {
      Value entry = memref::LoadOp::create(gb, loc, tapTable, ValueRange{add(gb, tableRow, tap)});
      Value ok = arith::CmpIOp::create(gb, loc, arith::CmpIPredicate::sge, entry,
                                       arith::ConstantIntOp::create(gb, loc, i32, 0));
      inside = inside ? arith::AndIOp::create(gb, loc, inside, ok).getResult() : ok;
      at = add(gb, mul(gb, plane, cg->height * cg->width),
               arith::IndexCastOp::create(gb, loc, gb.getIndexType(), entry));
    } else {
      Value h = add(gb, column->top,
                    mul(gb, arith::DivUIOp::create(gb, loc, tap, idx(gb, cg->kernelW)), cg->dilationH));
      Value w = add(gb, column->left,
                    mul(gb, arith::RemUIOp::create(gb, loc, tap, idx(gb, cg->kernelW)), cg->dilationW));
      Value ok = insidePlane(gb, loc, h, w, *cg);
      inside = inside ? arith::AndIOp::create(gb, loc, inside, ok).getResult() : ok;
      at = add(gb, mul(gb, add(gb, mul(gb, plane, cg->height), h), cg->width), w);
    }
    at = arith::SelectOp::create(gb, loc, inside, at, idx(gb, 0)); // never read outside
    Value v = fragmentBits(
        gb, memref::LoadOp::create(gb, loc, entry->getArgument(cg->inputArg), ValueRange{at}));
    return arith::SelectOp::create(gb, loc, inside, v, floatConstant(gb, loc, f16, 0.0));
  };
  // Row groups: each slot's 8 columns (fixed across k slices) start at
  // output (ho, wo0), wo0 a multiple of 8: its window row's first input row
  // and its 16-byte group along the row; zeros past N.
  struct RowGroup {
    Value top, group, inside;
  };
  SmallVector<RowGroup> rowGroups;
  if (sb.rowGroups)
    for (auto slot : sb.slots) {
      RowGroup rg;
      Value j = clamp(lb, add(lb, colBase, mul(lb, slot.second, 8)), gemm.n, raggedN, rg.inside);
      rg.top = arith::SubIOp::create(
          lb, loc, mul(lb, arith::DivUIOp::create(lb, loc, j, idx(lb, cg->outWidth)), cg->strideH),
          idx(lb, cg->padH));
      rg.group = arith::DivUIOp::create(
          lb, loc, arith::RemUIOp::create(lb, loc, j, idx(lb, cg->outWidth)), idx(lb, 8));
      rowGroups.push_back(rg);
    }
  // Row k of a row group: window tap (dy, dx) of channel k / taps. Its 8
  // halves start s = dx - padW columns from the group's first: at half
  // r = s mod 8 of group floor(s / 8), running into the next group.
  auto gatherRow = [&](OpBuilder &gb, const RowGroup &rg, Value k) -> Value {
    Value inside = rg.inside;
    k = clamp(gb, k, gemm.k, raggedK, inside);
    Value tap = arith::RemUIOp::create(gb, loc, k, idx(gb, taps));
    Value plane = add(gb, convPlanes, arith::DivUIOp::create(gb, loc, k, idx(gb, taps)));
    Value h = add(gb, rg.top,
                  mul(gb, arith::DivUIOp::create(gb, loc, tap, idx(gb, cg->kernelW)), cg->dilationH));
    Value okH = arith::CmpIOp::create(gb, loc, arith::CmpIPredicate::ult, h, idx(gb, cg->height));
    inside = inside ? arith::AndIOp::create(gb, loc, inside, okH).getResult() : okH;
    // s + 8 in [0, 16]: the first group is rg.group + (s + 8) / 8 - 1.
    Value shifted = add(gb, arith::RemUIOp::create(gb, loc, tap, idx(gb, cg->kernelW)), idx(gb, 8 - cg->padW));
    Value r = arith::RemUIOp::create(gb, loc, shifted, idx(gb, 8));
    Value rowStart = mul(gb, add(gb, mul(gb, plane, cg->height), h), cg->width / 8);
    Type i32v = VectorType::get({4}, gb.getI32Type());
    SmallVector<Value> words; // the two groups' eight 32-bit words
    for (int64_t part = 0; part < 2; ++part) {
      Value group = arith::SubIOp::create(
          gb, loc, add(gb, rg.group, arith::DivUIOp::create(gb, loc, shifted, idx(gb, 8))),
          idx(gb, 1 - part));
      Value ok = arith::CmpIOp::create(gb, loc, arith::CmpIPredicate::ult, group, idx(gb, cg->width / 8));
      ok = arith::AndIOp::create(gb, loc, ok, inside);
      Value at = arith::SelectOp::create(gb, loc, ok, add(gb, rowStart, group), idx(gb, 0));
      Value v = memref::LoadOp::create(gb, loc, entry->getArgument(cg->inputArg), ValueRange{at});
      v = vector::BitCastOp::create(gb, loc, i32v, v);
      v = arith::SelectOp::create(
          gb, loc, vector::BroadcastOp::create(gb, loc, VectorType::get({4}, gb.getI1Type()), ok), v,
          arith::ConstantOp::create(gb, loc, DenseElementsAttr::get(cast<VectorType>(i32v), gb.getI32IntegerAttr(0))));
      for (int64_t w = 0; w < 4; ++w)
        words.push_back(vector::ExtractOp::create(gb, loc, v, ArrayRef<int64_t>{w}));
    }
    // Word j of the result: halves r + 2j, r + 2j + 1 of the eight words,
    // from word j + r / 2 (and the next one's low half when r is odd).
    Value q = arith::IndexCastOp::create(gb, loc, gb.getI32Type(), arith::DivUIOp::create(gb, loc, r, idx(gb, 2)));
    Value odd = arith::CmpIOp::create(gb, loc, arith::CmpIPredicate::ne,
                                      arith::RemUIOp::create(gb, loc, r, idx(gb, 2)), idx(gb, 0));
    auto i32c = [&](int64_t v) { return arith::ConstantIntOp::create(gb, loc, gb.getI32Type(), v); };
    SmallVector<Value> is(4);
    for (int64_t d = 1; d < 4; ++d)
      is[d] = arith::CmpIOp::create(gb, loc, arith::CmpIPredicate::eq, q, i32c(d));
    SmallVector<Value> from; // word j + q, for j in [0, 5)
    for (int64_t j = 0; j < 5; ++j) {
      Value w = words[j];
      for (int64_t d = 1; d < 4; ++d)
        w = arith::SelectOp::create(gb, loc, is[d], words[std::min<int64_t>(j + d, 7)], w);
      from.push_back(w);
    }
    SmallVector<Value> out;
    for (int64_t j = 0; j < 4; ++j) {
      Value joined = arith::OrIOp::create(gb, loc, arith::ShRUIOp::create(gb, loc, from[j], i32c(16)),
                                          arith::ShLIOp::create(gb, loc, from[j + 1], i32c(16)));
      out.push_back(arith::SelectOp::create(gb, loc, odd, joined, from[j]));
    }
    return vector::BitCastOp::create(gb, loc, v4, vector::FromElementsOp::create(gb, loc, i32v, out));
  };
  SmallVector<Value> tableRows; // each B slot's first table entry
  if (tapTable)
    for (auto slot : sb.slots)
      tableRows.push_back(mul(lb, sb.gathered ? slot.first : slot.second, taps)); // one value after CSE
  int64_t kTiles = (gemm.k + TK - 1) / TK;
  // The global reads of k slice `kt`: A's slots, then B's.
  auto fetch = [&](OpBuilder &gb, Value kt) {
    Value kBase = mul(gb, kt, TK);
    SmallVector<Value> values;
    for (auto slot : sa.slots)
      values.push_back(readSlot(gb, sa, slot, rowBase, kBase));
    for (auto [n, slot] : llvm::enumerate(sb.slots)) {
      if (!cg) {
        values.push_back(readSlot(gb, sb, slot, kBase, colBase));
      } else if (sb.rowGroups) {
        values.push_back(gatherRow(gb, rowGroups[n], add(gb, kBase, slot.first)));
      } else if (sb.gathered) {
        // Tile row n = slot.first, k group slot.second: 8 halves as 16 bytes.
        // (SPIR-V vectors hold 4 elements: pairs of halves become f32 bits.)
        SmallVector<Value> words;
        Value k0 = add(gb, kBase, mul(gb, slot.second, 8));
        for (int64_t e = 0; e < 8; e += 2) {
          Value pair = vector::FromElementsOp::create(
              gb, loc, VectorType::get({2}, f16),
              ValueRange{gather(gb, nullptr, tableRows[n], add(gb, k0, idx(gb, e))),
                         gather(gb, nullptr, tableRows[n], add(gb, k0, idx(gb, e + 1)))});
          Value word = vector::BitCastOp::create(gb, loc, VectorType::get({1}, f32), pair);
          words.push_back(vector::ExtractOp::create(gb, loc, word, ArrayRef<int64_t>{0}));
        }
        values.push_back(vector::FromElementsOp::create(gb, loc, v4, words));
      } else {
        values.push_back(tapTable ? gather(gb, nullptr, tableRows[n], add(gb, kBase, slot.first))
                                  : gather(gb, &convColumns[n], Value(), add(gb, kBase, slot.first)));
      }
    }
    return values;
  };
  // Into buffer `buffer` (an index: 0, or the slice's parity with stages).
  auto storeSlots = [&](OpBuilder &gb, const Staging &st, ValueRange values, Value buffer) {
    int64_t rowUnits = st.wide ? st.ld / 8 : st.ld;
    Value base = mul(gb, buffer, st.units);
    for (auto [slot, v] : llvm::zip(st.slots, values))
      memref::StoreOp::create(
          gb, loc, v, st.tile,
          ValueRange{add(gb, base, add(gb, mul(gb, slot.first, rowUnits), slot.second))});
  };
  // A fragment's first element at tile (row, col) of buffer `buffer`, in
  // the tile's units.
  auto fragmentAt = [&](OpBuilder &gb, const Staging &st, Value row, int64_t col,
                        Value buffer) -> Value {
    Value at = add(gb, mul(gb, row, st.ld), idx(gb, col));
    at = st.wide ? arith::DivUIOp::create(gb, loc, at, idx(gb, 8)).getResult() : at;
    return add(gb, mul(gb, buffer, st.units), at);
  };

  auto accType = gpu::MMAMatrixType::get({kF, kF}, f32, "COp");
  auto aType = gpu::MMAMatrixType::get({kF, kF}, f16, "AOp");
  auto bType = gpu::MMAMatrixType::get({kF, kF}, f16, "BOp");
  Value zero = gpu::SubgroupMmaConstantMatrixOp::create(lb, loc, accType,
                                                        floatConstant(lb, loc, f32, 0.0));
  SmallVector<Value> inits(FM * FN, zero);
  const size_t numAcc = inits.size();
  // Every subgroup's multiplies of the slice in buffer `buffer`.
  auto multiply = [&](OpBuilder &kb, SmallVector<Value> &acc, Value buffer) {
    for (int64_t kk = 0; kk < TK; kk += kF) {
      SmallVector<Value> aFrags, bFrags;
      for (int64_t fm = 0; fm < FM; ++fm)
        aFrags.push_back(gpu::SubgroupMmaLoadMatrixOp::create(
            kb, loc, aType, sa.tile,
            ValueRange{fragmentAt(kb, sa, add(kb, subRow, idx(kb, fm * kF)), kk, buffer)},
            kb.getIndexAttr(sa.wide ? sa.ld / 8 : sa.ld), UnitAttr()));
      for (int64_t fn = 0; fn < FN; ++fn) {
        // [k][n] rows, or [n][k] read column-major.
        Value n0 = add(kb, subCol, idx(kb, fn * kF));
        Value at = sb.transposed
                       ? fragmentAt(kb, sb, n0, kk, buffer)
                       : add(kb, fragmentAt(kb, sb, idx(kb, kk), 0, buffer),
                             sb.wide ? arith::DivUIOp::create(kb, loc, n0, idx(kb, 8)).getResult()
                                     : n0);
        bFrags.push_back(gpu::SubgroupMmaLoadMatrixOp::create(
            kb, loc, bType, sb.tile, ValueRange{at}, kb.getIndexAttr(sb.wide ? sb.ld / 8 : sb.ld),
            sb.transposed ? kb.getUnitAttr() : UnitAttr()));
      }
      for (int64_t fm = 0; fm < FM; ++fm)
        for (int64_t fn = 0; fn < FN; ++fn)
          acc[fm * FN + fn] = gpu::SubgroupMmaComputeOp::create(
              kb, loc, accType, aFrags[fm], bFrags[fn], acc[fm * FN + fn], UnitAttr(), UnitAttr());
    }
  };
  auto store = [&](OpBuilder &kb, ValueRange staged, Value buffer) {
    storeSlots(kb, sa, staged.take_front(sa.slots.size()), buffer);
    storeSlots(kb, sb, staged.drop_front(sa.slots.size()), buffer);
  };
  // Slice `kt`'s reads, clamped to the last (in bounds; read again past the
  // end, unused): the next slice's are issued before this slice's multiplies.
  auto fetchAt = [&](OpBuilder &kb, Value kt) {
    return fetch(kb, arith::MinUIOp::create(kb, loc, kt, idx(kb, kTiles - 1)));
  };
  scf::ForOp loop;
  if (config.stages == 2) {
    // Slice kt in buffer kt % 2; slice kt + 1 stored into the other after
    // the multiplies. One barrier per slice: past it every buffer that is
    // read was written, and the one written next is no longer read.
    store(lb, fetch(lb, idx(lb, 0)), idx(lb, 0));
    gpu::BarrierOp::create(lb, loc);
    loop = scf::ForOp::create(
        lb, loc, idx(lb, 0), idx(lb, kTiles), idx(lb, 1), inits,
        [&](OpBuilder &kb, Location, Value kt, ValueRange carried) {
          SmallVector<Value> next = fetchAt(kb, add(kb, kt, idx(kb, 1)));
          Value buffer = arith::RemUIOp::create(kb, loc, kt, idx(kb, 2));
          SmallVector<Value> acc(carried);
          multiply(kb, acc, buffer);
          store(kb, next, arith::SubIOp::create(kb, loc, idx(kb, 1), buffer));
          gpu::BarrierOp::create(kb, loc);
          scf::YieldOp::create(kb, loc, acc);
        });
  } else {
    llvm::append_range(inits, fetch(lb, idx(lb, 0)));
    loop = scf::ForOp::create(
        lb, loc, idx(lb, 0), idx(lb, kTiles), idx(lb, 1), inits,
        [&](OpBuilder &kb, Location, Value kt, ValueRange carried) {
          store(kb, carried.drop_front(numAcc), idx(kb, 0));
          gpu::BarrierOp::create(kb, loc);
          SmallVector<Value> next = fetchAt(kb, add(kb, kt, idx(kb, 1)));
          SmallVector<Value> acc(carried.take_front(numAcc));
          multiply(kb, acc, idx(kb, 0));
          // The next slice overwrites the tiles: everyone must be done.
          gpu::BarrierOp::create(kb, loc);
          llvm::append_range(acc, next);
          scf::YieldOp::create(kb, loc, acc);
        });
  }

  // The epilogue, one fragment at a time: the subgroup stores it to its
  // scratch fragment, each lane takes 16 * 16 / sg of its results. The
  // scratch fragment is the subgroup's own, so only its lanes synchronize
  // (a workgroup barrier per fragment held every subgroup at the slowest;
  // the GPU dialect has no subgroup barrier: SPIR-V's, subgroup scope).
  auto subgroupBarrier = [&](OpBuilder &b) {
    spirv::ControlBarrierOp::create(
        b, loc, spirv::Scope::Subgroup, spirv::Scope::Subgroup,
        spirv::MemorySemantics::AcquireRelease | spirv::MemorySemantics::WorkgroupMemory);
  };
  Value scratchBase = mul(lb, subgroup, kF * kF);
  bool failedOp = false;
  for (int64_t fm = 0; fm < FM && !failedOp; ++fm)
    for (int64_t fn = 0; fn < FN && !failedOp; ++fn) {
      gpu::SubgroupMmaStoreMatrixOp::create(lb, loc, loop.getResult(fm * FN + fn), scratch,
                                            ValueRange{scratchBase}, lb.getIndexAttr(kF),
                                            UnitAttr());
      subgroupBarrier(lb);
      // Groups of 4 along a row: group q = lane + sg * h of the fragment's
      // 64 is row q / 4, columns 4 (q % 4) on.
      for (int64_t h = 0; epilogueGroups && h < perLane / 4 && !failedOp; ++h) {
        Value q = add(lb, lane, idx(lb, h * sg));
        Value r = arith::DivUIOp::create(lb, loc, q, idx(lb, kF / 4));
        Value c = mul(lb, arith::RemUIOp::create(lb, loc, q, idx(lb, kF / 4)), 4);
        Value i = add(lb, add(lb, rowBase, subRow), add(lb, r, idx(lb, fm * kF)));
        Value j = add(lb, add(lb, colBase, subCol), add(lb, c, idx(lb, fn * kF)));
        Value first = add(lb, scratchBase, add(lb, mul(lb, r, kF), c));
        SmallVector<Value> sums;
        for (int64_t e = 0; e < 4; ++e)
          sums.push_back(memref::LoadOp::create(lb, loc, scratch, ValueRange{add(lb, first, idx(lb, e))}));
        emitGpuGemmResultGroup(lb, loc, kernel, root, entry, gemm, batch, i, j,
                               vector::FromElementsOp::create(lb, loc, VectorType::get({4}, f32), sums),
                               *epilogueGroups, failedOp);
      }
      for (int64_t e = 0; !epilogueGroups && e < kF * kF / sg; ++e) {
        Value flat = add(lb, lane, idx(lb, e * sg));
        Value r = arith::DivUIOp::create(lb, loc, flat, idx(lb, kF));
        Value c = arith::RemUIOp::create(lb, loc, flat, idx(lb, kF));
        Value i = add(lb, add(lb, rowBase, subRow), add(lb, r, idx(lb, fm * kF)));
        Value j = add(lb, add(lb, colBase, subCol), add(lb, c, idx(lb, fn * kF)));
        Value sum = memref::LoadOp::create(lb, loc, scratch, ValueRange{add(lb, scratchBase, flat)});
        emitGpuGemmResult(lb, loc, kernel, root, entry, gemm, batch, i, j, sum, raggedM || raggedN,
                          failedOp);
        if (failedOp)
          break;
      }
      // The next fragment overwrites the scratch.
      subgroupBarrier(lb);
    }
  gpu::TerminatorOp::create(lb, loc);
  if (failedOp) {
    func.erase();
    return failure();
  }
  return func;
}
