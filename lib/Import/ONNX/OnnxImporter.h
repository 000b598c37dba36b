//===- OnnxImporter.h - state shared by the ONNX reader and ops -*- C++ -*-===//
//
// Internal to lib/Import/ONNX. A value of the ONNX graph is either a
// recorded tensor or, for shape arithmetic (Shape, integer initializers and
// constants), integers known at import time, folded as they are computed.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_IMPORT_ONNX_ONNXIMPORTER_H
#define KILN_LIB_IMPORT_ONNX_ONNXIMPORTER_H

#include "kiln/Errors.h"
#include "kiln/Tensor.h"
#include "lib/Frontend/OpRecording.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::onnx_import {

/// The converters read each operator from the version that opset 11 means
/// on (`kOldestOpset`): a model of an older opset imports where every node's
/// version is that one (And-7, Elu-6 and Not-1 are unchanged since), and a
/// node of an older version is refused. `kNewestOpset` is ONNX 1.23's newest.
constexpr int64_t kOldestOpset = 11, kNewestOpset = 28;

/// The version of operator `op` that opset `opset` means (the newest whose
/// since_version is at most `opset`), or 0 where `op` is no operator of
/// that opset (OnnxVersions.cpp: ONNX 1.23's table).
int64_t operatorVersion(const std::string &op, int64_t opset);
/// The version of `node`'s operator: operatorVersion in the default
/// domain, 1 for the preview domains' operators Kiln converts
/// (ai.onnx.preview.training's optimizers, ai.onnx.preview's
/// FlexAttention), 0 for any other domain's.
int64_t nodeVersion(const onnx::NodeProto &node, int64_t opset);

struct Value {
  std::optional<Tensor> tensor;
  /// Integers known at import time, row-major, of shape `shape`.
  std::optional<std::vector<int64_t>> ints;
  Shape shape;
  /// `tensor` holds data known at import (an initializer or a Constant),
  /// which an attribute-like input (Pad's value) may read.
  bool constant = false;
  /// For an integer tensor computed at run time: the values it can hold,
  /// low <= v <= high, where the importer can prove them (a cast of a
  /// boolean, an arg-reduction's index, arithmetic on such values).
  std::optional<std::pair<int64_t, int64_t>> bounds;
  /// The ONNX data type of `ints` read from the file (uint8, int16, ...),
  /// which the bit operators wrap to, or of a tensor that holds a type
  /// Kiln has no dtype for (float8e4m3fn held in f32, int4 held in i32);
  /// 0 where it is the dtype's own or unknown.
  int elemType = 0;
  /// `tensor` is computed from constants alone (no graph input, nothing
  /// random), so its values are known at import once realized: a Loop's
  /// trip count computed in float (Range's function body) reads it so.
  bool fromConstants = false;

  static Value of(Tensor t) {
    Value v;
    v.shape = t.shape();
    v.tensor = std::move(t);
    return v;
  }
  static Value ofConstant(Tensor t) {
    Value v = of(std::move(t));
    v.constant = true;
    return v;
  }
  static Value ofBounded(Tensor t, int64_t low, int64_t high) {
    Value v = of(std::move(t));
    v.bounds = {low, high};
    return v;
  }
  static Value ofInts(std::vector<int64_t> ints, Shape shape) {
    Value v;
    v.ints = std::move(ints);
    v.shape = std::move(shape);
    return v;
  }
};

/// The values of a graph by name: its own, then its enclosing graphs' (the
/// body of an If, Loop or Scan reads the outer graph's values by name).
class Scope {
public:
  explicit Scope(const Scope *parent = nullptr) : parent(parent) {}
  const Value *find(const std::string &name) const {
    auto it = own.find(name);
    return it != own.end() ? &it->second : parent ? parent->find(name) : nullptr;
  }
  Value &operator[](const std::string &name) { return own[name]; }
  bool holds(const std::string &name) const { return own.count(name) != 0; }

private:
  std::map<std::string, Value> own;
  const Scope *parent;
};

/// Where the nodes being converted are: the model's opset and folder, and
/// the values in scope.
struct GraphPlace {
  int64_t opset = 0;
  std::string modelDir;
  const Scope *scope = nullptr;
};

/// One node being converted: its inputs, attributes and errors that name it.
class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, int index, int64_t opset,
              std::vector<const Value *> inputs, GraphPlace place = {})
      : node(node), index(index), opset(opset),
        version(nodeVersion(node, opset)), place(std::move(place)),
        inputs(std::move(inputs)) {}

  const onnx::NodeProto &node;
  int index;
  int64_t opset;
  /// The version of the node's operator that `opset` means (Softmax-13,
  /// ReduceMean-18): what a converter reads its inputs and attributes by.
  int64_t version;

  size_t numInputs() const { return inputs.size(); }
  /// Input i is present (an empty name marks an omitted optional input).
  bool has(size_t i) const { return i < inputs.size() && inputs[i]; }
  const Value &input(size_t i) const;
  /// Input i as a tensor: integers known at import become an f32 tensor.
  Tensor tensor(size_t i) const;
  /// Input i as a tensor for an op with `like`: a float constant of another
  /// float type takes `like`'s. PyTorch 2.11's exporter folds a bf16
  /// model's batch norms into f32 weights beside bf16 activations; the
  /// model computes in bf16, so the folded weights do too.
  Tensor tensorAs(size_t i, const Tensor &like) const;
  /// Input i as integers known at import (shapes, axes, pads): an error
  /// when it is computed by the model at run time.
  const std::vector<int64_t> &ints(size_t i) const;
  /// Input i as floats known at import (an initializer, a Constant or
  /// import-time integers): an error when the model computes it.
  std::vector<float> constantFloats(size_t i) const;

  const onnx::AttributeProto *attribute(const std::string &name) const;
  int64_t attrInt(const std::string &name, int64_t otherwise) const;
  float attrFloat(const std::string &name, float otherwise) const;
  std::string attrString(const std::string &name, const std::string &otherwise) const;
  std::optional<std::vector<int64_t>> attrInts(const std::string &name) const;

  /// Converts graph attribute `graph` (an If branch, a Loop or Scan body)
  /// with its inputs bound to `inputs` in order, in a scope inside this
  /// node's: its outputs, in order.
  std::vector<Value> runSubgraph(const onnx::GraphProto &graph,
                                 const std::vector<Value> &inputs) const;

  /// "node 'conv1' (Conv, node 3)".
  std::string where() const;
  /// Throws Error "<where>: <what>; <advice>".
  [[noreturn]] void fail(const std::string &what, const std::string &advice = "") const;

private:
  GraphPlace place;
  std::vector<const Value *> inputs;
};

/// Converts one node: its outputs, in order.
using Converter = std::function<std::vector<Value>(const NodeContext &)>;
using ConverterTable = std::map<std::string, Converter>;

/// A converter's one result.
inline std::vector<Value> single(Tensor t) { return {Value::of(std::move(t))}; }

/// The converters of each file, added to the table: activations, logic and
/// variadic sums (OnnxElementwise.cpp); reductions, arg-reductions, CumSum,
/// CumProd and Hardmax (OnnxReductions.cpp); Range, EyeLike, Trilu, Tile,
/// Size, CenterCropPad and ReverseSequence (OnnxConstruct.cpp).
void addElementwiseConverters(ConverterTable &table);
void addReductionConverters(ConverterTable &table);
void addConstructConverters(ConverterTable &table);
/// GatherElements, GatherND, ScatterElements, ScatterND, Compress and
/// OneHot by indices known at import (OnnxIndexing.cpp); the two losses by
/// labels known at import (OnnxLosses.cpp).
void addIndexingConverters(ConverterTable &table);
void addLossConverters(ConverterTable &table);
/// SpaceToDepth, DepthToSpace, InstanceNormalization, GroupNormalization,
/// LpNormalization, MeanVarianceNormalization, LRN and ConvTranspose
/// (OnnxImageOps.cpp).
void addImageConverters(ConverterTable &table);
/// Einsum of one or two operands (OnnxEinsum.cpp).
void addEinsumConverter(ConverterTable &table);
/// Attention-23 and RotaryEmbedding-23 (OnnxAttention.cpp).
void addAttentionConverters(ConverterTable &table);
/// GridSample and AffineGrid (OnnxSampling.cpp); DFT and STFT
/// (OnnxSignal.cpp); Det (OnnxLinalg.cpp).
void addSamplingConverters(ConverterTable &table);
void addSignalConverters(ConverterTable &table);
void addLinalgConverters(ConverterTable &table);
/// Adagrad, Adam and Momentum of ai.onnx.preview.training
/// (OnnxOptimizers.cpp).
void addOptimizerConverters(ConverterTable &table);
/// LinearAttention, CausalConvWithState, TensorScatter and SwiGLU
/// (OnnxStateOps.cpp).
void addStateConverters(ConverterTable &table);
/// RNN, GRU and LSTM unrolled over the sequence (OnnxRecurrent.cpp).
void addRecurrentConverters(ConverterTable &table);
/// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
/// ConvInteger, QLinearMatMul and QLinearConv (OnnxQuantize.cpp).
void addQuantizeConverters(ConverterTable &table);
/// Conv's 1-D, 2-D or 3-D convolution of `x` by `w` (strides, pads,
/// auto_pad, dilations and group from the node), without the bias.
Tensor convolution(const NodeContext &ctx, Tensor x, const Tensor &w);
/// The 3-D case: a sum of 2-D convolutions over the filter's depth taps
/// (OnnxConvTaps.cpp).
Tensor convolution3d(const NodeContext &ctx, const Tensor &x, const Tensor &w);
/// ConvTranspose of 1-D, 2-D and 3-D images (OnnxConvTaps.cpp).
void addConvTransposeConverter(ConverterTable &table);
/// MaxPool or AveragePool of `x` ([N, C, spatial...]) from the node's
/// attributes, as the maximum or sum of the window's strided taps
/// (OnnxPoolTaps.cpp): any rank, dilations, ceil_mode and auto_pad. An
/// average divides by the window's size where `divideByKernel`, else by
/// the taps that count (count_include_pad).
Tensor poolByTaps(const NodeContext &ctx, bool isMax, const Tensor &x, bool divideByKernel);
/// MatMul's product: numpy's matmul, 1-D operands included.
Tensor matrixProduct(Tensor a, Tensor b);
/// If, Loop and Scan, unrolled at import (OnnxControlFlow.cpp).
void addControlFlowConverters(ConverterTable &table);
/// Resize (nearest, linear and cubic) and Not (OnnxResize.cpp).
std::vector<Value> resize(const NodeContext &ctx);
std::vector<Value> logicalNot(const NodeContext &ctx);
/// The supported operators of the default domain.
const ConverterTable &converters();

/// An initializer or Constant tensor: f32 data as a tensor, integers as
/// integers. `what` names it in errors. Data stored outside the model
/// (external data) is read from a file inside `modelDir`; with no folder
/// (a model given as bytes) it is an error.
Value valueOfTensorProto(const onnx::TensorProto &proto, const std::string &what,
                         const std::string &modelDir = "");

/// `fn` of the inputs' integers known at import, elementwise with numpy
/// broadcasting (shape arithmetic, masks, bit operations); nullopt where an
/// input is computed or the shapes do not broadcast.
std::optional<Value> foldInts(const std::vector<const Value *> &inputs,
                              const std::function<int64_t(const int64_t *)> &fn);

/// The dtype Kiln computes ONNX data type `type` in, if any: float, float16
/// and bfloat16 as themselves, int64 and the narrower integers (int4 and
/// int2 included) as i32 (Kiln's integers), bool as bool, and the float8
/// and float4 formats as f32 holding exactly the format's values.
std::optional<DType> computedDType(int64_t type);

/// ONNX 1.23's data types past the ONNX 1.12 protobuf that Kiln builds on.
namespace onnx_type {
constexpr int kFloat8E4M3FN = 17, kFloat8E4M3FNUZ = 18, kFloat8E5M2 = 19, kFloat8E5M2FNUZ = 20,
              kUint4 = 21, kInt4 = 22, kFloat4E2M1 = 23, kFloat8E8M0 = 24, kUint2 = 25,
              kInt2 = 26;
} // namespace onnx_type

/// Data types (OnnxDataTypes.cpp). The bits of integer type `type` (0 for
/// a type that is no integer), whether it is unsigned, and the values it
/// holds (nullopt for 64-bit and non-integer types).
int integerBits(int type);
bool isUnsignedInteger(int type);
std::optional<std::pair<int64_t, int64_t>> integerRange(int type);
/// `v` wrapped to integer type `type` (~5 of a uint8 is 250); unchanged
/// for 64-bit and non-integer types.
int64_t wrapInteger(int64_t v, int type);
/// A float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) or float4 (E2M1) type,
/// which Kiln holds in f32 and rounds to.
bool isNarrowFloat(int type);
/// The value of one element's `bits` of a float8 or float4 type (E8M0
/// included).
double narrowFloatValue(uint32_t bits, int type);
/// `x` rounded to float8/float4 type `type` as ONNX's Cast does: half to
/// even, overflow to the largest value (saturate) or to inf or NaN.
Tensor roundToNarrowFloat(const NodeContext &ctx, const Tensor &x, int type, bool saturate);
/// `x` converted to integer type `type` as Cast does: toward zero, then
/// wrapped to the type's width.
Tensor castToInteger(const Tensor &x, int type);
/// "float8e4m3fn", "INT64": for errors.
std::string dataTypeName(int type);
/// Cast of `x` to ONNX type `to` (Cast and CastLike).
std::vector<Value> castValue(const NodeContext &ctx, const Value &x, int to, bool saturate);

/// The elements of `shape`, whose dimensions come from the file: an Error
/// naming `what` for a negative dimension or more than 2^40 elements (an
/// overflowing product included).
int64_t checkedElements(const Shape &shape, const std::string &what);

/// A scalar constant in `like`'s float type, as ONNX's attribute constants
/// (alpha, epsilon) are: an f16 model's HardSigmoid stays f16. The Tensor
/// API's own literal (a splat, not a weight).
inline Tensor scalarLike(const Tensor &like, float value) {
  return detail::scalarLike(value, like, std::source_location::current());
}

/// `t` in f32 (unchanged where it is).
inline Tensor asF32(const Tensor &t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); }

/// `axis` of a rank-`rank` value, negative counting from the end.
int64_t normalizeAxis(const NodeContext &ctx, int64_t axis, int64_t rank);

} // namespace kiln::onnx_import

#endif // KILN_LIB_IMPORT_ONNX_ONNXIMPORTER_H
