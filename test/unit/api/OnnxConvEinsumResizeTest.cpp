// ONNX operators checked against direct loops and hand-worked values: 3-D
// Conv and ConvTranspose (strides, pads, dilations, groups, output
// padding), Einsum diagonals and traces, antialiased and cubic Resize, and a
// Loop whose trip count the model computes in float from constants.

#include "OnnxModelBuilder.h"
#include "TestUtil.h"
#include "kiln/Import.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>

using namespace kiln;
using kiln::test::ModelBuilder;

namespace {
std::vector<float> randomData(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

int64_t count(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// Row-major offset of a 5-D index.
int64_t at(const Shape &s, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  return (((a * s[1] + b) * s[2] + c) * s[3] + d) * s[4] + e;
}

std::vector<float> run(const ModelBuilder &mb, const std::vector<Tensor> &inputs,
                       const Device &device) {
  return kiln::test::importAndRun(mb.bytes(), inputs, device)[0].to_vector<float>();
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want, float tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance) << "element " << i;
}

class OnnxOperatorsOnEveryDevice : public kiln::test::OnEveryDevice {};

// A grouped 3-D convolution with strides, dilations and uneven pads against
// the sum it defines.
TEST_P(OnnxOperatorsOnEveryDevice, ThreeDimensionalConvIsTheSumItDefines) {
  const Shape xs = {2, 4, 5, 6, 7}, ws = {6, 2, 3, 2, 3};
  const int64_t groups = 2, stride[3] = {2, 1, 2}, dil[3] = {1, 2, 1}, lo[3] = {1, 0, 1},
                hi[3] = {0, 1, 1};
  std::mt19937 rng(7);
  std::vector<float> x = randomData(size_t(count(xs)), rng), w = randomData(size_t(count(ws)), rng),
                     bias = randomData(6, rng);
  ModelBuilder mb;
  mb.input("x", xs);
  mb.weights("w", ws, w);
  mb.weights("b", {6}, bias);
  onnx::NodeProto *n = mb.node("Conv", {"x", "w", "b"}, {"y"});
  ModelBuilder::attr(n, "group", groups);
  ModelBuilder::attr(n, "strides", std::vector<int64_t>{stride[0], stride[1], stride[2]});
  ModelBuilder::attr(n, "dilations", std::vector<int64_t>{dil[0], dil[1], dil[2]});
  ModelBuilder::attr(n, "pads", std::vector<int64_t>{lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]});
  mb.output("y");
  Shape ys = {2, 6, 0, 0, 0};
  for (int i = 0; i < 3; ++i)
    ys[size_t(2 + i)] = (xs[size_t(2 + i)] + lo[i] + hi[i] - dil[i] * (ws[size_t(2 + i)] - 1) - 1) /
                            stride[i] +
                        1;
  std::vector<float> want(size_t(count(ys)));
  const int64_t perGroup = ws[0] / groups;
  for (int64_t b = 0; b < ys[0]; ++b)
    for (int64_t o = 0; o < ys[1]; ++o)
      for (int64_t d = 0; d < ys[2]; ++d)
        for (int64_t h = 0; h < ys[3]; ++h)
          for (int64_t v = 0; v < ys[4]; ++v) {
            double sum = bias[size_t(o)];
            for (int64_t c = 0; c < ws[1]; ++c)
              for (int64_t kd = 0; kd < ws[2]; ++kd)
                for (int64_t kh = 0; kh < ws[3]; ++kh)
                  for (int64_t kw = 0; kw < ws[4]; ++kw) {
                    int64_t id = d * stride[0] + kd * dil[0] - lo[0],
                            ih = h * stride[1] + kh * dil[1] - lo[1],
                            iw = v * stride[2] + kw * dil[2] - lo[2];
                    if (id < 0 || id >= xs[2] || ih < 0 || ih >= xs[3] || iw < 0 || iw >= xs[4])
                      continue;
                    int64_t channel = (o / perGroup) * ws[1] + c;
                    sum += double(x[size_t(at(xs, b, channel, id, ih, iw))]) *
                           w[size_t(at(ws, o, c, kd, kh, kw))];
                  }
            want[size_t(at(ys, b, o, d, h, v))] = float(sum);
          }
  expectNear(run(mb, {Tensor::from(x, xs, *device)}, *device), want, 1e-4f);
}

// A 3-D ConvTranspose with strides, pads and output padding: each input
// element scatters its products into the output.
TEST_P(OnnxOperatorsOnEveryDevice, ThreeDimensionalConvTransposeScattersTheInput) {
  const Shape xs = {1, 3, 3, 4, 2}, ws = {3, 2, 2, 3, 3};
  const int64_t stride[3] = {2, 1, 3}, lo[3] = {0, 1, 1}, hi[3] = {1, 0, 1}, extra[3] = {1, 0, 2};
  std::mt19937 rng(11);
  std::vector<float> x = randomData(size_t(count(xs)), rng), w = randomData(size_t(count(ws)), rng);
  ModelBuilder mb;
  mb.input("x", xs);
  mb.weights("w", ws, w);
  onnx::NodeProto *n = mb.node("ConvTranspose", {"x", "w"}, {"y"});
  ModelBuilder::attr(n, "strides", std::vector<int64_t>{stride[0], stride[1], stride[2]});
  ModelBuilder::attr(n, "pads", std::vector<int64_t>{lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]});
  ModelBuilder::attr(n, "output_padding", std::vector<int64_t>{extra[0], extra[1], extra[2]});
  mb.output("y");
  Shape ys = {1, 2, 0, 0, 0};
  for (int i = 0; i < 3; ++i)
    ys[size_t(2 + i)] = stride[i] * (xs[size_t(2 + i)] - 1) + extra[i] + ws[size_t(2 + i)] -
                        lo[i] - hi[i];
  std::vector<double> sum(size_t(count(ys)), 0.0);
  for (int64_t c = 0; c < xs[1]; ++c)
    for (int64_t d = 0; d < xs[2]; ++d)
      for (int64_t h = 0; h < xs[3]; ++h)
        for (int64_t v = 0; v < xs[4]; ++v)
          for (int64_t o = 0; o < ws[1]; ++o)
            for (int64_t kd = 0; kd < ws[2]; ++kd)
              for (int64_t kh = 0; kh < ws[3]; ++kh)
                for (int64_t kw = 0; kw < ws[4]; ++kw) {
                  int64_t od = d * stride[0] + kd - lo[0], oh = h * stride[1] + kh - lo[1],
                          ow = v * stride[2] + kw - lo[2];
                  if (od < 0 || od >= ys[2] || oh < 0 || oh >= ys[3] || ow < 0 || ow >= ys[4])
                    continue;
                  sum[size_t(at(ys, 0, o, od, oh, ow))] +=
                      double(x[size_t(at(xs, 0, c, d, h, v))]) * w[size_t(at(ws, c, o, kd, kh, kw))];
                }
  std::vector<float> got = run(mb, {Tensor::from(x, xs, *device)}, *device);
  expectNear(got, std::vector<float>(sum.begin(), sum.end()), 1e-4f);
}

KILN_ON_EVERY_DEVICE(OnnxOperatorsOnEveryDevice);

std::vector<float> einsum(const std::string &equation, const Shape &shape,
                          const std::vector<float> &x) {
  ModelBuilder mb;
  mb.input("x", shape);
  ModelBuilder::attr(mb.node("Einsum", {"x"}, {"y"}), "equation", equation);
  mb.output("y");
  Device cpu = Device::parse("cpu:0");
  return run(mb, {Tensor::from(x, shape, cpu)}, cpu);
}

// A letter repeated within an operand takes its diagonal, as numpy.einsum.
TEST(OnnxImport, EinsumTakesDiagonals) {
  std::vector<float> m = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(einsum("ii->i", {3, 3}, m), (std::vector<float>{1, 5, 9}));
  EXPECT_EQ(einsum("ii", {3, 3}, m), (std::vector<float>{15})); // the trace
  std::vector<float> batch(18);
  for (size_t i = 0; i < batch.size(); ++i)
    batch[i] = float(i);
  EXPECT_EQ(einsum("bii->bi", {2, 3, 3}, batch), (std::vector<float>{0, 4, 8, 9, 13, 17}));
  // x[i, j, i] for i < 2, j < 3: a diagonal across dimensions apart.
  std::vector<float> apart(12);
  for (size_t i = 0; i < apart.size(); ++i)
    apart[i] = float(i);
  EXPECT_EQ(einsum("iji->ij", {2, 3, 2}, apart), (std::vector<float>{0, 2, 4, 7, 9, 11}));
  std::string message = kiln::test::messageOf([] { einsum("ii->i", {2, 3}, {1, 2, 3, 4, 5, 6}); });
  EXPECT_NE(message.find("letter 'i' has sizes 2 and 3"), std::string::npos) << message;
}

/// [1, 2, 3, 4] resized to 2 by `mode` with antialias (half_pixel).
std::vector<float> downsample(const std::string &mode, bool antialias) {
  ModelBuilder mb(18);
  mb.input("x", {1, 4});
  mb.weights("roi", {0}, {});
  mb.weights("scales", {2}, {1, 0.5f});
  onnx::NodeProto *n = mb.node("Resize", {"x", "roi", "scales"}, {"y"});
  ModelBuilder::attr(n, "mode", mode);
  ModelBuilder::attr(n, "antialias", int64_t(antialias));
  mb.output("y");
  Device cpu = Device::parse("cpu:0");
  return run(mb, {Tensor::from({1, 2, 3, 4}, {1, 4}, cpu)}, cpu);
}

// Antialiased downsampling widens the kernel by 1 / scale: output 0 reads
// positions -1..2 (clamped to 0) with the triangle's weights 1, 3, 3, 1
// over 8; output 1 reads 1..4 (clamped to 3). Cubic (a = -0.75) at a ratio
// of 0.5 weighs -3/32, 19/32, 19/32, -3/32.
TEST(OnnxImport, ResizeAntialiasAndCubic) {
  expectNear(downsample("linear", true), {1.625f, 3.375f}, 1e-6f);
  expectNear(downsample("linear", false), {1.5f, 3.5f}, 1e-6f);
  float a = -3.0f / 32, b = 19.0f / 32;
  expectNear(downsample("cubic", false), {a * 1 + b * 1 + b * 2 + a * 3, a * 2 + b * 3 + b * 4 + a * 4},
             1e-6f);
}

// Range's function body: a Loop whose trip count is ceil((limit - start) /
// delta) computed in float. From constants it is evaluated at import; from
// a graph input it is an error naming the node.
TEST(OnnxImport, LoopCountComputedFromConstantsIsKnownAtImport) {
  for (bool fromInput : {false, true}) {
    ModelBuilder mb;
    mb.input("x", {2});
    if (fromInput)
      mb.input("start", {1});
    else
      mb.weights("start", {1}, {1.0f});
    mb.weights("limit", {}, {4.5f});
    mb.node("Sub", {"limit", "start"}, {"span"});
    mb.node("Ceil", {"span"}, {"trips_f"});
    ModelBuilder::attr(mb.node("Cast", {"trips_f"}, {"trips"}), "to", int64_t(7));
    onnx::NodeProto *loop = mb.node("Loop", {"trips", "", "x"}, {"y"});
    onnx::AttributeProto *body = loop->add_attribute();
    body->set_name("body");
    body->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto *g = body->mutable_g();
    g->set_name("body");
    for (const char *name : {"i", "cond", "acc"}) {
      onnx::ValueInfoProto *in = g->add_input();
      in->set_name(name);
      in->mutable_type()->mutable_tensor_type()->set_elem_type(
          std::string(name) == "acc" ? onnx::TensorProto::FLOAT
          : std::string(name) == "i" ? onnx::TensorProto::INT64
                                     : onnx::TensorProto::BOOL);
    }
    onnx::NodeProto *keep = g->add_node();
    keep->set_op_type("Identity");
    keep->add_input("cond");
    keep->add_output("cond_out");
    onnx::NodeProto *add = g->add_node();
    add->set_op_type("Add");
    add->add_input("acc");
    add->add_input("x");
    add->add_output("acc_out");
    g->add_output()->set_name("cond_out");
    g->add_output()->set_name("acc_out");
    mb.output("y");
    Device cpu = Device::parse("cpu:0");
    Tensor x = Tensor::from({1, -2}, {2}, cpu);
    if (fromInput) {
      std::string message = kiln::test::messageOf([&] { run(mb, {x, Tensor::from({1.0f}, {1}, cpu)}, cpu); });
      EXPECT_NE(message.find("trip count is computed at run time"), std::string::npos) << message;
    } else {
      // ceil(3.5) = 4 iterations: x + 4x.
      EXPECT_EQ(run(mb, {x}, cpu), (std::vector<float>{5, -10}));
    }
  }
}
} // namespace
