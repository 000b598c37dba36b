//===- OnnxVersions.cpp - which version of an operator an opset means -----===//
//
// ONNX versions each operator on its own: a model's opset N means, for each
// operator, the newest version whose `since_version` is at most N. The
// table below is ONNX 1.23's default domain (opsets 1 to 28), the since
// versions of every operator as its schema definitions declare them. The
// importer uses it to tell each converter the version it reads, and to name
// the version of an operator it does not convert.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include <algorithm>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
const std::map<std::string, std::vector<int64_t>> &sinceVersions() {
  static const std::map<std::string, std::vector<int64_t>> table = {
    {"Abs", {1, 6, 13}}, {"Acos", {7, 22}}, {"Acosh", {9, 22}}, {"Add", {1, 6, 7, 13, 14}},
    {"AffineGrid", {20}}, {"And", {1, 7}}, {"ArgMax", {1, 11, 12, 13}},
    {"ArgMin", {1, 11, 12, 13}}, {"Asin", {7, 22}}, {"Asinh", {9, 22}}, {"Atan", {7, 22}},
    {"Atanh", {9, 22}}, {"Attention", {23, 24, 25}}, {"AveragePool", {1, 7, 10, 11, 19, 22}},
    {"BatchNormalization", {1, 6, 7, 9, 14, 15}}, {"Bernoulli", {15, 22}}, {"BitCast", {26}},
    {"BitShift", {11}}, {"BitwiseAnd", {18}}, {"BitwiseNot", {18}}, {"BitwiseOr", {18}},
    {"BitwiseXor", {18}}, {"BlackmanWindow", {17}}, {"Cast", {1, 6, 9, 13, 19, 21, 23, 24, 25}},
    {"CastLike", {15, 19, 21, 23, 24, 25}}, {"CausalConvWithState", {27}}, {"Ceil", {1, 6, 13}},
    {"Celu", {12, 28}}, {"CenterCropPad", {18}}, {"Clip", {1, 6, 11, 12, 13}}, {"Col2Im", {18}},
    {"Compress", {9, 11}}, {"Concat", {1, 4, 11, 13}}, {"ConcatFromSequence", {11}},
    {"Constant", {1, 9, 11, 12, 13, 19, 21, 23, 24, 25}},
    {"ConstantOfShape", {9, 20, 21, 23, 24, 25}}, {"Conv", {1, 11, 22}}, {"ConvInteger", {10}},
    {"ConvTranspose", {1, 11, 22}}, {"Cos", {7, 22}}, {"Cosh", {9, 22}}, {"CumProd", {26}},
    {"CumSum", {11, 14}}, {"DFT", {17, 20}}, {"DeformConv", {19, 22}},
    {"DepthToSpace", {1, 11, 13}}, {"DequantizeLinear", {10, 13, 19, 21, 23, 24, 25}},
    {"Det", {11, 22}}, {"Div", {1, 6, 7, 13, 14}}, {"Dropout", {1, 6, 7, 10, 12, 13, 22}},
    {"DynamicQuantizeLinear", {11}}, {"Einsum", {12}}, {"Elu", {1, 6, 22}},
    {"Equal", {1, 7, 11, 13, 19}}, {"Erf", {9, 13}}, {"Exp", {1, 6, 13}}, {"Expand", {8, 13}},
    {"EyeLike", {9, 22}}, {"Flatten", {1, 9, 11, 13, 21, 23, 24, 25}}, {"Floor", {1, 6, 13}},
    {"GRU", {1, 3, 7, 14, 22}}, {"Gather", {1, 11, 13}}, {"GatherElements", {11, 13}},
    {"GatherND", {11, 12, 13}}, {"Gelu", {20}}, {"Gemm", {1, 6, 7, 9, 11, 13}},
    {"GlobalAveragePool", {1, 22}}, {"GlobalLpPool", {1, 2, 22}}, {"GlobalMaxPool", {1, 22}},
    {"Greater", {1, 7, 9, 13}}, {"GreaterOrEqual", {12, 16}}, {"GridSample", {16, 20, 22}},
    {"GroupNormalization", {18, 21}}, {"HammingWindow", {17}}, {"HannWindow", {17}},
    {"HardSigmoid", {1, 6, 22}}, {"HardSwish", {14, 22}}, {"Hardmax", {1, 11, 13}},
    {"Identity", {1, 13, 14, 16, 19, 21, 23, 24, 25}},
    {"If", {1, 11, 13, 16, 19, 21, 23, 24, 25}}, {"ImageDecoder", {20}},
    {"InstanceNormalization", {1, 6, 22}}, {"IsInf", {10, 20}}, {"IsNaN", {9, 13, 20}},
    {"LRN", {1, 13}}, {"LSTM", {1, 7, 14, 22}}, {"LayerNormalization", {17}},
    {"LeakyRelu", {1, 6, 16}}, {"Less", {1, 7, 9, 13}}, {"LessOrEqual", {12, 16}},
    {"LinearAttention", {27}}, {"Log", {1, 6, 13}}, {"LogSoftmax", {1, 11, 13}},
    {"Loop", {1, 11, 13, 16, 19, 21, 23, 24, 25}}, {"LpNormalization", {1, 22}},
    {"LpPool", {1, 2, 11, 18, 22}}, {"MatMul", {1, 9, 13}}, {"MatMulInteger", {10}},
    {"Max", {1, 6, 8, 12, 13}}, {"MaxPool", {1, 8, 10, 11, 12, 22}}, {"MaxRoiPool", {1, 22}},
    {"MaxUnpool", {9, 11, 22}}, {"Mean", {1, 6, 8, 13}}, {"MeanVarianceNormalization", {9, 13}},
    {"MelWeightMatrix", {17}}, {"Min", {1, 6, 8, 12, 13}}, {"Mish", {18, 22}}, {"Mod", {10, 13}},
    {"Mul", {1, 6, 7, 13, 14}}, {"Multinomial", {7, 22}}, {"Neg", {1, 6, 13}},
    {"NegativeLogLikelihoodLoss", {12, 13, 22}}, {"NonMaxSuppression", {10, 11}},
    {"NonZero", {9, 13}}, {"Not", {1}}, {"OneHot", {9, 11}}, {"Optional", {15}},
    {"OptionalGetElement", {15, 18}}, {"OptionalHasElement", {15, 18}}, {"Or", {1, 7}},
    {"PRelu", {1, 6, 7, 9, 16}}, {"Pad", {1, 2, 11, 13, 18, 19, 21, 23, 24, 25}},
    {"Pow", {1, 7, 12, 13, 15}}, {"QLinearConv", {10}}, {"QLinearMatMul", {10, 21}},
    {"QuantizeLinear", {10, 13, 19, 21, 23, 24, 25}}, {"RMSNormalization", {23}},
    {"RNN", {1, 7, 14, 22}}, {"RandomNormal", {1, 22}}, {"RandomNormalLike", {1, 22}},
    {"RandomUniform", {1, 22}}, {"RandomUniformLike", {1, 22}}, {"Range", {11, 27}},
    {"Reciprocal", {1, 6, 13}}, {"ReduceL1", {1, 11, 13, 18}}, {"ReduceL2", {1, 11, 13, 18}},
    {"ReduceLogSum", {1, 11, 13, 18}}, {"ReduceLogSumExp", {1, 11, 13, 18}},
    {"ReduceMax", {1, 11, 12, 13, 18, 20}}, {"ReduceMean", {1, 11, 13, 18}},
    {"ReduceMin", {1, 11, 12, 13, 18, 20}}, {"ReduceProd", {1, 11, 13, 18}},
    {"ReduceSum", {1, 11, 13}}, {"ReduceSumSquare", {1, 11, 13, 18}}, {"RegexFullMatch", {20}},
    {"Relu", {1, 6, 13, 14}}, {"Reshape", {1, 5, 13, 14, 19, 21, 23, 24, 25}},
    {"Resize", {10, 11, 13, 18, 19}}, {"ReverseSequence", {10}}, {"RoiAlign", {10, 16, 22}},
    {"RotaryEmbedding", {23}}, {"Round", {11, 22}}, {"STFT", {17}},
    {"Scan", {8, 9, 11, 16, 19, 21, 23, 24, 25}}, {"Scatter", {9, 11}},
    {"ScatterElements", {11, 13, 16, 18}}, {"ScatterND", {11, 13, 16, 18}}, {"Selu", {1, 6, 22}},
    {"SequenceAt", {11}}, {"SequenceConstruct", {11}}, {"SequenceEmpty", {11}},
    {"SequenceErase", {11}}, {"SequenceInsert", {11}}, {"SequenceLength", {11}},
    {"SequenceMap", {17}}, {"Shape", {1, 13, 15, 19, 21, 23, 24, 25}}, {"Shrink", {9}},
    {"Sigmoid", {1, 6, 13}}, {"Sign", {9, 13}}, {"Sin", {7, 22}}, {"Sinh", {9, 22}},
    {"Size", {1, 13, 19, 21, 23, 24, 25}}, {"Slice", {1, 10, 11, 13}}, {"Softmax", {1, 11, 13}},
    {"SoftmaxCrossEntropyLoss", {12, 13}}, {"Softplus", {1, 22}}, {"Softsign", {1, 22}},
    {"SpaceToDepth", {1, 13}}, {"Split", {1, 2, 11, 13, 18}}, {"SplitToSequence", {11, 24}},
    {"Sqrt", {1, 6, 13}}, {"Squeeze", {1, 11, 13, 21, 23, 24, 25}}, {"StringConcat", {20}},
    {"StringNormalizer", {10}}, {"StringSplit", {20}}, {"Sub", {1, 6, 7, 13, 14}},
    {"Sum", {1, 6, 8, 13}}, {"SwiGLU", {28}}, {"Swish", {24}}, {"Tan", {7, 22}},
    {"Tanh", {1, 6, 13}}, {"TensorScatter", {24}}, {"TfIdfVectorizer", {9}},
    {"ThresholdedRelu", {10, 22}}, {"Tile", {1, 6, 13}}, {"TopK", {1, 10, 11, 24}},
    {"Transpose", {1, 13, 21, 23, 24, 25}}, {"Trilu", {14}}, {"Unique", {11}},
    {"Unsqueeze", {1, 11, 13, 21, 23, 24, 25}}, {"Upsample", {1, 7, 9, 10}}, {"Where", {9, 16}},
    {"Xor", {1, 7}}
  };
  return table;
}
} // namespace

int64_t kiln::onnx_import::operatorVersion(const std::string &op, int64_t opset) {
  auto it = sinceVersions().find(op);
  if (it == sinceVersions().end())
    return 0;
  int64_t version = 0;
  for (int64_t since : it->second)
    if (since <= opset)
      version = std::max(version, since);
  return version;
}

int64_t kiln::onnx_import::nodeVersion(const onnx::NodeProto &node, int64_t opset) {
  const std::string &domain = node.domain();
  if (domain.empty() || domain == "ai.onnx")
    return operatorVersion(node.op_type(), opset);
  // The preview domains' operators that Kiln converts, each at version 1
  // (the only one ONNX 1.23 defines).
  static const std::map<std::string, std::vector<std::string>> preview = {
      {"ai.onnx.preview.training", {"Adagrad", "Adam", "Momentum"}},
      {"ai.onnx.preview", {"FlexAttention"}}};
  auto it = preview.find(domain);
  if (it == preview.end() ||
      std::find(it->second.begin(), it->second.end(), node.op_type()) == it->second.end())
    return 0;
  return 1;
}
