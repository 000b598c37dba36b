//===- KernelBuilding.h - shared pieces of the kernel builders --*- C++ -*-===//
//
// Internal to lib/Codegen: the scalar form of each kiln op, index helpers
// and the evaluator that walks a kernel body back from its results, shared
// by the elementwise, reduction, row and tiled builders.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CODEGEN_KERNELBUILDING_H
#define KILN_LIB_CODEGEN_KERNELBUILDING_H

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Codegen/KernelConfig.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace kiln {
using namespace mlir;

/// A float constant of `type`, a scalar or a splat vector.
Value floatConstant(OpBuilder &b, Location loc, Type type, double value);
/// `v` (a float or a vector of floats) as f32: f16 and bf16 extended.
Value widenToF32(OpBuilder &b, Location loc, Value v);
/// Whether index `i` lies in [0, size), and `i` clamped into it: a load at
/// the clamped index is always in bounds, and the first says whether its
/// value counts (padding otherwise).
std::pair<Value, Value> clampedIndex(OpBuilder &b, Location loc, Value i, int64_t size);

/// A per-thread buffer filled once per unit of work (a packed panel, a
/// slab): `heldSlot` makes the index memref that remembers which unit it
/// holds (`none` first, a key no unit has); `whenHeldChanges` returns the
/// builder of a block that runs only when `key` is not the held one, the
/// new key already stored.
Value heldSlot(OpBuilder &b, Location loc, int64_t none);
OpBuilder whenHeldChanges(OpBuilder &b, Location loc, Value slot, Value key);

/// The computation of one kiln op on one element (lanes == 1) or on a
/// vector of `lanes` elements; null when unsupported.
Value emitScalar(OpBuilder &b, Operation *op, ValueRange args, int64_t lanes = 1);

/// The identity of a reduction and its combining step.
Value reductionInit(OpBuilder &b, Location loc, ReduceKind kind, Type type);
Value reductionStep(OpBuilder &b, Location loc, ReduceKind kind, Value acc, Value v);

/// A reduction over [0, count) as nested loops of at most `block` trips
/// each, every level starting from `identity` and folded into the level
/// above with `combine` (a cascade: f32 sums stay accurate past 2^24
/// elements, and no loop exceeds a device's trip limit). `step` folds the
/// element at an index into the accumulators. count >= 1, block >= 2.
SmallVector<Value> buildCascadeLoop(
    OpBuilder &b, Location loc, int64_t count, int64_t block,
    function_ref<SmallVector<Value>(OpBuilder &)> identity,
    function_ref<SmallVector<Value>(OpBuilder &, Value, ValueRange)> step,
    function_ref<SmallVector<Value>(OpBuilder &, ValueRange, ValueRange)> combine);

/// The coordinates of flat index `flat` over `shape`.
SmallVector<AffineExpr> delinearize(AffineExpr flat, ArrayRef<int64_t> shape);

/// The flat index of coordinates `coords` in `shape`.
AffineExpr linearizeExpr(ArrayRef<int64_t> shape, ArrayRef<AffineExpr> coords, MLIRContext *ctx);

/// The flat index in `shape` of the element at (d0, d1): d0 the flat index
/// over the kept dimensions, d1 over the reduced `axes`.
AffineExpr reductionInputIndex(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes,
                               MLIRContext *ctx);

/// `e` with every floordiv and mod that the dimensions' ranges decide
/// removed: dimension i lies in [0, upper[i]). (MLIR's own simplification
/// knows no ranges.)
AffineExpr simplifyWithBounds(AffineExpr e, ArrayRef<int64_t> upper);

/// `e` simplified with dim d in [0, upper[d]); none unless dim `dim` then
/// appears only in sums and products by constants (an index contiguous,
/// strided or constant along a run of that dim: a loop LLVM vectorizes).
std::optional<AffineExpr> simplifyWithinRun(AffineExpr e, unsigned dim,
                                            ArrayRef<int64_t> upper);

/// Whether `e` divides (floordiv, ceildiv or mod) anywhere.
bool dividesIndex(AffineExpr e);

/// `func.func @name(inputs..., outputs...)`, every argument a flat 1-D
/// memref over its tensor's buffer (i1 stored as i8), carrying the element
/// count and the outermost loop's trip count.
func::FuncOp createFlatKernelFunction(KernelOp kernel, OpBuilder &builder, StringRef name,
                                      int64_t iterations, int64_t outer);

/// Stores each kernel result, as `valueOf` computes it, at `index` of its
/// output argument (booleans widened to their i8 storage).
void storeResults(OpBuilder &b, Location loc, KernelOp kernel, Block *entry, Value index,
                  function_ref<Value(Value)> valueOf);

/// Evaluates kernel values at an index (an affine expression of the loop
/// dimensions), walking back through the body: an elementwise op evaluates its
/// operands at their broadcast indices, a view op its operand at the view's
/// source index, a block argument becomes a linalg input read through that
/// index. So views cost no copy, and an input read through two different
/// views is two linalg inputs over the same buffer.
class FlatEvaluator {
public:
  /// Indices are affine expressions of `numDims` loop dimensions.
  FlatEvaluator(KernelOp kernel, unsigned numDims = 1)
      : ctx(kernel.getContext()), numDims(numDims) {}

  /// Phase 1 (no builder): the accesses `v` at `index` needs, in a
  /// deterministic order.
  void collect(Value v, AffineExpr index) { visit(v, index, nullptr); }

  /// `v` is computed elsewhere (a contraction's accumulator): it is read at
  /// the iteration point only, never through its operands.
  void bind(Value v) { bound.insert(v); }
  void setBinding(Value v, Value computed) { values[{v, boundIndex()}] = computed; }
  /// As bind, with the iteration point at `at` (an index of several dims).
  void bindAt(Value v, AffineExpr at) {
    bound.insert(v);
    boundAt = simplifyAffineExpr(at, numDims, 0);
  }
  bool misusedBinding() const { return misused; }

  /// `v` is a per-row value of a row kernel (a reduction's result, or an op
  /// on such results): computed once per row, read as that one value
  /// wherever the broadcast puts it (RowKernel.cpp checks the structure).
  void bindRow(Value v) { rowBound.insert(v); }
  void setRowValue(Value v, Value computed) { rowValues[v] = computed; }

  ArrayRef<std::pair<unsigned, AffineExpr>> getAccesses() const { return accesses; }

  /// Phase 2: the value of `v` at flat index `index`, built with `b`;
  /// `inputs` are the generic's block arguments, one per access.
  /// With `lanes` > 1 the result is a vector of that many elements; `inputs`
  /// are vectors, or scalars for values the same in every lane (a
  /// channel's batch-norm parameters along a vector of pixels). An op on
  /// such values alone is computed once, as a scalar, and broadcast where it
  /// meets a vector. No guarded views then.
  Value emit(OpBuilder &b, Value v, AffineExpr index, ValueRange inputs, bool &failed,
             ValueRange dims = {}, ValueRange buffers = {}, int64_t lanes = 1);

  /// A lane-uniform value that met vectors in an emit: `v` at `index`,
  /// computed as the scalar `computed`.
  struct Uniform {
    Value v;
    AffineExpr index;
    Value computed;
  };
  ArrayRef<Uniform> getUniforms() const { return uniforms; }
  /// The next emit takes `computed` as `v` at `index` (computed elsewhere).
  void seed(Value v, AffineExpr index, Value computed) {
    values[{v, simplifyAffineExpr(index, numDims, 0)}] = computed;
  }

private:
  struct EmitState {
    OpBuilder *b = nullptr;
    ValueRange inputs;
    bool *failed = nullptr;
    ValueRange dims; // the loop indices, for guarded views
    ValueRange buffers; // the kernel function's arguments, for gather
    int64_t lanes = 1;
  };

  /// pad and concat: each operand read at its (maybe out of range) index,
  /// then a select on the result coordinate. The loads are clamped by the
  /// guarded builder, so a discarded read is still in bounds.
  Value visitGuarded(Operation *op, AffineExpr index, OpBuilder *b);
  Value visit(Value v, AffineExpr index, OpBuilder *b);

  MLIRContext *ctx;
  unsigned numDims;
  DenseSet<Value> bound;
  AffineExpr boundAt; // unset: d0
  AffineExpr boundIndex() const { return boundAt ? boundAt : getAffineDimExpr(0, ctx); }
  DenseSet<Value> rowBound;
  DenseMap<Value, Value> rowValues;
  bool misused = false;
  SmallVector<Uniform> uniforms;
  SmallVector<std::pair<unsigned, AffineExpr>> accesses;
  DenseMap<std::pair<Value, AffineExpr>, Value> values;
  EmitState emitState;
};


/// Whether `kernel` is built by the row builder: reductions (not arg or
/// pooling ones) with their elementwise prologue and epilogue.
bool isRowKernel(KernelOp kernel);

/// A kernel whose one arg_reduce is long enough for a workgroup per result
/// on this GPU (ArgRowKernel.cpp), and whose workgroup fits the device.
bool isLongArgReduction(KernelOp kernel, const DeviceLimits &limits);
FailureOr<func::FuncOp> buildArgRowKernelFunction(KernelOp kernel, OpBuilder &builder,
                                                  StringRef name, const DeviceLimits &limits);

/// The row kernel (RowKernel.cpp): for a GPU (`gpu` set) a workgroup per row
/// where `config` (else the default for the device) says so.
FailureOr<func::FuncOp> buildRowKernelFunction(KernelOp kernel, OpBuilder &builder,
                                               StringRef name, const DeviceLimits *gpu,
                                               const RowKernelConfig *config = nullptr);

/// The default row configuration of a row kernel on this GPU.
RowKernelConfig defaultRowKernelConfig(KernelOp kernel, const DeviceLimits &limits);

/// A contraction's GEMM sizes, where the tiled GPU form can build it.
struct GemmShape {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  /// A convolution whose B the coop_gemm form gathers 8 columns at a time
  /// from two 16-byte reads of an input row (stride 1, widths of whole
  /// 8-groups), where its tiles' columns come in 8-groups.
  bool gathersRows = false;
};
std::optional<GemmShape> tiledGemmShape(KernelOp kernel, Operation *root);
/// Whether the tiled grid of `config` fits the device's grid limits.
bool tiledGridFits(const GemmShape &gemm, const MatmulConfig &config, const DeviceLimits &limits);

/// A matmul or conv2d kernel (root `root`) as a shared-memory tiled GEMM
/// for a GPU (TiledContraction.cpp). A null function when the kernel does
/// not fit that form (operands behind more than views, depthwise
/// convolution, grids past the device's limits): build it untiled.
FailureOr<func::FuncOp> buildTiledContractionFunction(KernelOp kernel, Operation *root,
                                                      OpBuilder &builder, StringRef name,
                                                      const DeviceLimits &limits,
                                                      const MatmulConfig *config = nullptr);

/// A matmul of two f16 operands (read through views, batched or not) as
/// the cooperative-matrix form takes it; none for anything else.
std::optional<GemmShape> coopGemmShape(KernelOp kernel, Operation *root, bool bf16 = false);

/// Such a matmul on cooperative matrices (CoopMatrixGemm.cpp): f16
/// fragments multiplied into f32 accumulators on the tensor cores, the
/// epilogue per result as in the tiled form.
FailureOr<func::FuncOp> buildCoopGemmFunction(KernelOp kernel, Operation *root,
                                              OpBuilder &builder, StringRef name,
                                              const DeviceLimits &limits,
                                              const CoopMatrixConfig &config);

/// A matmul or conv2d kernel as a register-blocked GEMM for the host CPU
/// (CpuGemm.cpp); a null function when the kernel does not fit that form.
FailureOr<func::FuncOp> buildCpuGemmFunction(KernelOp kernel, Operation *root,
                                             OpBuilder &builder, StringRef name,
                                             const CpuMatmulConfig &config);

/// A depthwise conv2d kernel (one input channel per group, operands plain
/// kernel inputs) for the host CPU (CpuDepthwise.cpp): vectorized along the
/// output row, the taps' weights in registers. A null function when the
/// kernel does not fit that form.
FailureOr<func::FuncOp> buildCpuDepthwiseFunction(KernelOp kernel, Operation *root,
                                                  OpBuilder &builder, StringRef name);

/// A depthwise conv2d kernel (as for the CPU form) for a GPU
/// (GpuDepthwise.cpp): each work item a few adjacent outputs of one row,
/// sharing the input columns their windows read. A null function when the
/// kernel does not fit that form.
FailureOr<func::FuncOp> buildGpuDepthwiseFunction(KernelOp kernel, Operation *root,
                                                  OpBuilder &builder, StringRef name);

/// A kernel ending in a concat, for the host CPU (CpuConcat.cpp): each
/// input's values computed over its own rows into their place. A null
/// function when the kernel does not fit that form.
FailureOr<func::FuncOp> buildCpuConcatFunction(KernelOp kernel, OpBuilder &builder,
                                               StringRef name);

/// A max or average pooling kernel for the host CPU (CpuPool.cpp), its
/// prologue evaluated on vectors along the output row. A null function
/// when the kernel does not fit that form.
FailureOr<func::FuncOp> buildCpuPoolFunction(KernelOp kernel, Operation *root,
                                             OpBuilder &builder, StringRef name);

} // namespace kiln

#endif // KILN_LIB_CODEGEN_KERNELBUILDING_H
