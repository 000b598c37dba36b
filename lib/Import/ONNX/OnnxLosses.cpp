//===- OnnxLosses.cpp - ONNX's loss operators for known labels ------------===//
//
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with labels known
// at import: the labels become a constant one-hot mask over the class axis
// (1), zero where a label is ignore_index, scaled by the class weights; the
// loss is minus the masked sum over classes, then reduced (none, sum, or
// the mean weighted by the picked classes' weights).
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// The loss of log-probabilities `logp` [N, C, d...] at the node's labels
/// (input 1) and optional weights (input 2).
Tensor nll(const NodeContext &ctx, const Tensor &logp) {
  const Shape &in = logp.shape();
  const std::vector<int64_t> &labels = ctx.ints(1);
  const Shape &labelShape = ctx.input(1).shape;
  if (in.size() < 2)
    ctx.fail("the scores must have rank 2 or more ([N, C, ...])");
  Shape expected(in);
  expected.erase(expected.begin() + 1);
  if (labelShape != expected)
    ctx.fail("the labels' shape is not the scores' without the class axis");
  int64_t classes = in[1], inner = 1;
  for (size_t d = 2; d < in.size(); ++d)
    inner *= in[d];
  std::optional<int64_t> ignore;
  if (ctx.attribute("ignore_index"))
    ignore = ctx.attrInt("ignore_index", 0);
  std::vector<float> mask(static_cast<size_t>(in[0] * classes * inner), 0.0f);
  for (int64_t i = 0; i < int64_t(labels.size()); ++i) {
    int64_t label = labels[size_t(i)];
    if (ignore && label == *ignore)
      continue;
    if (label < 0 || label >= classes)
      ctx.fail("label " + std::to_string(label) + " is outside the " + std::to_string(classes) +
               " classes");
    int64_t n = i / inner, rest = i % inner;
    mask[size_t((n * classes + label) * inner + rest)] = 1.0f;
  }
  Tensor weights = Tensor::from(std::move(mask), in, logp.dtype());
  if (ctx.has(2)) {
    Shape perClass(in.size(), 1);
    perClass[1] = classes;
    weights = weights * ctx.tensor(2).reshape(perClass);
  }
  Tensor loss = neg(sum(logp * weights, {1}));
  std::string reduction = ctx.attrString("reduction", "mean");
  if (reduction == "none")
    return loss;
  if (reduction == "sum")
    return sum(loss);
  if (reduction != "mean")
    ctx.fail("reduction '" + reduction + "' is not one of none, sum, mean");
  return sum(loss) / sum(weights);
}
} // namespace

void onnx_import::addLossConverters(ConverterTable &table) {
  table["NegativeLogLikelihoodLoss"] = [](const NodeContext &c) {
    return single(nll(c, c.tensor(0)));
  };
  table["SoftmaxCrossEntropyLoss"] = [](const NodeContext &c) {
    Tensor logp = log_softmax(c.tensor(0), 1);
    std::vector<Value> out = single(nll(c, logp));
    if (c.node.output_size() > 1)
      out.push_back(Value::of(logp));
    return out;
  };
}
