// Ahead of time: compile a model written with the Tensor API,
// save it, load it, run it in this process and with kiln-run (the runtime
// alone), and get the JIT's results bit for bit on the same device.

#include "TestUtil.h"
#include "TransformerReference.h"

#include "kiln/runtime/CpuLibrary.h"
#include "kiln/runtime/Npy.h"
#include "kiln/runtime/Vulkan.h"
#include "kiln/runtime/Artifact.h"

#include <cstdio>
#include <elf.h>
#include <cstring>
#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <thread>

using namespace kiln;

namespace {
std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/kiln-aot-" + std::to_string(::getpid()) +
         "-" + name;
}

std::optional<Device> vulkanOrSkip() {
  for (const Device &d : kiln::test::availableDevices())
    if (d.api() == "vulkan")
      return d;
  return std::nullopt;
}

/// An MLP block, a CNN block and a transformer block, as a model would
/// write them.
struct Blocks {
  static constexpr int64_t T = 8, D = 32, H = 4, F = 64;
  Tensor w1, b1, g, beta, filter, mean, var, gamma, shift;
  Tensor wq, wk, wv, wo, bq, bk, bv, bo, g1, n1, g2, n2, f1, c1, f2, c2;
  explicit Blocks(const Device &device) {
    manual_seed(7);
    w1 = Tensor::randn({32, 16}, device);
    b1 = Tensor::randn({32}, device);
    g = Tensor::rand({32}, device);
    beta = Tensor::randn({32}, device);
    filter = Tensor::randn({8, 3, 3, 3}, device);
    mean = Tensor::randn({8}, device);
    var = Tensor::rand({8}, device) + 0.5f;
    gamma = Tensor::rand({8}, device);
    shift = Tensor::randn({8}, device);
    for (Tensor *w : {&wq, &wk, &wv, &wo})
      *w = Tensor::randn({D, D}, device) * 0.2f;
    for (Tensor *b : {&bq, &bk, &bv, &bo, &n1, &n2})
      *b = Tensor::randn({D}, device) * 0.1f;
    g1 = Tensor::rand({D}, device) + 0.5f;
    g2 = Tensor::rand({D}, device) + 0.5f;
    f1 = Tensor::randn({F, D}, device) * 0.2f;
    c1 = Tensor::randn({F}, device) * 0.1f;
    f2 = Tensor::randn({D, F}, device) * 0.2f;
    c2 = Tensor::randn({D}, device) * 0.1f;
    // Weights are data, as a trained model's are. Left lazy, `randn * 0.2`
    // is computed once by compile and stored, while each JIT graph computes
    // it again, fused into whichever kernel reads it: on a GPU that
    // contracts multiply-adds per kernel (NVIDIA's), those are not the
    // program's kernels and round differently (the H200). The
    // CNN's stay lazy: realized, its batch norm would be folded into the
    // convolution (FoldBatchNormTest), which agrees within rounding only.
    realize({w1, b1, g, beta, wq, wk, wv, wo, bq, bk, bv, bo, g1, n1, g2, n2, f1, c1, f2, c2});
  }
  /// The same weights on `device`.
  Blocks on(const Device &device) const {
    Blocks out = *this;
    for (Tensor *t : {&out.w1, &out.b1, &out.g, &out.beta, &out.filter, &out.mean, &out.var,
                      &out.gamma, &out.shift, &out.wq, &out.wk, &out.wv, &out.wo, &out.bq,
                      &out.bk, &out.bv, &out.bo, &out.g1, &out.n1, &out.g2, &out.n2, &out.f1,
                      &out.c1, &out.f2, &out.c2})
      *t = t->to(device);
    return out;
  }
  Tensor mlp(const Tensor &x) const { return layer_norm(relu(linear(x, w1, b1)), g, beta); }
  Tensor cnn(const Tensor &image) const {
    Tensor y = relu(batch_norm(conv2d(image, filter, {1, 1}, {1, 1}), mean, var, gamma, shift));
    return global_avg_pool2d(max_pool2d(y, {2, 2}, {2, 2}));
  }
  std::vector<double> reference(const Tensor &x) const {
    using kiln::test::toDouble;
    kiln::test::TransformerRef r{T, D, H, F};
    r.x = toDouble(x);
    r.g1 = toDouble(g1), r.b1 = toDouble(n1), r.g2 = toDouble(g2), r.b2 = toDouble(n2);
    r.wq = toDouble(wq), r.wk = toDouble(wk), r.wv = toDouble(wv), r.wo = toDouble(wo);
    r.bq = toDouble(bq), r.bk = toDouble(bk), r.bv = toDouble(bv), r.bo = toDouble(bo);
    r.w1 = toDouble(f1), r.c1 = toDouble(c1), r.w2 = toDouble(f2), r.c2 = toDouble(c2);
    return kiln::test::transformerReference(r);
  }
  /// Pre-norm attention and MLP with residuals, heads split with views.
  Tensor transformer(const Tensor &x) const {
    const int64_t Dh = D / H;
    Tensor h = layer_norm(x, g1, n1);
    Tensor q = linear(h, wq, bq).reshape({T, H, Dh}).permute({1, 0, 2});
    Tensor k = linear(h, wk, bk).reshape({T, H, Dh}).permute({1, 2, 0});
    Tensor v = linear(h, wv, bv).reshape({T, H, Dh}).permute({1, 0, 2});
    Tensor p = softmax(matmul(q, k) * (1.0f / std::sqrt(float(Dh))), -1);
    Tensor x1 = linear(matmul(p, v).permute({1, 0, 2}).reshape({T, D}), wo, bo) + x;
    return linear(gelu(linear(layer_norm(x1, g2, n2), f1, c1)), f2, c2) + x1;
  }
};

/// The targets this machine can run: cpu, and vulkan when it has a device.
std::vector<std::string> targetsHere() {
  std::vector<std::string> targets = {"cpu"};
  if (vulkanOrSkip())
    targets.insert(targets.begin(), "vulkan");
  return targets;
}

Device deviceOf(const std::string &target) {
  return target == "cpu" ? Device::cpu() : *vulkanOrSkip();
}

/// One .kiln with every target here; loaded on each device, in a process
/// that only loads, it computes what the JIT computes there, bit for bit.
TEST(Aot, CompiledProgramsMatchTheJitBitForBit) {
  std::vector<std::string> targets = targetsHere();
  Device first = deviceOf(targets.front());
  Blocks blocks(first);
  Tensor x = Tensor::randn({4, 16}, first), image = Tensor::randn({2, 3, 8, 8}, first),
         tokens = Tensor::randn({Blocks::T, Blocks::D}, first);
  Program program =
      compile({blocks.mlp(x), blocks.cnn(image), blocks.transformer(tokens)}, {x, image, tokens},
              {targets, {"x", "image", "tokens"}, {"features", "pooled", "encoded"}});
  std::string path = tempPath("blocks.kiln");
  program.save(path);
  for (const std::string &target : targets) {
    SCOPED_TRACE(target);
    Device device = deviceOf(target);
    Blocks here = blocks.on(device);
    Program loaded = load(path, device);
    EXPECT_EQ(loaded.signature(), "input x: [4, 16] f32\ninput image: [2, 3, 8, 8] f32\n"
                                  "input tokens: [8, 32] f32\noutput features: [4, 32] f32\n"
                                  "output pooled: [2, 8, 1, 1] f32\n"
                                  "output encoded: [8, 32] f32\n");
    for (int round = 0; round < 2; ++round) {
      Tensor x2 = Tensor::randn({4, 16}, device), image2 = Tensor::randn({2, 3, 8, 8}, device),
             tokens2 = Tensor::randn({Blocks::T, Blocks::D}, device);
      std::vector<Tensor> fromFile = loaded.run({x2, image2, tokens2});
      EXPECT_EQ(fromFile[0].to_vector(), here.mlp(x2).to_vector()) << "round " << round;
      EXPECT_EQ(fromFile[1].to_vector(), here.cnn(image2).to_vector()) << "round " << round;
      std::vector<float> jit = here.transformer(tokens2).to_vector();
      EXPECT_EQ(fromFile[2].to_vector(), jit) << "round " << round;
      EXPECT_EQ(fromFile[0].device(), device);
      if (target == targets.front()) {
        EXPECT_EQ(program.run({x2, image2, tokens2})[2].to_vector(), jit);
      }
      // And float64's answer within the usual tolerance.
      EXPECT_TRUE(kiln::test::allClose(jit, here.reference(tokens2), 1e-4, 1e-5));
    }
  }
  std::remove(path.c_str());
}

// Causal attention compiles to constants that hold every element (the
// decomposition's row and column indices, off the CPU): the file keeps
// them, and loads and runs on every target.
TEST(Aot, CausalAttentionRunsFromTheFile) {
  std::vector<std::string> targets = targetsHere();
  Device first = deviceOf(targets.front());
  Tensor x = Tensor::randn({2, 40, 16}, first);
  Program program = compile({scaled_dot_product_attention(x, x, x, Tensor(), true)}, {x},
                            {targets, {"x"}, {"y"}});
  std::string path = tempPath("attention.kiln");
  program.save(path);
  for (const std::string &target : targets) {
    SCOPED_TRACE(target);
    Device device = deviceOf(target);
    Program loaded = load(path, device);
    Tensor x2 = Tensor::randn({2, 40, 16}, device);
    std::vector<float> jit =
        scaled_dot_product_attention(x2, x2, x2, Tensor(), true).to_vector<float>();
    std::vector<double> want(jit.begin(), jit.end());
    EXPECT_TRUE(kiln::test::allClose(loaded.run({x2})[0].to_vector<float>(), want, 1e-5, 1e-6));
  }
  std::remove(path.c_str());
}

/// On Vulkan a loaded model is replayed: one submit per run whatever its
/// kernel count (inputs uploaded and outputs copied out in the same submit),
/// with the results of the step-by-step interpreter, bit for bit.
TEST(Aot, VulkanRunsAreOneSubmit) {
  std::optional<Device> gpu = vulkanOrSkip();
  if (!gpu)
    GTEST_SKIP() << "needs a Vulkan device";
  Blocks blocks(*gpu);
  Tensor tokens = Tensor::randn({Blocks::T, Blocks::D}, *gpu);
  std::string path = tempPath("replay.kiln");
  compile({blocks.transformer(tokens)}, {tokens}, {{"vulkan"}}).save(path);
  rt::StatusOr<rt::Artifact> artifact = rt::loadArtifact(path);
  ASSERT_TRUE(artifact.isOk()) << artifact.status().toString();
  auto shared = std::make_shared<const rt::Artifact>(std::move(*artifact));
  rt::StatusOr<rt::VulkanContext *> context = rt::VulkanContext::get();
  ASSERT_TRUE(context.isOk());
  rt::StatusOr<rt::VulkanDevice *> device = (*context)->device(0);
  ASSERT_TRUE(device.isOk());
  rt::StatusOr<std::unique_ptr<rt::Model>> model = rt::Model::create(shared, **device);
  ASSERT_TRUE(model.isOk()) << model.status().toString();
  size_t kernels = shared->programs[0].program->kernels.size();
  ASSERT_GT(kernels, 5u);
  auto download = [&](rt::Buffer &buffer) {
    std::vector<float> out(buffer.size() / 4);
    EXPECT_TRUE((*device)->download(buffer, out.data(), buffer.size()).isOk());
    return out;
  };
  // The first run uploads the weights and records the dispatches.
  std::vector<float> first = Tensor::randn({Blocks::T, Blocks::D}).to_vector();
  ASSERT_TRUE((*model)->run({{nullptr, first.data()}}).isOk());
  for (int round = 0; round < 3; ++round) {
    std::vector<float> x = Tensor::randn({Blocks::T, Blocks::D}).to_vector();
    rt::RunOptions interpreted;
    interpreted.poisonResults = true; // forces the step-by-step path
    rt::StatusOr<rt::RunResult> stepwise = (*model)->run({{nullptr, x.data()}}, interpreted);
    ASSERT_TRUE(stepwise.isOk()) << stepwise.status().toString();
    ASSERT_TRUE((*device)->flush().isOk());
    (*device)->resetStats();
    rt::StatusOr<rt::RunResult> replayed = (*model)->run({{nullptr, x.data()}});
    ASSERT_TRUE(replayed.isOk()) << replayed.status().toString();
    rt::DeviceStats stats = (*device)->stats();
    EXPECT_EQ(stats.submits, 1u) << "round " << round;
    EXPECT_EQ(stats.dispatches, kernels);
    EXPECT_EQ(stats.pipelinesCreated, 0u);
    EXPECT_EQ(download(*replayed->outputs[0]), download(*stepwise->outputs[0]));
  }
  std::remove(path.c_str());
}

/// The transformer, CNN and MLP blocks in one .kiln with vulkan and cpu
/// code, run by kiln-run (the runtime alone) and by kiln::load in a process
/// that builds no graph, on every device here: the JIT's results, bit for
/// bit.
TEST(Aot, KilnRunGivesTheJitsResults) {
  std::vector<std::string> targets = targetsHere();
  Device cpu = Device::cpu();
  Blocks blocks(cpu);
  Tensor x = Tensor::randn({4, 16}, cpu), image = Tensor::randn({2, 3, 8, 8}, cpu),
         tokens = Tensor::randn({Blocks::T, Blocks::D}, cpu);
  std::string model = tempPath("blocks-run.kiln");
  compile({blocks.mlp(x), blocks.cnn(image), blocks.transformer(tokens)}, {x, image, tokens},
          {targets, {"x", "image", "tokens"}, {"features", "pooled", "encoded"}})
      .save(model);
  auto writeInput = [&](const Tensor &t, const std::string &name) {
    std::vector<float> values = t.to_vector();
    rt::NpyArray array;
    array.type = {t.shape(), rt::ElementType::f32};
    array.data.resize(values.size() * 4);
    std::memcpy(array.data.data(), values.data(), array.data.size());
    std::string path = tempPath(name + ".npy");
    EXPECT_TRUE(rt::writeNpy(path, array).isOk());
    return path;
  };
  std::string xs = writeInput(x, "x"), images = writeInput(image, "image"),
              tokenss = writeInput(tokens, "tokens");
  auto readOutput = [](const std::string &path) {
    rt::StatusOr<rt::NpyArray> y = rt::readNpy(path);
    EXPECT_TRUE(y.isOk()) << y.status().toString();
    std::vector<float> got(y.isOk() ? y->data.size() / 4 : 0);
    if (y.isOk())
      std::memcpy(got.data(), y->data.data(), y->data.size());
    return got;
  };
  std::vector<std::string> outs = {tempPath("y0.npy"), tempPath("y1.npy"), tempPath("y2.npy")};
  for (const std::string &target : targets) {
    SCOPED_TRACE(target);
    Device device = deviceOf(target);
    Blocks here = blocks.on(device);
    std::vector<std::vector<float>> jit = {here.mlp(x.to(device)).to_vector(),
                                           here.cnn(image.to(device)).to_vector(),
                                           here.transformer(tokens.to(device)).to_vector()};
    std::string run = std::string(KILN_RUN_PATH) + " " + model + " --device " + device.name() +
                      " --input x=" + xs + " --input image=" + images + " --input tokens=" +
                      tokenss + " --output features=" + outs[0] + " --output pooled=" +
                      outs[1] + " --output encoded=" + outs[2] + " 2>&1";
    ASSERT_EQ(std::system(run.c_str()), 0) << run;
    for (int o = 0; o < 3; ++o)
      EXPECT_EQ(readOutput(outs[o]), jit[o]) << "kiln-run output " << o;
    std::string load = std::string(KILN_LOAD_AND_RUN_PATH) + " " + model + " " + device.name() +
                       " " + xs + " " + images + " " + tokenss + " -- " + outs[0] + " " +
                       outs[1] + " " + outs[2] + " 2>&1";
    FILE *pipe = popen(load.c_str(), "r");
    std::string said;
    char line[512];
    while (fgets(line, sizeof line, pipe))
      said += line;
    ASSERT_EQ(pclose(pipe), 0) << said;
    EXPECT_NE(said.find("graphs compiled in this process: 0, kernels compiled: 0"),
              std::string::npos) << said;
    for (int o = 0; o < 3; ++o)
      EXPECT_EQ(readOutput(outs[o]), jit[o]) << "kiln::load output " << o;
  }
  for (const std::string &p : {images, outs[1], outs[2]})
    std::remove(p.c_str());
  // A wrong input file is a clear error, not a crash.
  rt::NpyArray array;
  std::string in = xs, out = outs[0];
  array.type = {{4, 8}, rt::ElementType::f32};
  array.data.resize(4 * 8 * 4);
  ASSERT_TRUE(rt::writeNpy(in, array).isOk());
  std::string wrong = std::string(KILN_RUN_PATH) + " " + model + " --input x=" + in + " 2>&1";
  FILE *pipe = popen(wrong.c_str(), "r");
  std::string text;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe))
    text += buffer;
  EXPECT_NE(pclose(pipe), 0);
  EXPECT_NE(text.find("holds [4, 8] f32; input 'x' is [4, 16] f32"), std::string::npos) << text;
  // The right shape in another dtype: the error says how to convert it.
  array.type = {{4, 16}, rt::ElementType::i32};
  array.data.assign(4 * 16 * 4, 0);
  ASSERT_TRUE(rt::writeNpy(in, array).isOk());
  pipe = popen(wrong.c_str(), "r");
  text.clear();
  while (fgets(buffer, sizeof buffer, pipe))
    text += buffer;
  EXPECT_NE(pclose(pipe), 0);
  EXPECT_NE(text.find("holds [4, 16] i32; input 'x' is [4, 16] f32: save it converted (NumPy: "
                      "np.save(path, a.astype(np.float32)))"),
            std::string::npos)
      << text;
  // The same input twice is refused, not silently the last one.
  std::string twice = std::string(KILN_RUN_PATH) + " " + model + " --input tokens=" +
                      tokenss + " --input tokens=" + tokenss + " 2>&1";
  pipe = popen(twice.c_str(), "r");
  text.clear();
  while (fgets(buffer, sizeof buffer, pipe))
    text += buffer;
  EXPECT_NE(pclose(pipe), 0);
  EXPECT_NE(text.find("input 'tokens' is given twice"), std::string::npos) << text;
  for (const std::string &p : {model, in, out, tokenss})
    std::remove(p.c_str());
}

TEST(Aot, MistakesAreClearErrors) {
  std::optional<Device> gpu = vulkanOrSkip();
  if (!gpu)
    GTEST_SKIP() << "needs a Vulkan device";
  Blocks blocks(*gpu);
  Tensor x = Tensor::randn({4, 16}, *gpu);
  Tensor y = blocks.mlp(x);
  std::string computed = kiln::test::messageOf<Error>([&] { compile({y}, {kiln::exp(x)}); });
  EXPECT_NE(computed.find("is computed from other tensors"), std::string::npos) << computed;
  Program program = compile({y}, {x}, {{"vulkan", "cpu"}});
  EXPECT_EQ(program.targets(), "vulkan, cpu");
  std::string path = tempPath("both.kiln");
  std::string isa = kiln::test::messageOf<Error>(
      [&] { compile({blocks.mlp(x)}, {x}, {{"cpu"}, {}, {}, "pentium"}); });
  EXPECT_NE(isa.find("unknown CPU ISA level 'pentium': use one of host, x86-64, x86-64-v2"),
            std::string::npos) << isa;
  Program vulkanOnly = compile({blocks.mlp(x)}, {x}, {{"vulkan"}});
  vulkanOnly.save(path);
  std::string noCpu = kiln::test::messageOf<Error>([&] { load(path, Device::cpu()); });
  EXPECT_NE(noCpu.find("compiled for: vulkan"), std::string::npos) << noCpu;
  std::string shape = kiln::test::messageOf<Error>(
      [&] { load(path, *gpu).run({Tensor::randn({4, 8})}); });
  EXPECT_NE(shape.find("is [4, 8] f32; the program was compiled for [4, 16] f32"),
            std::string::npos) << shape;
  (void)y.to_vector();
  std::string read = kiln::test::messageOf<Error>([&] { compile({y}, {x}); });
  EXPECT_NE(read.find("compile before reading it"), std::string::npos) << read;
  std::remove(path.c_str());
}

TEST(Aot, ExportedGraphsCompileLikeTheRecordedOnes) {
  Device cpu = Device::cpu();
  Tensor x = Tensor::randn({4, 16}, cpu), w = Tensor::randn({8, 16}, cpu);
  Tensor y = softmax(linear(x, w, Tensor::zeros({8})), -1) * 3.0f;
  std::string text = export_graph({y});
  EXPECT_NE(text.find("kiln.matmul"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln.input 0 on \"cpu:0\""), std::string::npos) << text;
  Program program = compile_graph(text, "exported.mlir", {{"cpu"}});
  EXPECT_EQ(program.signature(), "input input0: [4, 16] f32\ninput input1: [8, 16] f32\n"
                                 "output output0: [4, 8] f32\n");
  EXPECT_EQ(program.run({x, w})[0].to_vector(), y.to_vector());
  std::string bad = kiln::test::messageOf<CompileError>(
      [] { compile_graph("func.func @g() { %x = kiln.bogus }", "bad.mlir"); });
  EXPECT_NE(bad.find("bad.mlir:1:"), std::string::npos) << bad;
}

/// A loaded model run from several threads at once (as a server would):
/// each run gets its own outputs and the JIT's answer for its own input, on
/// every device here (Vulkan runs share one replay and take turns).
TEST(Aot, OneModelRunsFromSeveralThreads) {
  std::vector<std::string> targets = targetsHere();
  Device cpu = Device::cpu();
  Blocks blocks(cpu);
  Tensor tokens = Tensor::randn({Blocks::T, Blocks::D}, cpu);
  std::string path = tempPath("threads.kiln");
  compile({blocks.transformer(tokens)}, {tokens}, {targets}).save(path);
  for (const std::string &target : targets) {
    SCOPED_TRACE(target);
    Device device = deviceOf(target);
    Program program = load(path, device);
    Blocks here = blocks.on(device);
    constexpr int kThreads = 4, kRuns = 5;
    std::vector<std::vector<Tensor>> inputs(kThreads);
    std::vector<std::vector<std::vector<float>>> want(kThreads), got(kThreads);
    for (int t = 0; t < kThreads; ++t)
      for (int r = 0; r < kRuns; ++r) {
        inputs[t].push_back(Tensor::randn({Blocks::T, Blocks::D}, device));
        want[t].push_back(here.transformer(inputs[t][r]).to_vector());
      }
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kThreads);
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        try {
          for (int r = 0; r < kRuns; ++r)
            got[t].push_back(program.run({inputs[t][r]})[0].to_vector());
        } catch (const Error &e) {
          errors[t] = e.what();
        }
      });
    for (std::thread &thread : threads)
      thread.join();
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_EQ(errors[t], "");
      EXPECT_EQ(got[t], want[t]) << "thread " << t;
    }
  }
  std::remove(path.c_str());
}

/// A loaded file is mapped, its weights read from the mapping when they
/// are uploaded: saving another model over the same path (a rename, never a
/// truncation) leaves the loaded one intact.
TEST(Aot, SavingOverALoadedFileKeepsItRunning) {
  Device cpu = Device::cpu();
  Blocks blocks(cpu);
  Tensor x = Tensor::randn({4, 16}, cpu);
  std::string path = tempPath("overwritten.kiln");
  compile({blocks.mlp(x)}, {x}, {{"cpu"}}).save(path);
  Program first = load(path, cpu);
  Tensor other = Tensor::randn({2, 3, 8, 8}, cpu);
  compile({blocks.cnn(other)}, {other}, {{"cpu"}}).save(path);
  EXPECT_EQ(first.run({x})[0].to_vector(), blocks.mlp(x).to_vector());
  EXPECT_EQ(load(path, cpu).signature(),
            "input input0: [2, 3, 8, 8] f32\noutput output0: [2, 8, 1, 1] f32\n");
  std::remove(path.c_str());
}

/// The metal target: MSL in the file (SPIRV-Cross from the Vulkan path's
/// SPIR-V, sized for Apple GPUs); no device here runs it, and loading it for
/// one says what the file holds.
TEST(Aot, MetalTargetHoldsMsl) {
  std::optional<Device> gpu = vulkanOrSkip();
  if (!gpu)
    GTEST_SKIP() << "the metal target is placed through a Vulkan device";
  Blocks blocks(*gpu);
  Tensor tokens = Tensor::randn({Blocks::T, Blocks::D}, *gpu);
  Program metal = compile({blocks.transformer(tokens)}, {tokens}, {{"metal", "cpu"}});
  EXPECT_EQ(metal.targets(), "metal, cpu");
  std::string msl = metal.msl();
  EXPECT_NE(msl.find("#include <metal_stdlib>"), std::string::npos);
  EXPECT_NE(msl.find("kernel void"), std::string::npos);
  EXPECT_NE(msl.find("[[buffer(0)]]"), std::string::npos);
  EXPECT_NE(msl.find("simd_shuffle_xor"), std::string::npos); // softmax, layer norm
  std::string path = tempPath("metal.kiln");
  metal.save(path);
  Program back = load(path, Device::cpu());
  EXPECT_EQ(back.msl(), msl);
  EXPECT_EQ(back.run({tokens.to(Device::cpu())})[0].to_vector(),
            blocks.on(Device::cpu()).transformer(tokens.to(Device::cpu())).to_vector());
  std::string noVulkan = kiln::test::messageOf<Error>([&] { load(path, *gpu); });
  EXPECT_NE(noVulkan.find("compiled for: metal, cpu"), std::string::npos) << noVulkan;
  std::remove(path.c_str());
}

/// CPU code for an instruction set this CPU lacks: written, kept, and an
/// error naming the ISA, the missing features and the fix when run.
TEST(Aot, CpuCodeForAnotherIsaSaysWhatIsMissing) {
  rt::CpuLibrary::Description library;
  library.isa = "x86-64-v9";
  library.features = {"avx2", "kiln-test-feature"};
#if defined(__x86_64__)
  Elf64_Ehdr header{};
  header.e_machine = EM_X86_64;
  library.bytes.assign(reinterpret_cast<uint8_t *>(&header),
                       reinterpret_cast<uint8_t *>(&header) + sizeof header);
#else
  GTEST_SKIP() << "the ISA levels named here are x86-64's";
#endif
  rt::Status status = rt::CpuLibrary::checkCpu(library, "model.kiln");
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("compiled for x86-64-v9, which needs kiln-test-feature; "),
            std::string::npos) << status.message();
  EXPECT_NE(status.message().find("Compile with --cpu-isa x86-64-v3"), std::string::npos);
  // A named level compiles, saves and (where the CPU has it) runs.
  Blocks blocks(Device::cpu());
  Tensor x = Tensor::randn({4, 16}, Device::cpu());
  Program v3 = compile({blocks.mlp(x)}, {x}, {{"cpu"}, {}, {}, "x86-64-v3"});
  EXPECT_NE(v3.describe().find("cpu code: x86-64-v3, "), std::string::npos) << v3.describe();
  EXPECT_EQ(v3.describe().find("avx512f"), std::string::npos) << v3.describe();
  if (rt::missingCpuFeatures({"avx2", "fma", "bmi2", "f16c", "movbe", "lzcnt"}).empty())
    EXPECT_TRUE(kiln::test::allClose(v3.run({x})[0].to_vector(),
                                     kiln::test::toDouble(blocks.mlp(x)), 1e-5, 1e-5));
}

/// Every malformed file: an error that says so, never a crash (its
/// corpus: empty, wrong identifier, truncated at many offsets, bit flips),
/// for SPIR-V and for CPU code (a flipped byte in the shared object fails
/// its hash before the dynamic loader reads it).
class MalformedFiles : public ::testing::TestWithParam<const char *> {};

TEST_P(MalformedFiles, AreErrors) {
  std::string target = GetParam();
  if (target == "vulkan" && !vulkanOrSkip())
    GTEST_SKIP() << "needs a Vulkan device";
  Device device = deviceOf(target);
  Blocks blocks(device);
  Tensor x = Tensor::randn({4, 16}, device);
  std::optional<Device> gpu = device;
  std::string path = tempPath("good-" + target + ".kiln"), bad = tempPath("bad-" + target + ".kiln");
  compile({blocks.mlp(x)}, {x}, {{target}}).save(path);
  std::ifstream file(path, std::ios::binary);
  std::vector<char> good((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  auto loadBytes = [&](const std::vector<char> &bytes) -> std::string {
    std::ofstream(bad, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    try {
      Program p = load(bad, *gpu);
      p.run({x}); // a file that loads must also run
      return "";
    } catch (const Error &e) {
      return e.what();
    }
  };
  EXPECT_NE(loadBytes({}).find("not a .kiln file"), std::string::npos);
  std::vector<char> renamed = good;
  renamed[4] = 'X';
  EXPECT_NE(loadBytes(renamed).find("not a .kiln file"), std::string::npos);
  for (size_t cut = 1; cut < good.size(); cut += std::max<size_t>(1, good.size() / 97)) {
    std::string error = loadBytes(std::vector<char>(good.begin(), good.begin() + cut));
    EXPECT_FALSE(error.empty()) << "truncated at " << cut;
  }
  // A flipped byte anywhere, weights included, fails the file's seal.
  for (size_t at = 0; at < good.size(); at += std::max<size_t>(1, good.size() / 211)) {
    std::vector<char> flipped = good;
    flipped[at] = char(flipped[at] ^ 0x5A);
    EXPECT_FALSE(loadBytes(flipped).empty()) << "byte " << at;
  }
  std::remove(path.c_str());
  std::remove(bad.c_str());
}
INSTANTIATE_TEST_SUITE_P(Aot, MalformedFiles, ::testing::Values("vulkan", "cpu"));
} // namespace
