//===- GpuDepthwise.cpp - depthwise convolution on a GPU ------------------===//
//
// A depthwise conv2d (one input channel per group) has a single filter per
// output plane: as a GEMM its rows are one filter each, too narrow for the
// tiled form. Untiled, every work item computed one output, decomposing its
// flat index and each tap's input position on its own. Here each work item
// takes `kBlock` adjacent outputs of one output row (register blocking
// along the width): its (plane, row, first column) is decomposed once,
// each window row's input columns are loaded once and shared by the
// outputs whose windows overlap (a 3-wide window reads 6 columns for 4
// outputs, not 12), and every sum runs through the kernel's epilogue
// before its one store. Stride 1 along the row only (see below). Rows
// and columns outside the image read zero. Neighbouring work items take
// neighbouring column blocks of a row, so their reads share cache lines.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <map>

using namespace mlir;
using namespace kiln;

namespace {
/// Outputs per work item along the row.
constexpr int64_t kBlock = 4;
} // namespace

FailureOr<func::FuncOp> kiln::buildGpuDepthwiseFunction(KernelOp kernel, Operation *root,
                                                        OpBuilder &builder, StringRef name) {
  std::optional<Depthwise> d = describeDepthwise(root);
  // Stride 1 along the row only: there 4 outputs of a 3-wide window share
  // 6 of their 12 reads. At stride 2 they share 3, the blocks are a quarter
  // as many work items, and on the H200 every MobileNetV2 stride-2 layer ran
  // as fast or faster untiled (0.0055 against 0.0067 ms, 192 x 28x28).
  if (!d || !(d->element.isF32() || d->element.isF16()) || d->g.strideW != 1)
    return func::FuncOp();
  const ConvGeometry &g = d->g;
  const int64_t images = g.images, channels = g.channels, H = g.height, W = g.width;
  const int64_t outChannels = d->outChannels, OH = g.outHeight, OW = g.outWidth;
  const int64_t KH = g.kernelH, KW = g.kernelW, perGroup = d->perGroup;
  const int64_t sh = g.strideH, sw = g.strideW, ph = g.padH, pw = g.padW;
  const int64_t dh = g.dilationH, dw = g.dilationW;
  const int64_t block = std::min(kBlock, OW), blocks = (OW + block - 1) / block;
  const int64_t planes = images * outChannels, units = planes * OH * blocks;

  Location loc = kernel.getLoc();
  Type f32 = Float32Type::get(builder.getContext());
  func::FuncOp func =
      createFlatKernelFunction(kernel, builder, name, planes * OH * OW * KH * KW, units);
  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockBegin(entry);
  auto idx = [&](OpBuilder &ib, int64_t v) { return constantIndex(ib, loc, v); };
  auto widen = [&](OpBuilder &wb, Value v) { return widenToF32(wb, loc, v); };
  Value in = entry->getArgument(g.inputArg);
  Value weights = entry->getArgument(d->filterArg);
  bool failed = false;
  scf::ParallelOp::create(
      b, loc, ValueRange{idx(b, 0)}, ValueRange{idx(b, units)}, ValueRange{idx(b, 1)},
      [&](OpBuilder &pb, Location, ValueRange ivs) {
        Value unit = ivs[0];
        Value column0 = arith::MulIOp::create(
            pb, loc, arith::RemUIOp::create(pb, loc, unit, idx(pb, blocks)), idx(pb, block));
        Value rowUnit = arith::DivUIOp::create(pb, loc, unit, idx(pb, blocks));
        Value oh = arith::RemUIOp::create(pb, loc, rowUnit, idx(pb, OH));
        Value plane = arith::DivUIOp::create(pb, loc, rowUnit, idx(pb, OH));
        Value image = arith::DivUIOp::create(pb, loc, plane, idx(pb, outChannels));
        Value outChannel = arith::RemUIOp::create(pb, loc, plane, idx(pb, outChannels));
        Value channel = arith::DivUIOp::create(pb, loc, outChannel, idx(pb, perGroup));
        Value inBase = arith::MulIOp::create(
            pb, loc,
            arith::AddIOp::create(pb, loc, arith::MulIOp::create(pb, loc, image, idx(pb, channels)),
                                  channel),
            idx(pb, H * W));
        Value filterBase = arith::MulIOp::create(pb, loc, outChannel, idx(pb, KH * KW));
        // The window's left column for the block's first output.
        Value left = arith::SubIOp::create(pb, loc, arith::MulIOp::create(pb, loc, column0, idx(pb, sw)),
                                           idx(pb, pw));
        Value top = arith::SubIOp::create(pb, loc, arith::MulIOp::create(pb, loc, oh, idx(pb, sh)),
                                          idx(pb, ph));
        Value zero = floatConstant(pb, loc, f32, 0.0);
        SmallVector<Value> sums(block, zero);
        for (int64_t kh = 0; kh < KH; ++kh) {
          // Unsigned compares: a row or column before 0 wraps past the size.
          Value ih = arith::AddIOp::create(pb, loc, top, idx(pb, kh * dh));
          Value rowInside = arith::CmpIOp::create(pb, loc, arith::CmpIPredicate::ult, ih, idx(pb, H));
          Value rowAt = arith::AddIOp::create(
              pb, loc, inBase,
              arith::MulIOp::create(pb, loc, arith::SelectOp::create(pb, loc, rowInside, ih, idx(pb, 0)),
                                    idx(pb, W)));
          // Each input column the block's windows read in this row, once.
          std::map<int64_t, Value> columns;
          auto columnAt = [&](int64_t offset) {
            auto [it, fresh] = columns.try_emplace(offset);
            if (!fresh)
              return it->second;
            Value iw = arith::AddIOp::create(pb, loc, left, idx(pb, offset));
            Value inside = arith::AndIOp::create(
                pb, loc, rowInside,
                arith::CmpIOp::create(pb, loc, arith::CmpIPredicate::ult, iw, idx(pb, W)));
            Value at = arith::SelectOp::create(pb, loc, inside,
                                               arith::AddIOp::create(pb, loc, rowAt, iw), idx(pb, 0));
            Value v = widen(pb, memref::LoadOp::create(pb, loc, in, ValueRange{at}));
            it->second = arith::SelectOp::create(pb, loc, inside, v, zero);
            return it->second;
          };
          for (int64_t kw = 0; kw < KW; ++kw) {
            Value tap = widen(pb, memref::LoadOp::create(
                                      pb, loc, weights,
                                      ValueRange{arith::AddIOp::create(pb, loc, filterBase,
                                                                       idx(pb, kh * KW + kw))}));
            for (int64_t r = 0; r < block; ++r)
              sums[r] = math::FmaOp::create(pb, loc, tap, columnAt(r * sw + kw * dw), sums[r]);
          }
        }
        // The epilogue per output; a last block past the row's end stores
        // only the outputs inside it.
        Value outRow = arith::MulIOp::create(
            pb, loc, arith::AddIOp::create(pb, loc, arith::MulIOp::create(pb, loc, plane, idx(pb, OH)), oh),
            idx(pb, OW));
        for (int64_t r = 0; r < block && !failed; ++r) {
          Value ow = arith::AddIOp::create(pb, loc, column0, idx(pb, r));
          OpBuilder sb = pb;
          if (OW % block) {
            auto guard = scf::IfOp::create(
                pb, loc, arith::CmpIOp::create(pb, loc, arith::CmpIPredicate::ult, ow, idx(pb, OW)),
                /*withElseRegion=*/false);
            sb = OpBuilder::atBlockBegin(&guard.getThenRegion().front());
          }
          emitGemmEpilogue(sb, loc, kernel, root, entry, sums[r],
                           arith::AddIOp::create(sb, loc, outRow, ow), failed);
        }
      });
  func::ReturnOp::create(b, loc);
  if (failed) {
    func.erase();
    return failure();
  }
  return func;
}
