// ONNX as exporters write it today: the operator versions of opsets 18 to
// 28 (reduction axes and Pad axes as inputs, Split's num_outputs, Pad's
// wrap mode, Gelu), token ids (int64 inputs into a Gather), and f16 models
// (f16 initializers, casts between precisions), each imported, compiled and
// run on every device against values worked out here.

#include "OnnxModelBuilder.h"
#include "TestUtil.h"
#include "kiln/Import.h"

#include <cmath>

using namespace kiln;
using kiln::test::importAndRun;
using kiln::test::ModelBuilder;

namespace {
class OnnxOpsets : public kiln::test::OnEveryDevice {};

// ReduceMean-18 takes its axes as an input; Split-18 splits into
// num_outputs parts of ceil(size / n); Pad-18 pads the axes it names, and
// Pad-19 wraps around.
TEST_P(OnnxOpsets, Opset18InputsAndAttributes) {
  ModelBuilder mb(18);
  mb.input("x", {2, 5});
  mb.ints("axes", {1}, {1});
  mb.node("ReduceMean", {"x", "axes"}, {"m"});
  onnx::NodeProto *split = mb.node("Split", {"x"}, {"a", "b", "c"});
  ModelBuilder::attr(split, "axis", int64_t(1));
  ModelBuilder::attr(split, "num_outputs", int64_t(3));
  mb.ints("pads", {2}, {1, 2});
  mb.ints("padAxes", {1}, {1});
  mb.node("Pad", {"c", "pads", "", "padAxes"}, {"p"});
  onnx::NodeProto *wrap = mb.node("Pad", {"x", "pads", "", "padAxes"}, {"w"});
  ModelBuilder::attr(wrap, "mode", std::string("wrap"));
  for (const char *out : {"m", "a", "c", "p", "w"})
    mb.output(out);
  mb.model().mutable_opset_import(0)->set_version(19);

  std::vector<float> xs = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<Tensor> y =
      importAndRun(mb.bytes(), {Tensor::from(xs, {2, 5}, *device)}, *device);
  ASSERT_EQ(y.size(), 5u);
  EXPECT_EQ(y[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(y[0].to_vector<float>(), (std::vector<float>{2, 7}));
  EXPECT_EQ(y[1].shape(), (Shape{2, 2})); // ceil(5 / 3) = 2, 2, then 1
  EXPECT_EQ(y[1].to_vector<float>(), (std::vector<float>{0, 1, 5, 6}));
  EXPECT_EQ(y[2].shape(), (Shape{2, 1}));
  EXPECT_EQ(y[2].to_vector<float>(), (std::vector<float>{4, 9}));
  EXPECT_EQ(y[3].to_vector<float>(), (std::vector<float>{0, 4, 0, 0, 0, 9, 0, 0}));
  EXPECT_EQ(y[4].shape(), (Shape{2, 8}));
  EXPECT_EQ(y[4].to_vector<float>(),
            (std::vector<float>{4, 0, 1, 2, 3, 4, 0, 1, 9, 5, 6, 7, 8, 9, 5, 6}));
}

// Gelu is an operator of opset 20 on, exact (erf) or tanh.
TEST_P(OnnxOpsets, Gelu20) {
  ModelBuilder mb(20);
  mb.input("x", {6});
  mb.node("Gelu", {"x"}, {"exact"});
  ModelBuilder::attr(mb.node("Gelu", {"x"}, {"tanh"}), "approximate", std::string("tanh"));
  mb.output("exact");
  mb.output("tanh");
  std::vector<float> xs = {-3, -1, -0.25f, 0, 0.5f, 2};
  std::vector<Tensor> y = importAndRun(mb.bytes(), {Tensor::from(xs, {6}, *device)}, *device);
  std::vector<float> exact = y[0].to_vector<float>(), tanhForm = y[1].to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i];
    EXPECT_NEAR(exact[i], 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), 2e-6) << x;
    double inner = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
    EXPECT_NEAR(tanhForm[i], 0.5 * x * (1 + std::tanh(inner)), 2e-6) << x;
  }
}

// Token ids as PyTorch exports them: an int64 input into a Gather of an
// embedding table (negative ids count from the end, as ONNX says).
TEST_P(OnnxOpsets, Int64TokenIdsGatherAnEmbedding) {
  ModelBuilder mb(20);
  mb.input("ids", {1, 4}, onnx::TensorProto::INT64);
  std::vector<float> table(10 * 3);
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = float(i) * 0.5f;
  mb.weights("table", {10, 3}, table);
  mb.node("Gather", {"table", "ids"}, {"y"});
  mb.output("y");
  OnnxModel m = import_onnx_bytes(mb.bytes(), "model.onnx");
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].dtype(), DType::i32); // int64 is computed as int32
  std::vector<Tensor> y = importAndRun(
      mb.bytes(), {Tensor::from(std::vector<int32_t>{3, 0, 9, -1}, {1, 4}, *device)}, *device);
  EXPECT_EQ(y[0].shape(), (Shape{1, 4, 3}));
  std::vector<float> want;
  for (int row : {3, 0, 9, 9})
    for (int c = 0; c < 3; ++c)
      want.push_back(table[size_t(row * 3 + c)]);
  EXPECT_EQ(y[0].to_vector<float>(), want);
}

// Ids outside the table are refused before the run, naming the input, the
// element and the node they index, also from a saved .kiln; an index
// computed on the device stays inside the table.
TEST_P(OnnxOpsets, TokenIdsOutsideTheTableAreAnError) {
  ModelBuilder mb(20);
  mb.input("ids", {1, 3}, onnx::TensorProto::INT64);
  mb.weights("table", {10, 2}, std::vector<float>(20, 1.0f));
  mb.node("Unsqueeze", {"ids", "zero"}, {"ids4"});
  mb.ints("zero", {1}, {0});
  mb.node("Gather", {"table", "ids4"}, {"y"}, "embed");
  mb.output("y");
  OnnxModel m = import_onnx_bytes(mb.bytes(), "model.onnx");
  CompileOptions options;
  options.targets = {device->api() == "cpu" ? "cpu" : "vulkan"};
  options.input_names = m.input_names;
  Program p = compile(m.outputs, m.inputs, options);
  std::string path = testing::TempDir() + "/ids-" + device->api() + ".kiln";
  p.save(path);
  Program loaded = load(path, *device);
  for (const Program *program : {&p, &loaded}) {
    EXPECT_EQ(program->run({Tensor::from(std::vector<int32_t>{9, -10, 0}, {1, 3}, *device)})[0]
                  .shape(),
              (Shape{1, 1, 3, 2}));
    for (int32_t bad : {10, -11, 1 << 30}) {
      try {
        program->run({Tensor::from(std::vector<int32_t>{1, bad, 2}, {1, 3}, *device)});
        ADD_FAILURE() << "id " << bad << " of a 10-row table ran";
      } catch (const Error &e) {
        std::string what = e.what();
        EXPECT_NE(what.find("input 'ids' holds " + std::to_string(bad) + " at element 1, "
                            "outside -10 <= v < 10: it indexes the 10 entries of axis 0 of "
                            "node 'embed' (Gather, node 1)"),
                  std::string::npos)
            << what;
      }
    }
  }
}

// Integer arithmetic at run time where its values provably fit Kiln's
// int32-through-f32 integers (an ArgMax's index, times 3, plus 100), and an
// error where they may not: ids from an input (no known bound), or a
// product that may reach past 2^24.
TEST_P(OnnxOpsets, IntegerArithmeticWhereItProvablyFits) {
  // "at": the index of each row's largest of x [2, 5], so 0 <= at <= 4.
  auto argMaxOfRows = [](ModelBuilder &m) {
    m.input("x", {2, 5});
    onnx::NodeProto *arg = m.node("ArgMax", {"x"}, {"at"});
    ModelBuilder::attr(arg, "axis", int64_t(1));
    ModelBuilder::attr(arg, "keepdims", int64_t(0));
  };
  ModelBuilder mb(20);
  argMaxOfRows(mb);
  mb.ints("three", {}, {3});
  mb.ints("hundred", {}, {100});
  mb.node("Mul", {"at", "three"}, {"scaled"});
  mb.node("Add", {"scaled", "hundred"}, {"moved"});
  ModelBuilder::attr(mb.node("Cast", {"moved"}, {"y"}), "to", int64_t(onnx::TensorProto::FLOAT));
  mb.output("y");
  std::vector<Tensor> y = importAndRun(
      mb.bytes(),
      {Tensor::from({0, 1, 9, 2, 3, 7, 1, 0, 2, 5}, {2, 5}, *device)}, *device);
  EXPECT_EQ(y[0].to_vector<float>(), (std::vector<float>{106, 100}));

  auto importError = [](const std::string &bytes) {
    try {
      import_onnx_bytes(bytes, "model.onnx");
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("imported");
  };
  ModelBuilder ids(20);
  ids.input("ids", {3}, onnx::TensorProto::INT64);
  ids.ints("one", {}, {1});
  ids.node("Add", {"ids", "one"}, {"next"}, "shift");
  ids.output("next");
  std::string what = importError(ids.bytes());
  EXPECT_NE(what.find("node 'shift' (Add, node 0): integer arithmetic at run time on values Kiln "
                      "cannot bound"),
            std::string::npos)
      << what;
  ModelBuilder big(20);
  argMaxOfRows(big);
  big.ints("huge", {}, {10000000});
  big.node("Mul", {"at", "huge"}, {"y"});
  big.output("y");
  what = importError(big.bytes());
  EXPECT_NE(what.find("may reach 40000000, past the 2^24"), std::string::npos) << what;
}

// An f16 model: f16 weights, an f32 input cast to f16 and the result cast
// back; the f16 product is rounded to f16 as PyTorch's is.
TEST_P(OnnxOpsets, HalfPrecisionWeightsAndCasts) {
  ModelBuilder mb(20);
  mb.input("x", {4});
  onnx::TensorProto *w = mb.model().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT16);
  w->add_dims(4);
  // 1.5, -2, 0.1 (0x2E66 rounds it), 1000
  for (uint16_t bits : {uint16_t(0x3E00), uint16_t(0xC000), uint16_t(0x2E66), uint16_t(0x63D0)})
    w->add_int32_data(bits);
  ModelBuilder::attr(mb.node("Cast", {"x"}, {"xh"}), "to", int64_t(onnx::TensorProto::FLOAT16));
  mb.node("Mul", {"xh", "w"}, {"p"});
  ModelBuilder::attr(mb.node("Cast", {"p"}, {"y"}), "to", int64_t(onnx::TensorProto::FLOAT));
  mb.output("y");
  std::vector<Tensor> y = importAndRun(
      mb.bytes(), {Tensor::from(std::vector<float>{2, 0.5f, 3, 1.001f}, {4}, *device)}, *device);
  ASSERT_EQ(y[0].dtype(), DType::f32);
  // 0.1 in f16 is 0.0999755859375; 3 x that rounds to f16's 0.2998046875.
  // 1.001 in f16 is 1.0009765625; x 1000 = 1000.9765625 rounds to 1001.
  EXPECT_EQ(y[0].to_vector<float>(), (std::vector<float>{3, -1, 0.2998046875f, 1001}));
}

// Einsum: a batched matmul with "...", a transposed contraction with a
// summed letter, and the implicit output of a dot product.
TEST_P(OnnxOpsets, EinsumContractions) {
  ModelBuilder mb(12);
  mb.input("a", {2, 3, 4});
  mb.input("b", {2, 4, 5});
  ModelBuilder::attr(mb.node("Einsum", {"a", "b"}, {"bmm"}), "equation",
                     std::string("...ij,...jk->...ik"));
  // c[k, i] = sum_j,b a[b, i, j] * b[b, j, k]: the batch letter summed too.
  ModelBuilder::attr(mb.node("Einsum", {"a", "b"}, {"t"}), "equation", std::string("bij,bjk->ki"));
  mb.input("v", {4});
  ModelBuilder::attr(mb.node("Einsum", {"v", "v"}, {"dot"}), "equation", std::string("i,i"));
  for (const char *out : {"bmm", "t", "dot"})
    mb.output(out);
  std::vector<float> as(24), bs(40), vs = {1, -2, 3, 0.5f};
  for (size_t i = 0; i < as.size(); ++i)
    as[i] = float(i % 7) - 3;
  for (size_t i = 0; i < bs.size(); ++i)
    bs[i] = float(i % 5) * 0.5f - 1;
  Tensor a = Tensor::from(as, {2, 3, 4}, *device), b = Tensor::from(bs, {2, 4, 5}, *device);
  std::vector<Tensor> y =
      importAndRun(mb.bytes(), {a, b, Tensor::from(vs, {4}, *device)}, *device);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0].shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(y[0].to_vector<float>(), matmul(a, b).to_vector<float>());
  EXPECT_EQ(y[1].shape(), (Shape{5, 3}));
  std::vector<float> t = y[1].to_vector<float>();
  for (int k = 0; k < 5; ++k)
    for (int i = 0; i < 3; ++i) {
      float want = 0;
      for (int bb = 0; bb < 2; ++bb)
        for (int j = 0; j < 4; ++j)
          want += as[size_t((bb * 3 + i) * 4 + j)] * bs[size_t((bb * 4 + j) * 5 + k)];
      EXPECT_FLOAT_EQ(t[size_t(k * 3 + i)], want) << k << "," << i;
    }
  EXPECT_EQ(y[2].shape(), Shape{});
  EXPECT_FLOAT_EQ(y[2].to_vector<float>()[0], 1 + 4 + 9 + 0.25f);
}
// RMSNormalization-23 (a Llama block's norm as one operator) and Swish-24.
TEST_P(OnnxOpsets, RmsNormAndSwish) {
  ModelBuilder mb(24);
  mb.input("x", {2, 4});
  mb.weights("scale", {4}, {1, 2, 0.5f, -1});
  ModelBuilder::attr(mb.node("RMSNormalization", {"x", "scale"}, {"n"}), "epsilon", 1e-3f);
  ModelBuilder::attr(mb.node("Swish", {"x"}, {"s"}), "alpha", 2.0f);
  mb.output("n");
  mb.output("s");
  std::vector<float> xs = {1, -2, 3, 0.5f, 0, 0.25f, -1, 2};
  std::vector<Tensor> y = importAndRun(mb.bytes(), {Tensor::from(xs, {2, 4}, *device)}, *device);
  std::vector<float> n = y[0].to_vector<float>(), sw = y[1].to_vector<float>();
  float scale[4] = {1, 2, 0.5f, -1};
  for (int r = 0; r < 2; ++r) {
    double squares = 0;
    for (int c = 0; c < 4; ++c)
      squares += xs[size_t(r * 4 + c)] * xs[size_t(r * 4 + c)];
    double inv = 1 / std::sqrt(squares / 4 + 1e-3);
    for (int c = 0; c < 4; ++c)
      EXPECT_NEAR(n[size_t(r * 4 + c)], xs[size_t(r * 4 + c)] * inv * scale[c], 2e-6);
  }
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(sw[i], xs[i] / (1 + std::exp(-2.0 * xs[i])), 2e-6) << i;
}
} // namespace

KILN_ON_EVERY_DEVICE(OnnxOpsets);
