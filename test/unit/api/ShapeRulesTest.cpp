// One home for shape rules (ShapeRules.h): the Tensor API's recorded shapes,
// the dialect's inferred result types and the errors of both agree, over
// random shapes and attributes of every op family.

#include "TestUtil.h"

#include "dialects/Kiln/KilnDialect.h"
#include "dialects/Kiln/ShapeRules.h"
#include "kiln/Codegen/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <functional>
#include <numeric>
#include <random>

using namespace kiln;

namespace {
struct Dialect {
  mlir::MLIRContext ctx;
  Dialect() {
    mlir::DialectRegistry registry;
    registerKilnDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }
  /// Parses and verifies (the InferTypeOpInterface check included); the
  /// diagnostics, or "" when the module is valid.
  std::string verify(const std::string &text) {
    std::string diagnostics;
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return mlir::success();
    });
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    if (module && mlir::succeeded(mlir::verify(*module)) && diagnostics.empty())
      return "";
    return diagnostics.empty() ? "invalid" : diagnostics;
  }
};

Shape randomShape(std::mt19937 &rng, size_t rank, int64_t maxDim) {
  Shape s(rank);
  for (int64_t &d : s)
    d = std::uniform_int_distribution<int64_t>(1, maxDim)(rng);
  return s;
}

/// A shape that broadcasts with `s`: some dimensions set to 1, some leading
/// ones dropped.
Shape broadcastPartner(std::mt19937 &rng, const Shape &s) {
  size_t drop = std::uniform_int_distribution<size_t>(0, s.size())(rng);
  Shape t(s.begin() + drop, s.end());
  for (int64_t &d : t)
    if (rng() % 3 == 0)
      d = 1;
  return t;
}

TEST(ShapeRules, TensorApiShapesVerifyAsTheDialectInfersThem) {
  // Every recorded op becomes a kiln op with the Tensor API's shape as its
  // result type; the exported module verifies only where the dialect infers
  // that same type.
  Dialect dialect;
  std::mt19937 rng(7);
  std::string all; // every round's IR: each op kind must have been checked
  for (int round = 0; round < 40; ++round) {
    std::vector<Tensor> outs;
    Shape a = randomShape(rng, 1 + rng() % 4, 5);
    Tensor x = Tensor::zeros(a), y = Tensor::zeros(broadcastPartner(rng, a));
    outs.push_back(x + y);
    outs.push_back(where(gt(x, y), y, x));
    std::vector<int64_t> axes;
    for (size_t d = 0; d < a.size(); ++d)
      if (rng() % 2)
        axes.push_back(static_cast<int64_t>(d));
    outs.push_back(sum(x, axes, rng() % 2 == 0));
    outs.push_back(argmax(x, static_cast<int64_t>(rng() % a.size()), rng() % 2 == 0).to(DType::f32));
    std::vector<int64_t> order(a.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    outs.push_back(x.permute(order) * 1.0f);
    std::vector<int64_t> low(a.size()), high(a.size());
    for (size_t d = 0; d < a.size(); ++d)
      low[d] = rng() % 3, high[d] = rng() % 3;
    outs.push_back(pad(x, low, high));
    int64_t axis = static_cast<int64_t>(rng() % a.size());
    Shape other = a;
    other[axis] = 1 + rng() % 4;
    outs.push_back(concat({x, Tensor::zeros(other)}, axis));
    outs.push_back(index_select(x, axis, std::vector<int64_t>{0, a[axis] - 1, 0}));
    int64_t m = 1 + rng() % 6, k = 1 + rng() % 6, n = 1 + rng() % 6;
    Shape batch = randomShape(rng, rng() % 3, 3);
    Shape lhs = batch, rhs = broadcastPartner(rng, batch);
    lhs.insert(lhs.end(), {m, k});
    rhs.insert(rhs.end(), {k, n});
    outs.push_back(matmul(Tensor::zeros(lhs), Tensor::zeros(rhs)));
    int64_t groups = 1 + rng() % 3, cin = groups * (1 + rng() % 2), cout = groups * (1 + rng() % 2);
    int64_t kh = 1 + rng() % 3, kw = 1 + rng() % 3;
    Tensor image = Tensor::zeros({1 + int64_t(rng() % 2), cin, 6 + int64_t(rng() % 5), 6 + int64_t(rng() % 5)});
    outs.push_back(conv2d(image, Tensor::zeros({cout, cin / groups, kh, kw}),
                          {1 + int64_t(rng() % 2), 1 + int64_t(rng() % 2)},
                          {int64_t(rng() % 2), int64_t(rng() % 2)},
                          {1 + int64_t(rng() % 2), 1}, groups));
    int64_t pk = 2 + rng() % 2, ps = 1 + rng() % 3;
    bool ceil = rng() % 2;
    outs.push_back(max_pool2d(image, {pk, pk}, {ps, ps}, {int64_t(rng() % 2), 0}, ceil));
    std::string text = export_graph(outs);
    EXPECT_EQ(dialect.verify(text), "") << "round " << round << "\n" << text;
    all += text;
  }
  for (const char *op : {"kiln.add", "kiln.cmp", "kiln.select", "kiln.reduce", "kiln.arg_reduce",
                         "kiln.transpose", "kiln.pad", "kiln.concat", "kiln.gather",
                         "kiln.matmul", "kiln.conv2d", "kiln.pool2d", "ceil_mode"})
    EXPECT_NE(all.find(op), std::string::npos) << op;
}

TEST(ShapeRules, TheApiAndTheVerifierGiveOneReason) {
  // The same wrong shapes, recorded and written as IR: both say the rule's
  // reason.
  Dialect dialect;
  struct Case {
    std::function<void()> record;
    std::string ir;
    std::string reason;
  };
  std::vector<Case> cases = {
      {[] { (void)(Tensor::zeros({4, 3}) + Tensor::zeros({5})); },
       "%r = kiln.add %a, %b : tensor<4x3xf32>, tensor<5xf32> -> tensor<4x3xf32>",
       "shapes [4, 3] and [5] do not broadcast (dimension 1: 3 vs 5)"},
      {[] { (void)matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); },
       "%r = kiln.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>",
       "[2, 3] x [4, 5]: the contracted dimensions (3 and 4) differ"},
      {[] { (void)conv2d(Tensor::zeros({1, 4, 8, 8}), Tensor::zeros({6, 3, 3, 3})); },
       "%r = kiln.conv2d %a, %b strides [1, 1] padding [0, 0] dilation [1, 1] groups 1 : "
       "tensor<1x4x8x8xf32>, tensor<6x3x3x3xf32> -> tensor<1x6x6x6xf32>",
       "1 groups do not fit 4 input channels and a filter [6, 3, 3, 3]"},
      {[] { (void)max_pool2d(Tensor::zeros({1, 1, 2, 2}), {3, 3}, {1, 1}); },
       "%r = kiln.pool2d max %a kernel [3, 3] strides [1, 1] padding [0, 0] : "
       "tensor<1x1x2x2xf32> -> tensor<1x1x1x1xf32>",
       "the window (3) is larger than the padded input (2)"},
      {[] { (void)concat({Tensor::zeros({4, 3}), Tensor::zeros({5, 2})}, 1); },
       "%r = kiln.concat %a, %b axis 1 : (tensor<4x3xf32>, tensor<5x2xf32>) -> tensor<4x5xf32>",
       "[5, 2] and [4, 3] differ off axis 1"},
  };
  for (const Case &c : cases) {
    std::string thrown;
    try {
      c.record();
    } catch (const Error &e) {
      thrown = e.what();
    }
    EXPECT_NE(thrown.find(c.reason), std::string::npos) << thrown;
    // The operand types are the IR's own: %a and %b as function arguments.
    std::string ir = c.ir;
    size_t colon = ir.rfind(" : ") + 3, arrow = ir.rfind(" -> ");
    std::string types = ir.substr(colon, arrow - colon);
    if (types.front() == '(')
      types = types.substr(1, types.size() - 2);
    std::string args = types.find(", ") == std::string::npos
                           ? "%a: " + types
                           : "%a: " + types.substr(0, types.find(", ")) +
                                 ", %b: " + types.substr(types.find(", ") + 2);
    std::string module = "func.func @f(" + args + ") {\n  " + ir + "\n  return\n}\n";
    std::string diagnostics = dialect.verify(module);
    EXPECT_NE(diagnostics.find(c.reason), std::string::npos) << module << diagnostics;
  }
}

TEST(ShapeRules, OpsBuiltWithoutResultTypesInferThem) {
  Dialect dialect;
  mlir::OpBuilder b(&dialect.ctx);
  mlir::Location loc = b.getUnknownLoc();
  auto module = mlir::ModuleOp::create(loc);
  b.setInsertionPointToEnd(module.getBody());
  auto f32 = b.getF32Type();
  auto t = [&](Shape s) { return mlir::RankedTensorType::get(s, f32); };
  auto func = mlir::func::FuncOp::create(
      b, loc, "f", b.getFunctionType({t({4, 1}), t({3}), t({2, 3, 5}), t({1, 2, 9, 9})}, {}));
  mlir::Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  auto add = AddOp::create(b, loc, body->getArgument(0), body->getArgument(1), DeviceAttr());
  EXPECT_EQ(add.getType().getShape(), llvm::ArrayRef<int64_t>({4, 3}));
  auto mm = MatmulOp::create(b, loc, add.getResult(), body->getArgument(2), DeviceAttr());
  EXPECT_EQ(mm.getType().getShape(), llvm::ArrayRef<int64_t>({2, 4, 5}));
  auto red = ReduceOp::create(b, loc, ReduceKind::sum, mm.getResult(),
                              llvm::ArrayRef<int64_t>{0, 2}, /*keepdims=*/true, DeviceAttr());
  EXPECT_EQ(red.getType().getShape(), llvm::ArrayRef<int64_t>({1, 4, 1}));
  auto pool = Pool2dOp::create(b, loc, ReduceKind::max, body->getArgument(3),
                               llvm::ArrayRef<int64_t>{3, 3}, llvm::ArrayRef<int64_t>{2, 2},
                               llvm::ArrayRef<int64_t>{0, 0}, /*ceil_mode=*/true, DeviceAttr());
  EXPECT_EQ(pool.getType().getShape(), llvm::ArrayRef<int64_t>({1, 2, 4, 4}));
  mlir::func::ReturnOp::create(b, loc);
  EXPECT_TRUE(mlir::succeeded(mlir::verify(module)));
  module->erase();
}

TEST(ShapeRules, RulesByThemselves) {
  using namespace shapes;
  EXPECT_EQ(broadcast({Shape{4, 1}, Shape{3}, Shape{2, 1, 1}}).shape, (Shape{2, 4, 3}));
  EXPECT_EQ(reduce({2, 3, 4}, {1}, false).shape, (Shape{2, 4}));
  EXPECT_NE(reduce({2, 3}, {1, 1}, false).error, "");
  EXPECT_EQ(pool2d({1, 1, 8, 8}, {3, 3}, {2, 2}, {0, 0}, false).shape, (Shape{1, 1, 3, 3}));
  EXPECT_EQ(pool2d({1, 1, 8, 8}, {3, 3}, {2, 2}, {0, 0}, true).shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ(conv2d({1, 4, 9, 9}, {8, 2, 3, 3}, {2, 2}, {1, 1}, {2, 2}, 2).shape,
            (Shape{1, 8, 4, 4}));
  EXPECT_NE(pad({3}, {INT64_MAX}, {1}).error.find("overflows"), std::string::npos);
  // Sizes near 2^63 are refused or counted, never wrapped.
  EXPECT_NE(conv2d({1, 1, 8, 8}, {1, 1, 3, 3}, {1, 1}, {INT64_MAX / 2 + 1, 0}, {1, 1}, 1)
                .error.find("padding"),
            std::string::npos);
  EXPECT_NE(conv2d({1, 1, 8, 8}, {1, 1, 3, 3}, {1, 1}, {0, 0}, {INT64_MAX, 1}, 1)
                .error.find("dilation"),
            std::string::npos);
  EXPECT_EQ(pool2d({1, 1, 8, 8}, {2, 2}, {INT64_MAX, INT64_MAX}, {0, 0}, true).shape,
            (Shape{1, 1, 1, 1}));
  EXPECT_NE(pool2d({1, 1, 8, 8}, {3, 3}, {1, 1}, {INT64_MAX, 0}, false).error, "");
  EXPECT_EQ(checkSlice({8}, {7}, {-3}, {3}), "");
  EXPECT_NE(checkSlice({8}, {0}, {INT64_MAX}, {3}), "");
  EXPECT_EQ(checkReshape({4, 3}, {2, 6}), "");
  EXPECT_NE(checkBroadcastTo({4, 3}, {4, 1}), "");
}
} // namespace
