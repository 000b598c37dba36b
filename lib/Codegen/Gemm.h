//===- Gemm.h - matmul and convolution as one GEMM form ---------*- C++ -*-===//
//
// Internal to lib/Codegen: a contraction kernel seen as
// C[b, i, j] = sum_k A[b, i, k] B[b, k, j], for the tiled GPU builder and the
// register-blocked CPU builder.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CODEGEN_GEMM_H
#define KILN_LIB_CODEGEN_GEMM_H

#include "KernelBuilding.h"

#include <functional>
#include <memory>
#include <optional>

namespace kiln {

/// Reads one element of A or B at in-range (b, row, col); builders clamp
/// the indices and zero what lies past the edges.
using OperandReader = std::function<Value(OpBuilder &, Location, Value, Value, Value)>;

/// Where a convolution's input channels [firstChannel, firstChannel +
/// channels) live: one kernel argument of [images, channels, H, W]. A
/// concat along the channels, folded into the convolution, gives one
/// source per concatenated input; a plain input is one source of all.
struct ConvSource {
  unsigned arg = 0;
  int64_t firstChannel = 0, channels = 1;
};

/// A convolution's B operand, which the builders gather themselves (the
/// CPU packs a panel with per-column tables, the GPU decomposes each column
/// once per work item, instead of decomposing every element's index).
/// Input x is [images, channels, height, width]; group b reads its
/// `groupChannels` channels from b * groupChannels.
struct ConvGeometry {
  unsigned inputArg = 0; ///< the input, when it is one argument
  int64_t images = 1, channels = 1, height = 1, width = 1;
  int64_t outHeight = 1, outWidth = 1, groupChannels = 1;
  int64_t kernelH = 1, kernelW = 1, strideH = 1, strideW = 1;
  int64_t padH = 0, padW = 0, dilationH = 1, dilationW = 1;
  int64_t groups = 1; ///< the GEMM's batch index b is image * groups + group
  /// The input's channels by argument; several only when groups is 1. The
  /// builders of the GEMM form read these (depthwise ones read inputArg).
  SmallVector<ConvSource, 2> sources;
};

struct Gemm {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  OperandReader readA, readB;
  /// The flat index of C[b, i, j] in the kernel's result, of (b, i, j).
  AffineExpr resultIndex;
  /// The readers read the arguments of this block: set it to the kernel
  /// function's entry block once it exists.
  std::shared_ptr<Block *> entry;
  /// When B is a plain f32 kernel input (no view, no other use) with N a
  /// multiple of 4: its argument number and the index of the 4-vector
  /// holding B[b, k, 4 j4 .. 4 j4 + 3], of (b, k, j4). A GPU builder may
  /// then declare that argument as a buffer of 4-vectors (16-byte loads).
  std::optional<unsigned> bVectorArg;
  AffineExpr bVectorIndex;
  /// Likewise for A along k (K a multiple of 4), of (b, i, k4).
  std::optional<unsigned> aVectorArg;
  AffineExpr aVectorIndex;
  /// Set for conv2d whose B is gathered (not for a pointwise one, whose B
  /// is plain and read through readB): the builders gather from it, readB
  /// is unset. A convolution's GEMMs are one per (image, group), columns
  /// (ho, wo) of one image.
  std::optional<ConvGeometry> conv;
  /// A matmul's operands as (kernel argument, element index of (b, row,
  /// col)): readA and readB read these.
  std::optional<std::pair<unsigned, AffineExpr>> aAccess, bAccess;
  /// B is a row-major matrix in memory, read without checks: a matmul's,
  /// or a 1x1 convolution's (stride 1, no padding) input.
  bool plainB = false;
};

/// The element index `index` of (b, row, col) gives at constants; none when
/// it does not fold to one.
std::optional<int64_t> elementAt(AffineExpr index, int64_t b, int64_t row, int64_t col);

/// Whether element (b, row, col + 1) follows (b, row, col) in memory.
bool contiguousAlongColumns(AffineExpr index);

/// An operand read through views only, as (kernel argument, element index
/// of (b, row, col)) for a result whose batch dimensions are `resultBatch`:
/// the operand aligns at the right against [batch..., rows, cols] and a
/// size of 1 broadcasts. None when more than views stand in front, or the
/// element is not a float (nor i1, with `allowBool`).
std::optional<std::pair<unsigned, AffineExpr>>
operandAccess(KernelOp kernel, Value operand, ArrayRef<int64_t> resultBatch,
              bool allowBool = false);

/// Whether `config` (packedB) can read `root`'s B as stored packed: B is a
/// packedMatrixOf the kernel, N a whole number of panels, and the form the
/// GEMM's (not the matrix-vector one).
bool fitsPackedB(KernelOp kernel, Operation *root, const CpuMatmulConfig &config);

/// The depth of the k slices the CPU GEMM form runs a matmul in (k itself
/// when it runs unsliced): matmuls with k past 1024 run slices of 512, so a
/// block's rows of A and a slice of the panel stay in L1 and L2 while every
/// block of rows passes over them.
int64_t cpuGemmSliceDepth(const Gemm &gemm);

/// Whether `root` is a convolution the direct form takes with `config`: one
/// group, f32, a window larger than 1x1, output channels in whole blocks of
/// config.blockChannels(), rows of at least config.pixels pixels, plain
/// kernel inputs.
bool fitsCpuDirectConv(Operation *root, const CpuDirectConvConfig &config);

/// The direct form's configuration for `root` on this host, when it takes
/// it (a dense convolution over rows of 8 pixels or more); none otherwise.
std::optional<CpuDirectConvConfig> defaultCpuDirectConv(Operation *root);

/// Such a convolution for the host CPU (CpuDirectConv.cpp): vectors along
/// the output channels, no im2col.
FailureOr<func::FuncOp> buildCpuDirectConvFunction(KernelOp kernel, Operation *root,
                                                   OpBuilder &builder, StringRef name,
                                                   const CpuDirectConvConfig &config);

/// A kernel holding a kiln.attention, for the host CPU (CpuAttention.cpp):
/// work units of up to 64 query rows, an online softmax over blocks of 64
/// keys.
FailureOr<func::FuncOp> buildCpuAttentionFunction(KernelOp kernel, AttentionOp attention,
                                                  OpBuilder &builder, StringRef name);

/// A [N, C, H, W] value by channels: for a concat along the channels
/// (axis 1), each of its non-empty inputs with the first channel it holds;
/// otherwise the value itself, all of its channels.
struct ChannelPart {
  Value value;
  int64_t firstChannel = 0, channels = 1;
};
SmallVector<ChannelPart, 2> channelParts(Value input);

/// A convolution input's sources: its channel parts, when each is a kernel
/// input; none otherwise.
std::optional<SmallVector<ConvSource, 2>> convSources(Value input);

/// `root` (a matmul, or a conv2d with at least `minRowsPerGroup` output
/// channels per group) of `kernel` as a GEMM; none when its operands are
/// behind more than views.
std::optional<Gemm> describeGemm(KernelOp kernel, Operation *root, int64_t minRowsPerGroup);

/// A depthwise conv2d (one input channel per group, `perGroup` filters
/// each) whose input and filter are plain kernel inputs, with at most 49
/// taps and a non-empty result: what the depthwise builders of either
/// device need. None for any other root.
struct Depthwise {
  Conv2dOp conv;
  ConvGeometry g; ///< groupChannels is 1; `groups` the input channels
  unsigned filterArg = 0;
  int64_t outChannels = 1, perGroup = 1;
  Type element; ///< the input's element type
};
std::optional<Depthwise> describeDepthwise(Operation *root);

/// A one-row matmul against a transposed, row-major f32 weight (a linear
/// layer at batch 1) as a matrix-vector product over W's rows, `lanes` wide
/// (CpuGemv.cpp); a null function when `gemm` is not one.
FailureOr<func::FuncOp> buildCpuGemvFunction(KernelOp kernel, Operation *root, const Gemm &gemm,
                                             OpBuilder &builder, StringRef name, int64_t lanes);

/// Binds the contraction to `sum` (f32) at flat result index `at`, evaluates
/// the kernel's epilogue there and stores every kernel result.
void emitGemmEpilogue(OpBuilder &b, Location loc, KernelOp kernel, Operation *root, Block *entry,
                      Value sum, Value at, bool &failed);

/// emitGemmEpilogue for C[batch, i, j] of a GPU tile: when a tile may
/// overhang the result (`guarded`), only inside it.
void emitGpuGemmResult(OpBuilder &b, Location loc, KernelOp kernel, Operation *root, Block *entry,
                       const Gemm &gemm, Value batch, Value i, Value j, Value sum, bool guarded,
                       bool &failed);

/// As emitGemmEpilogue, at the result element `resultIndex` gives for
/// `coords` (each in [0, bounds[i])): the epilogue's reads are indexed by
/// the coordinates with the divisions the bounds decide removed, so a bias
/// or residual read costs no division per element (the CPU builders).
void emitGemmEpilogueAt(OpBuilder &b, Location loc, KernelOp kernel, Operation *root,
                        Block *entry, Value sum, ValueRange coords, ArrayRef<int64_t> bounds,
                        AffineExpr resultIndex, bool &failed);

/// The epilogue's arguments a GPU reads 4 consecutive results (along j) at
/// a time: each read either contiguous along j from a multiple of 4 or the
/// same for the 4; such arguments and every result f16 or f32 and read by
/// nothing the GEMM's operands read (their buffers then become vectors of
/// 4). None when some read or result does not allow it (or N % 4 != 0).
std::optional<DenseSet<unsigned>> gpuEpilogueGroups(KernelOp kernel, Operation *root,
                                                    const Gemm &gemm);
/// The epilogue of results (batch, i, j .. j + 3), all in bounds, j a
/// multiple of 4, from `sums` (vector<4xf32>): the `grouped` arguments and
/// the results are buffers of 4-vectors.
void emitGpuGemmResultGroup(OpBuilder &b, Location loc, KernelOp kernel, Operation *root,
                            Block *entry, const Gemm &gemm, Value batch, Value i, Value j,
                            Value sums, const DenseSet<unsigned> &grouped, bool &failed);

/// Whether emitGemmEpilogueVector can evaluate this kernel's epilogue on
/// vectors along the last coordinate: f32 throughout, every read either
/// contiguous or constant along it, no guarded view.
bool vectorizableGemmEpilogue(KernelOp kernel, Operation *root, ArrayRef<int64_t> bounds,
                              AffineExpr resultIndex);
/// A vector epilogue's values that are the same along the last coordinate
/// (a batch norm's per-channel scale and shift along a row of pixels),
/// computed once per row into `buffer`: row r's k-th at r * stride + k.
struct GemmRowValues {
  Value buffer;
  int64_t stride = 0;
  SmallVector<std::pair<Value, AffineExpr>> keys; // the FlatEvaluator's
};
/// Computes them for the rows at `rowCoords` (each the coordinates of a
/// point of that row, in bounds) into `buffer`, which holds `stride` per
/// row; none (and nothing stored) when the epilogue has none, more than
/// `stride`, or any that is not f32.
std::optional<GemmRowValues> precomputeGemmRowValues(OpBuilder &b, Location loc, KernelOp kernel,
                                                     Operation *root, Block *entry,
                                                     ArrayRef<SmallVector<Value>> rowCoords,
                                                     ArrayRef<int64_t> bounds,
                                                     AffineExpr resultIndex, int64_t lanes,
                                                     Value buffer, int64_t stride, bool &failed);
/// As emitGemmEpilogueAt for the vector `sums` of consecutive results along
/// the last coordinate, from `coords` on (all of them in bounds); with
/// `rowValues`, the per-row values of row `row` are read from them. With
/// `validLanes`, only that many first lanes are results: the epilogue's
/// reads and the store are masked (a vector of 8 for 7 pixels: x86 has no
/// 7-lane load or store, LLVM splits those into three).
void emitGemmEpilogueVector(OpBuilder &b, Location loc, KernelOp kernel, Operation *root,
                            Block *entry, Value sums, ValueRange coords,
                            ArrayRef<int64_t> bounds, AffineExpr resultIndex, bool &failed,
                            const GemmRowValues *rowValues = nullptr, Value row = {},
                            int64_t validLanes = 0);

/// f32 values per cache line.
constexpr int64_t kCacheLineFloats = 16;

/// Weights that stream from memory fetched into L2 ahead of use: step
/// `step` of pass `pass` (each pass over the current data takes
/// `stepsPerPass` steps) fetches `lines` cache lines of `buffer` (f32) from
/// start + (pass * stepsPerPass + step) * lines * 16 on, each index clamped
/// to `last`, so the passes together cover the data read next.
void prefetchShare(OpBuilder &b, Location loc, Value buffer, Value start, Value last, Value pass,
                   Value stepsPerPass, Value step, int64_t lines);

Value constantIndex(OpBuilder &b, Location loc, int64_t v);
/// Whether input row `h` and column `w` of a convolution lie in its input
/// plane: unsigned compares, so a row or column left of 0 wraps past the size.
Value insidePlane(OpBuilder &b, Location loc, Value h, Value w, const ConvGeometry &cg);
/// affine.apply of `e` (simplified) to `dims`.
Value applyExpr(OpBuilder &b, Location loc, AffineExpr e, ValueRange dims);

} // namespace kiln

#endif // KILN_LIB_CODEGEN_GEMM_H
