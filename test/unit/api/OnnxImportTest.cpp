// ONNX import: models built here with ONNX's own protobuf classes, imported,
// compiled and run on every device against the same model written with the
// Tensor API; exact small cases for padding rules; folding of shape
// subgraphs; and every malformed-model error naming the node and the fix.

#include "OnnxModelBuilder.h"
#include "TestUtil.h"
#include "kiln/Import.h"
#include "kiln/Profile.h"

#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <fstream>
#include <random>

using namespace kiln;
using kiln::test::messageOf;
using kiln::test::ModelBuilder;

namespace {
std::vector<float> randomData(size_t n, std::mt19937 &rng, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

std::vector<double> widen(const std::vector<float> &v) { return {v.begin(), v.end()}; }

/// Imports `bytes`, compiles for `device` and runs it on `x`.
std::vector<float> importAndRun(const std::string &bytes, const Tensor &x, const Device &device,
                                const std::map<std::string, Shape> &shapes = {}) {
  OnnxModel m = import_onnx_bytes(bytes, "model.onnx", shapes);
  CompileOptions options;
  options.targets = {device.api() == "cpu" ? "cpu" : "vulkan"};
  options.input_names = m.input_names;
  options.output_names = m.output_names;
  Program p = compile(m.outputs, m.inputs, options);
  return p.run({x})[0].to_vector<float>();
}

class OnnxOnEveryDevice : public kiln::test::OnEveryDevice {};

// A small CNN: asymmetric explicit pads, batch norm, max pool, a grouped
// conv with SAME_UPPER, a residual add, HardSwish, global pooling, Gemm with
// transB, alpha and beta, softmax; against the same model written with the
// Tensor API.
TEST_P(OnnxOnEveryDevice, CnnMatchesTheTensorApi) {
  std::mt19937 rng(11);
  std::vector<float> w1 = randomData(8 * 3 * 3 * 3, rng), b1 = randomData(8, rng);
  std::vector<float> mean = randomData(8, rng), var = randomData(8, rng, 0.5f, 2.0f);
  std::vector<float> gamma = randomData(8, rng, 0.5f, 1.5f), beta = randomData(8, rng);
  std::vector<float> w2 = randomData(8 * 4 * 3 * 3, rng);
  std::vector<float> fw = randomData(5 * 8, rng), fb = randomData(5, rng);
  ModelBuilder mb(14); // (HardSwish is an operator of opset 14 on)
  mb.input("x", {2, 3, 11, 10});
  mb.weights("w1", {8, 3, 3, 3}, w1);
  mb.weights("b1", {8}, b1);
  for (auto [name, data] : {std::pair{"mean", &mean}, {"var", &var}, {"gamma", &gamma}, {"beta", &beta}})
    mb.weights(name, {8}, *data);
  mb.weights("w2", {8, 4, 3, 3}, w2);
  mb.weights("fw", {5, 8}, fw);
  mb.weights("fb", {5}, fb);
  onnx::NodeProto *c1 = mb.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  ModelBuilder::attr(c1, "pads", std::vector<int64_t>{1, 0, 2, 1});
  ModelBuilder::attr(c1, "strides", std::vector<int64_t>{2, 1});
  ModelBuilder::attr(mb.node("BatchNormalization", {"c1", "gamma", "beta", "mean", "var"}, {"bn"}),
                     "epsilon", 1e-3f);
  mb.node("Relu", {"bn"}, {"r"});
  onnx::NodeProto *mp = mb.node("MaxPool", {"r"}, {"p"});
  ModelBuilder::attr(mp, "kernel_shape", std::vector<int64_t>{2, 2});
  ModelBuilder::attr(mp, "strides", std::vector<int64_t>{2, 2});
  onnx::NodeProto *c2 = mb.node("Conv", {"p", "w2"}, {"c2"});
  ModelBuilder::attr(c2, "group", int64_t(2));
  ModelBuilder::attr(c2, "auto_pad", std::string("SAME_UPPER"));
  mb.node("Add", {"c2", "p"}, {"s"});
  mb.node("HardSwish", {"s"}, {"h"});
  mb.node("GlobalAveragePool", {"h"}, {"g"});
  mb.node("Flatten", {"g"}, {"f"});
  onnx::NodeProto *gm = mb.node("Gemm", {"f", "fw", "fb"}, {"l"});
  ModelBuilder::attr(gm, "transB", int64_t(1));
  ModelBuilder::attr(gm, "alpha", 0.5f);
  ModelBuilder::attr(gm, "beta", 2.0f);
  ModelBuilder::attr(mb.node("Softmax", {"l"}, {"y"}), "axis", int64_t(-1));
  mb.output("y");

  std::vector<float> xs = randomData(2 * 3 * 11 * 10, rng);
  Tensor x = Tensor::from(xs, {2, 3, 11, 10}, *device);
  std::vector<float> got = importAndRun(mb.bytes(), x, *device);

  // The same with the Tensor API: pads (top 1, left 0, bottom 2, right 1).
  auto t = [](const std::vector<float> &v, Shape s) { return Tensor::from(v, s); };
  Tensor y = conv2d(pad(x, {0, 0, 1, 0}, {0, 0, 2, 1}), t(w1, {8, 3, 3, 3}), {2, 1});
  y = y + t(b1, {8}).reshape({1, 8, 1, 1});
  y = relu(batch_norm(y, t(mean, {8}), t(var, {8}), t(gamma, {8}), t(beta, {8}), 1e-3f));
  Tensor p = max_pool2d(y, {2, 2}, {2, 2});
  Tensor s = conv2d(p, t(w2, {8, 4, 3, 3}), {1, 1}, {1, 1}, {1, 1}, 2) + p;
  Tensor h = s * minimum(maximum(s * Tensor::scalar(1.0f / 6) + Tensor::scalar(0.5f),
                                 Tensor::scalar(0.0f)),
                         Tensor::scalar(1.0f));
  Tensor f = global_avg_pool2d(h).reshape({2, 8});
  Tensor l = matmul(f, t(fw, {5, 8}).transpose(0, 1)) * Tensor::scalar(0.5f) +
             t(fb, {5}) * Tensor::scalar(2.0f);
  std::vector<float> want = softmax(l, -1).to_vector<float>();
  EXPECT_TRUE(kiln::test::allClose(got, widen(want), 1e-5, 1e-6));
}

// A transformer-style block at opset 17: MatMul, Add, LayerNormalization,
// Transpose, Reshape and a softmax.
TEST_P(OnnxOnEveryDevice, LayerNormBlockMatchesTheTensorApi) {
  std::mt19937 rng(5);
  std::vector<float> w = randomData(16 * 16, rng), b = randomData(16, rng);
  std::vector<float> g = randomData(16, rng, 0.5f, 1.5f), beta = randomData(16, rng);
  ModelBuilder mb(17);
  mb.input("x", {4, 16});
  mb.weights("w", {16, 16}, w);
  mb.weights("b", {16}, b);
  mb.weights("g", {16}, g);
  mb.weights("beta", {16}, beta);
  mb.ints("shape", {3}, {4, 2, 8});
  mb.node("MatMul", {"x", "w"}, {"m"});
  mb.node("Add", {"m", "b"}, {"a"});
  ModelBuilder::attr(mb.node("LayerNormalization", {"a", "g", "beta"}, {"n"}), "epsilon", 1e-5f);
  mb.node("Reshape", {"n", "shape"}, {"r"});
  ModelBuilder::attr(mb.node("Transpose", {"r"}, {"t"}), "perm", std::vector<int64_t>{1, 0, 2});
  mb.node("Softmax", {"t"}, {"y"});
  mb.output("y");
  std::vector<float> xs = randomData(4 * 16, rng);
  Tensor x = Tensor::from(xs, {4, 16}, *device);
  std::vector<float> got = importAndRun(mb.bytes(), x, *device);
  Tensor n = layer_norm(matmul(x, Tensor::from(w, {16, 16})) + Tensor::from(b, {16}),
                        Tensor::from(g, {16}), Tensor::from(beta, {16}));
  std::vector<float> want = softmax(n.reshape({4, 2, 8}).permute({1, 0, 2}), -1).to_vector<float>();
  EXPECT_TRUE(kiln::test::allClose(got, widen(want), 1e-5, 1e-6));
}

KILN_ON_EVERY_DEVICE(OnnxOnEveryDevice);

/// A 2x2 all-ones kernel over a 3x3 all-ones image, stride 1, padded by
/// auto_pad: SAME_UPPER puts the extra row and column after, SAME_LOWER
/// before (ONNX's definition), which these sums show.
std::vector<float> sameConv(const std::string &mode) {
  ModelBuilder mb;
  mb.input("x", {1, 1, 3, 3});
  mb.weights("w", {1, 1, 2, 2}, {1, 1, 1, 1});
  ModelBuilder::attr(mb.node("Conv", {"x", "w"}, {"y"}), "auto_pad", mode);
  mb.output("y");
  Tensor x = Tensor::from(std::vector<float>(9, 1.0f), {1, 1, 3, 3}, Device::parse("cpu:0"));
  return importAndRun(mb.bytes(), x, Device::parse("cpu:0"));
}

TEST(OnnxImport, AutoPadPutsTheOddPaddingWhereOnnxSays) {
  EXPECT_EQ(sameConv("SAME_UPPER"), (std::vector<float>{4, 4, 2, 4, 4, 2, 2, 2, 1}));
  EXPECT_EQ(sameConv("SAME_LOWER"), (std::vector<float>{1, 2, 2, 2, 4, 4, 2, 4, 4}));
  EXPECT_EQ(sameConv("VALID"), (std::vector<float>{4, 4, 4, 4}));
}

// Average pooling with padding: ONNX's default excludes the padding from
// the count (count_include_pad = 0), unlike the Tensor API's avg_pool2d.
TEST(OnnxImport, AveragePoolCountsOnlyTheImage) {
  ModelBuilder mb;
  mb.input("x", {1, 1, 2, 2});
  onnx::NodeProto *n = mb.node("AveragePool", {"x"}, {"y"});
  ModelBuilder::attr(n, "kernel_shape", std::vector<int64_t>{2, 2});
  ModelBuilder::attr(n, "pads", std::vector<int64_t>{1, 1, 1, 1});
  mb.output("y");
  Device cpu = Device::parse("cpu:0");
  Tensor x = Tensor::from({1, 2, 3, 4}, {1, 1, 2, 2}, cpu);
  // Windows of 1, 2, 1 / 2, 4, 2 / 1, 2, 1 image elements.
  EXPECT_EQ(importAndRun(mb.bytes(), x, cpu),
            (std::vector<float>{1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4}));
}

/// 2x2 windows, stride 2, over 1..9 in a 3x3 image with ceil_mode: the
/// partial windows at the right and bottom edges count.
std::vector<float> ceilPool(const std::string &op) {
  ModelBuilder mb;
  mb.input("x", {1, 1, 3, 3});
  onnx::NodeProto *n = mb.node(op, {"x"}, {"y"});
  ModelBuilder::attr(n, "kernel_shape", std::vector<int64_t>{2, 2});
  ModelBuilder::attr(n, "strides", std::vector<int64_t>{2, 2});
  ModelBuilder::attr(n, "ceil_mode", int64_t(1));
  mb.output("y");
  Device cpu = Device::parse("cpu:0");
  return importAndRun(mb.bytes(), Tensor::from({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, cpu), cpu);
}

TEST(OnnxImport, CeilModePoolsKeepThePartialWindows) {
  EXPECT_EQ(ceilPool("MaxPool"), (std::vector<float>{5, 6, 8, 9}));
  EXPECT_EQ(ceilPool("AveragePool"), (std::vector<float>{3, 4.5f, 7.5f, 9}));
}

// Resize as torch.nn.Upsample and F.interpolate export it: nearest x2
// (asymmetric, floor) and bilinear x2 (half_pixel), from sizes and from
// scales; its rows and columns worked out by hand.
std::vector<float> resize2x(const std::string &mode, bool bySizes) {
  ModelBuilder mb;
  mb.input("x", {1, 1, 2, 2});
  mb.weights("roi", {0}, {});
  std::vector<std::string> inputs = {"x", "roi"};
  if (bySizes) {
    mb.weights("scales", {0}, {});
    mb.ints("sizes", {4}, {1, 1, 4, 4});
    inputs.insert(inputs.end(), {"scales", "sizes"});
  } else {
    mb.weights("scales", {4}, {1, 1, 2, 2});
    inputs.push_back("scales");
  }
  onnx::NodeProto *n = mb.node("Resize", inputs, {"y"});
  ModelBuilder::attr(n, "mode", mode);
  if (mode == "nearest") {
    ModelBuilder::attr(n, "coordinate_transformation_mode", std::string("asymmetric"));
    ModelBuilder::attr(n, "nearest_mode", std::string("floor"));
  }
  mb.output("y");
  Device cpu = Device::parse("cpu:0");
  return importAndRun(mb.bytes(), Tensor::from({1, 2, 3, 4}, {1, 1, 2, 2}, cpu), cpu);
}

TEST(OnnxImport, ResizeNearestAndLinear) {
  std::vector<float> nearest = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
  EXPECT_EQ(resize2x("nearest", true), nearest);
  EXPECT_EQ(resize2x("nearest", false), nearest);
  // half_pixel: output o reads (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75,
  // 1.25, clamped to [0, 1]: weights 0, 0.25, 0.75, 1 along each axis.
  std::vector<float> row0 = {1, 1.25f, 1.75f, 2}, row3 = {3, 3.25f, 3.75f, 4};
  std::vector<float> linear;
  for (float t : {0.0f, 0.25f, 0.75f, 1.0f})
    for (int j = 0; j < 4; ++j)
      linear.push_back(row0[j] + (row3[j] - row0[j]) * t);
  EXPECT_EQ(resize2x("linear", true), linear);
  EXPECT_EQ(resize2x("linear", false), linear);
  EXPECT_NE(kiln::test::messageOf([] { resize2x("area", true); }).find("mode 'area'"),
            std::string::npos);
}

// 3-D pooling with padding: ONNX's average counts only the elements inside
// (so a constant input stays constant), the max ignores the padding.
TEST(OnnxImport, ThreeDimensionalPooling) {
  for (const std::string op : {"AveragePool", "MaxPool"}) {
    ModelBuilder mb;
    mb.input("x", {1, 1, 3, 3, 3});
    onnx::NodeProto *n = mb.node(op, {"x"}, {"y"});
    ModelBuilder::attr(n, "kernel_shape", std::vector<int64_t>{2, 2, 2});
    ModelBuilder::attr(n, "strides", std::vector<int64_t>{2, 2, 2});
    ModelBuilder::attr(n, "pads", std::vector<int64_t>{1, 1, 1, 1, 1, 1});
    mb.output("y");
    Device cpu = Device::parse("cpu:0");
    std::vector<float> v(27);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = op == "MaxPool" ? -float(i) : 2.0f;
    std::vector<float> got = importAndRun(mb.bytes(), Tensor::from(v, {1, 1, 3, 3, 3}, cpu), cpu);
    ASSERT_EQ(got.size(), 8u) << op;
    if (op == "AveragePool") {
      EXPECT_EQ(got, std::vector<float>(8, 2.0f));
    } else {
      // Window (d, h, w) starts at 2 * index - 1: its first inside element
      // (the largest of -i) is at max(0, 2 * index - 1) per axis.
      std::vector<float> want;
      for (int d = 0; d < 2; ++d)
        for (int h = 0; h < 2; ++h)
          for (int w = 0; w < 2; ++w)
            want.push_back(-float((d ? 1 : 0) * 9 + (h ? 1 : 0) * 3 + (w ? 1 : 0)));
      EXPECT_EQ(got, want);
    }
  }
}

// Not, on a comparison computed at run time and on booleans known at import.
TEST(OnnxImport, NotNegatesBooleans) {
  ModelBuilder mb;
  mb.input("x", {4});
  mb.weights("zero", {}, {0.0f});
  mb.node("Greater", {"x", "zero"}, {"positive"});
  mb.node("Not", {"positive"}, {"y"});
  mb.output("y");
  Device cpu = Device::parse("cpu:0");
  EXPECT_EQ(importAndRun(mb.bytes(), Tensor::from({-1, 2, 0, 5}, {4}, cpu), cpu),
            (std::vector<float>{1, 0, 1, 0}));
}

// An opset-9 model whose operators are unchanged since (Greater-9, Not-1,
// Elu-6) imports: each node is read by its own version.
TEST(OnnxImport, OlderOpsetsImportWhereTheirOperatorsAreUnchanged) {
  ModelBuilder mb(9);
  mb.input("x", {4});
  mb.weights("zero", {}, {0.0f});
  mb.node("Elu", {"x"}, {"e"});
  mb.node("Greater", {"e", "zero"}, {"positive"});
  mb.node("Not", {"positive"}, {"y"});
  mb.output("y");
  Device cpu = Device::parse("cpu:0");
  EXPECT_EQ(importAndRun(mb.bytes(), Tensor::from({-1, 2, 0, 5}, {4}, cpu), cpu),
            (std::vector<float>{1, 0, 1, 0}));
}

// If with a condition the model computes: both branches, selected
// elementwise; the branches read the outer graph's values by name.
TEST(OnnxImport, IfOnARunTimeConditionSelectsBetweenBranches) {
  ModelBuilder mb;
  mb.input("x", {4});
  mb.weights("zero", {}, {0.0f});
  mb.node("ReduceSum", {"x"}, {"total"});
  mb.node("Greater", {"total", "zero"}, {"positive"});
  onnx::NodeProto *n = mb.node("If", {"positive"}, {"y"});
  auto branch = [&](const char *name, const char *op) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto *g = a->mutable_g();
    g->set_name(name);
    onnx::NodeProto *inner = g->add_node();
    inner->set_op_type(op);
    inner->add_input("x");
    inner->add_output(std::string(name) + "_y");
    g->add_output()->set_name(std::string(name) + "_y");
  };
  branch("then_branch", "Relu");
  branch("else_branch", "Neg");
  mb.output("y");
  Device cpu = Device::parse("cpu:0");
  EXPECT_EQ(importAndRun(mb.bytes(), Tensor::from({-1, 2, 0, 5}, {4}, cpu), cpu),
            (std::vector<float>{0, 2, 0, 5}));
  EXPECT_EQ(importAndRun(mb.bytes(), Tensor::from({-1, 2, 0, -5}, {4}, cpu), cpu),
            (std::vector<float>{1, -2, -0.0f, 5}));
}

// float8 and int4 results are f32 and int32 tensors holding the narrow
// type's values: rounded half to even at the format's precision and
// saturated (or NaN without saturate), integers wrapped to their width.
TEST(OnnxImport, NarrowTypesRoundAndWrapAsOnnxSays) {
  auto castTwice = [](int64_t to, int64_t saturate) {
    ModelBuilder mb;
    mb.input("x", {6});
    onnx::NodeProto *narrow = mb.node("Cast", {"x"}, {"narrow"});
    ModelBuilder::attr(narrow, "to", to);
    if (saturate >= 0)
      ModelBuilder::attr(narrow, "saturate", saturate);
    ModelBuilder::attr(mb.node("Cast", {"narrow"}, {"y"}), "to", int64_t(1));
    mb.output("y");
    return mb.bytes();
  };
  Device cpu = Device::parse("cpu:0");
  Tensor x = Tensor::from({0.478925f, 464.0f, 470.0f, -1e6f, 0.0015f, 9.0f}, {6}, cpu);
  // E4M3FN: 0.46875 is the nearest; 464 ties to 448 (even); 470 overflows;
  // 0.0015 rounds to the smallest subnormal, 2^-9.
  std::vector<float> e4m3 = importAndRun(castTwice(17, -1), x, cpu);
  EXPECT_EQ(e4m3, (std::vector<float>{0.46875f, 448, 448, -448, 0.001953125f, 9}));
  std::vector<float> unsaturated = importAndRun(castTwice(17, 0), x, cpu);
  EXPECT_EQ(unsaturated[1], 448.0f);
  EXPECT_TRUE(std::isnan(unsaturated[2]) && std::isnan(unsaturated[3]));
  // float4e2m1 holds 0, 0.5, 1, 1.5, 2, 3, 4, 6 and always saturates.
  EXPECT_EQ(importAndRun(castTwice(23, -1), x, cpu), (std::vector<float>{0.5f, 6, 6, -6, 0, 6}));
  // int4 wraps: 9 is -7, 464 is 0, 470 is 6 (truncated toward zero first).
  Tensor ints = Tensor::from({-9.0f, 7.5f, 8.0f, -8.0f, 464.0f, 470.0f}, {6}, cpu);
  EXPECT_EQ(importAndRun(castTwice(22, -1), ints, cpu), (std::vector<float>{7, 7, -8, -8, 0, 6}));
}

// Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write a
// flatten: folded at import, no kernel for the integers.
TEST(OnnxImport, ShapeSubgraphsFoldAtImport) {
  ModelBuilder mb;
  mb.input("x", {-1, 3, 4});
  mb.ints("zero", {}, {0});
  mb.ints("axes", {1}, {0});
  mb.ints("minus1", {1}, {-1});
  mb.node("Shape", {"x"}, {"s"});
  ModelBuilder::attr(mb.node("Gather", {"s", "zero"}, {"n"}), "axis", int64_t(0));
  mb.node("Unsqueeze", {"n", "axes"}, {"n1"});
  ModelBuilder::attr(mb.node("Concat", {"n1", "minus1"}, {"shape"}), "axis", int64_t(0));
  mb.node("Reshape", {"x", "shape"}, {"y"});
  mb.output("y");
  OnnxModel m = import_onnx_bytes(mb.bytes(), "flatten.onnx", {{"x", {2, 3, 4}}});
  EXPECT_EQ(m.nodes, 5);
  EXPECT_EQ(m.folded, 4);
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.outputs[0].shape(), (Shape{2, 12}));
  std::vector<float> xs(24);
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = float(i);
  Device cpu = Device::parse("cpu:0");
  EXPECT_EQ(importAndRun(mb.bytes(), Tensor::from(xs, {2, 3, 4}, cpu), cpu, {{"x", {2, 3, 4}}}), xs);
}

// A profile of an imported model names each kernel's ops by the ONNX nodes
// they came from (an unnamed node by its type and index), not by the
// importer's source lines.
TEST(OnnxImport, ProfilesNameTheNodes) {
  ModelBuilder mb;
  mb.input("x", {2, 8});
  mb.node("Relu", {"x"}, {"r"}, "block1/act");
  mb.node("Exp", {"r"}, {"y"});
  mb.output("y");
  OnnxModel m = import_onnx_bytes(mb.bytes(), "named.onnx");
  realize(m.inputs);
  Profile p = profile(m.outputs, 1);
  ASSERT_EQ(p.kernels.size(), 1u) << p.table();
  EXPECT_EQ(p.kernels[0].sources, "block1/act relu; Exp 1 exp") << p.table();
}

// PyTorch exports layer norm's variance as Pow(x - mean, 2): a float base
// squared by a constant becomes a multiply (no powf per element on the
// CPU), exact as x * x; other exponents stay powers.
TEST(OnnxImport, SquaringByAConstantIsAMultiply) {
  ModelBuilder mb;
  mb.input("x", {2, 8});
  mb.weights("two", {}, {2.0f});
  mb.weights("three", {}, {3.0f});
  mb.node("Pow", {"x", "two"}, {"s"});
  mb.node("Pow", {"s", "three"}, {"y"});
  mb.output("y");
  OnnxModel m = import_onnx_bytes(mb.bytes(), "pow.onnx");
  realize(m.inputs);
  Profile p = profile(m.outputs, 1);
  ASSERT_EQ(p.kernels.size(), 1u) << p.table();
  EXPECT_EQ(p.kernels[0].sources, "Pow 0 mul; Pow 1 pow") << p.table();
  std::vector<float> xs = {-3, -2.5f, -1, 0, 0.5f, 1, 2, 3, 1.5f, -0.25f, 4, 5, -6, 7, 0.125f, -8};
  Tensor x = Tensor::from(xs, {2, 8}, Device::parse("cpu:0"));
  std::vector<float> got = importAndRun(mb.bytes(), x, Device::parse("cpu:0"));
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_FLOAT_EQ(got[i], std::pow(xs[i] * xs[i], 3.0f)) << i;
}

TEST(OnnxImport, ErrorsNameTheNodeAndTheFix) {
  {
    ModelBuilder mb;
    mb.input("x", {2, 2});
    mb.node("Relu", {"x"}, {"r"});
    mb.node("NonMaxSuppression", {"r"}, {"e"}, "nms1");
    mb.node("Gelu", {"e"}, {"g"}, "gelu2"); // an operator of opset 20 on, not 13
    mb.node("FusedMatMul", {"g"}, {"f"}, "fused3")->set_domain("com.microsoft");
    mb.node("Relu", {"f"}, {"y"});
    mb.output("y");
    // Every node the importer does not convert, in one error.
    std::string msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx"); });
    EXPECT_NE(msg.find("m.onnx: 3 nodes use an operator that Kiln's importer does not convert "
                       "(opset 13):"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node 'nms1' (NonMaxSuppression, node 1): NonMaxSuppression-11 is not converted"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("node 'gelu2' (Gelu, node 2): not an operator of opset 13"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("node 'fused3' (FusedMatMul, node 3): domain 'com.microsoft'"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("see docs/onnx.md"), std::string::npos) << msg;
  }
  {
    ModelBuilder mb;
    mb.input("x", {-1, 3});
    mb.node("Relu", {"x"}, {"y"});
    mb.output("y");
    std::string msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx"); });
    EXPECT_NE(msg.find("input 'x' has dimensions left unknown ('batch')"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--input-shape x=1x3"), std::string::npos) << msg;
    msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx", {{"x", {2, 4}}}); });
    EXPECT_NE(msg.find("dimension 1 = 3 in the model, but the shape given is 2x4"), std::string::npos) << msg;
    msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx", {{"x", {2, 3}}, {"z", {1}}}); });
    EXPECT_NE(msg.find("'z', which is not an input"), std::string::npos) << msg;
  }
  {
    ModelBuilder mb;
    mb.input("x", {4});
    onnx::TensorProto *w = mb.weights("w", {4}, {1, 2, 3});
    (void)w;
    mb.node("Add", {"x", "w"}, {"y"});
    mb.output("y");
    std::string msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx"); });
    EXPECT_NE(msg.find("initializer 'w': 12 bytes of data for shape 4 (4 elements of 4 bytes)"),
              std::string::npos) << msg;
  }
  {
    ModelBuilder mb;
    mb.input("x", {4});
    onnx::TensorProto *w = mb.weights("w", {4}, {1, 2, 3, 4});
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    mb.node("Add", {"x", "w"}, {"y"});
    mb.output("y");
    std::string msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx"); });
    EXPECT_NE(msg.find("external data"), std::string::npos) << msg;
  }
  {
    // Opset 9's Slice (no negative steps, axes an attribute) is older than
    // any Kiln reads; its Relu-6 is the one of opset 11 and is not named.
    ModelBuilder mb(9);
    mb.input("x", {4});
    mb.node("Relu", {"x"}, {"r"});
    mb.node("Slice", {"r"}, {"y"});
    mb.output("y");
    std::string msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx"); });
    EXPECT_NE(msg.find("Slice-1 predates the Slice-11 that Kiln reads"), std::string::npos) << msg;
    EXPECT_NE(msg.find("convert_version(model, 11)"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("Relu"), std::string::npos) << msg;
  }
  {
    ModelBuilder mb(29);
    mb.input("x", {4});
    mb.node("Relu", {"x"}, {"y"});
    mb.output("y");
    std::string msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx"); });
    EXPECT_NE(msg.find("opset 29 is newer than 28 (ONNX 1.23's newest)"), std::string::npos)
        << msg;
  }
  {
    // A shape computed at run time where import needs it.
    ModelBuilder mb;
    mb.input("x", {4});
    mb.node("Relu", {"x"}, {"s"});
    mb.node("Reshape", {"x", "s"}, {"y"}, "reshape7");
    mb.output("y");
    std::string msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx"); });
    EXPECT_NE(msg.find("node 'reshape7' (Reshape, node 1): input 1 ('s') must be known when the "
                       "model is imported"),
              std::string::npos) << msg;
  }
  {
    // A shape error from the Tensor API, with the node named.
    ModelBuilder mb;
    mb.input("x", {4, 3});
    mb.input("z", {2, 5});
    mb.node("MatMul", {"x", "z"}, {"y"}, "mm");
    mb.output("y");
    std::string msg = messageOf([&] { import_onnx_bytes(mb.bytes(), "m.onnx"); });
    EXPECT_EQ(msg.rfind("m.onnx: node 'mm' (MatMul, node 0): ", 0), 0u) << msg;
  }
}

// Every prefix of a valid model, and copies with a byte flipped, either
// import or give an Error: never a crash or another exception.
TEST(OnnxImport, DamagedFilesGiveErrors) {
  ModelBuilder mb;
  mb.input("x", {1, 2, 4, 4});
  mb.weights("w", {3, 2, 3, 3}, std::vector<float>(54, 0.5f));
  mb.node("Conv", {"x", "w"}, {"c"});
  mb.node("Relu", {"c"}, {"y"});
  mb.output("y");
  std::string bytes = mb.bytes();
  int errors = 0;
  auto attempt = [&](const std::string &damaged) {
    try {
      import_onnx_bytes(damaged, "damaged.onnx");
    } catch (const Error &) {
      ++errors;
    }
  };
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    attempt(bytes.substr(0, cut));
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    std::string damaged = bytes;
    damaged[rng() % damaged.size()] ^= char(1 << (rng() % 8));
    attempt(damaged);
  }
  EXPECT_GT(errors, int(bytes.size()) / 2) << "most damaged copies must be refused";
  EXPECT_NE(messageOf([] { import_onnx("/nonexistent/model.onnx"); }).find("cannot open"),
            std::string::npos);
}

// Weights stored next to the model (torch.onnx writes them so past 2 GiB)
// are read from inside the model's folder only.
TEST(OnnxImport, ExternalDataIsReadInsideTheModelsFolderOnly) {
  std::string root = ::testing::TempDir() + "kiln-onnx-external";
  std::string dir = root + "/model";
  std::system(("rm -rf " + root + " && mkdir -p " + dir).c_str());
  std::vector<float> w = {1.5f, -2.0f, 0.25f, 4.0f};
  std::ofstream(dir + "/weights.bin", std::ios::binary)
      .write("pad!", 4)
      .write(reinterpret_cast<const char *>(w.data()), 16);
  std::ofstream(root + "/outside.bin", std::ios::binary).write(reinterpret_cast<const char *>(w.data()), 16);
  auto model = [&](const std::string &location, const std::string &offset, const std::string &length) {
    ModelBuilder mb;
    mb.input("x", {4});
    onnx::TensorProto *t = mb.weights("w", {4}, {});
    t->clear_raw_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [key, value] : {std::pair{"location", location}, {"offset", offset}, {"length", length}}) {
      onnx::StringStringEntryProto *e = t->add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
    mb.node("Mul", {"x", "w"}, {"y"});
    mb.output("y");
    std::ofstream(dir + "/m.onnx", std::ios::binary) << mb.bytes();
    return mb.bytes();
  };
  model("weights.bin", "4", "16");
  OnnxModel m = import_onnx(dir + "/m.onnx");
  Device cpu = Device::parse("cpu:0");
  CompileOptions options;
  options.targets = {"cpu"};
  Program p = compile(m.outputs, m.inputs, options);
  EXPECT_EQ(p.run({Tensor::from({2, 2, 2, 2}, {4}, cpu)})[0].to_vector<float>(),
            (std::vector<float>{3, -4, 0.5f, 8}));

  for (const std::string &escape : {std::string("../outside.bin"), root + "/outside.bin"}) {
    model(escape, "0", "16");
    std::string msg = messageOf([&] { import_onnx(dir + "/m.onnx"); });
    EXPECT_NE(msg.find("outside the model's folder"), std::string::npos) << escape << ": " << msg;
  }
  model("weights.bin", "8", "16");
  EXPECT_NE(messageOf([&] { import_onnx(dir + "/m.onnx"); }).find("past the end"), std::string::npos);
  model("weights.bin", "4", "12");
  EXPECT_NE(messageOf([&] { import_onnx(dir + "/m.onnx"); }).find("external data of length 12"),
            std::string::npos);
  model("missing.bin", "0", "16");
  EXPECT_NE(messageOf([&] { import_onnx(dir + "/m.onnx"); }).find("cannot open"), std::string::npos);
  std::string bytes = model("weights.bin", "4", "16");
  EXPECT_NE(messageOf([&] { import_onnx_bytes(bytes, "m.onnx"); }).find("import the model from its path"),
            std::string::npos);
  std::system(("rm -rf " + root).c_str());
}

// kiln-compile takes an .onnx file and --input-shape.
TEST(OnnxImport, KilnCompileTakesOnnxModels) {
  ModelBuilder mb;
  mb.input("image", {-1, 3, 8, 8});
  mb.weights("w", {4, 3, 1, 1}, std::vector<float>(12, 0.25f));
  mb.node("Conv", {"image", "w"}, {"c"});
  mb.node("Sigmoid", {"c"}, {"probs"});
  mb.output("probs");
  std::string dir = ::testing::TempDir() + "kiln-onnx-cli";
  std::system(("mkdir -p " + dir).c_str());
  std::ofstream(dir + "/m.onnx", std::ios::binary) << mb.bytes();
  std::string cmd = std::string(KILN_COMPILE_PATH) + " " + dir + "/m.onnx -o " + dir +
                    "/m.kiln --target cpu --input-shape image=2x3x8x8 --describe > " + dir +
                    "/out.txt 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream out(dir + "/out.txt");
  std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("input image: [2, 3, 8, 8] f32"), std::string::npos) << text;
  EXPECT_NE(text.find("output probs: [2, 4, 8, 8] f32"), std::string::npos) << text;
  // Each input's source, a weight by its initializer's name.
  EXPECT_NE(text.find("model input 'image'"), std::string::npos) << text;
  EXPECT_NE(text.find("weight 'w' [4, 3, 1, 1] f32"), std::string::npos) << text;
  Program p = load(dir + "/m.kiln", Device::parse("cpu:0"));
  std::vector<float> got =
      p.run({Tensor::from(std::vector<float>(2 * 3 * 64, 1.0f), {2, 3, 8, 8})})[0].to_vector<float>();
  ASSERT_EQ(got.size(), 2u * 4 * 64);
  EXPECT_FLOAT_EQ(got[0], 1.0f / (1.0f + std::exp(-0.75f)));
  std::string bad = std::string(KILN_COMPILE_PATH) + " " + dir + "/m.onnx -o " + dir +
                    "/n.kiln > " + dir + "/err.txt 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
  std::ifstream err(dir + "/err.txt");
  std::string errText((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
  EXPECT_NE(errText.find("--input-shape image=1x3x8x8"), std::string::npos) << errText;
}
} // namespace
