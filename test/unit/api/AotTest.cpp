// Ahead of time (issue 10): compile a model written with the Tensor API,
// save it, load it, run it in this process and with kiln-run (the runtime
// alone), and get the JIT's results bit for bit on the same device.

#include "TestUtil.h"

#include "kiln/runtime/Npy.h"

#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <cstdlib>
#include <fstream>

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

/// An MLP block and a CNN block, as a model would write them.
struct Blocks {
  Tensor w1, b1, g, beta, filter, mean, var, gamma, shift;
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
  }
  Tensor mlp(const Tensor &x) const { return layer_norm(relu(linear(x, w1, b1)), g, beta); }
  Tensor cnn(const Tensor &image) const {
    Tensor y = relu(batch_norm(conv2d(image, filter, {1, 1}, {1, 1}), mean, var, gamma, shift));
    return global_avg_pool2d(max_pool2d(y, {2, 2}, {2, 2}));
  }
};

TEST(Aot, CompiledProgramsMatchTheJitBitForBit) {
  std::optional<Device> gpu = vulkanOrSkip();
  if (!gpu)
    GTEST_SKIP() << "needs a Vulkan device";
  Blocks blocks(*gpu);
  Tensor x = Tensor::randn({4, 16}, *gpu), image = Tensor::randn({2, 3, 8, 8}, *gpu);
  Program program = compile({blocks.mlp(x), blocks.cnn(image)}, {x, image},
                            {{"vulkan"}, {"x", "image"}, {"features", "pooled"}});
  std::string path = tempPath("blocks.kiln");
  program.save(path);
  Program loaded = load(path, *gpu);
  EXPECT_EQ(loaded.signature(), "input x: [4, 16] f32\ninput image: [2, 3, 8, 8] f32\n"
                                "output features: [4, 32] f32\noutput pooled: [2, 8, 1, 1] f32\n");
  for (int round = 0; round < 2; ++round) {
    Tensor x2 = Tensor::randn({4, 16}, *gpu), image2 = Tensor::randn({2, 3, 8, 8}, *gpu);
    std::vector<float> jitMlp = blocks.mlp(x2).to_vector(), jitCnn = blocks.cnn(image2).to_vector();
    std::vector<Tensor> inMemory = program.run({x2, image2});
    std::vector<Tensor> fromFile = loaded.run({x2, image2});
    EXPECT_EQ(inMemory[0].to_vector(), jitMlp);
    EXPECT_EQ(inMemory[1].to_vector(), jitCnn);
    EXPECT_EQ(fromFile[0].to_vector(), jitMlp) << "round " << round;
    EXPECT_EQ(fromFile[1].to_vector(), jitCnn) << "round " << round;
    EXPECT_EQ(fromFile[0].device(), *gpu);
  }
  std::remove(path.c_str());
}

TEST(Aot, KilnRunGivesTheJitsResults) {
  std::optional<Device> gpu = vulkanOrSkip();
  if (!gpu)
    GTEST_SKIP() << "needs a Vulkan device";
  Blocks blocks(*gpu);
  Tensor x = Tensor::randn({4, 16}, *gpu);
  std::string model = tempPath("mlp.kiln"), in = tempPath("x.npy"), out = tempPath("y.npy");
  compile({blocks.mlp(x)}, {x}, {{"vulkan"}, {"x"}, {"y"}}).save(model);
  std::vector<float> xs = x.to_vector();
  rt::NpyArray array;
  array.type = {{4, 16}, rt::ElementType::f32};
  array.data.resize(xs.size() * 4);
  std::memcpy(array.data.data(), xs.data(), array.data.size());
  ASSERT_TRUE(rt::writeNpy(in, array).isOk());
  std::string command = std::string(KILN_RUN_PATH) + " " + model + " --device " + gpu->name() +
                        " --input x=" + in + " --output y=" + out + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  rt::StatusOr<rt::NpyArray> y = rt::readNpy(out);
  ASSERT_TRUE(y.isOk()) << y.status().toString();
  std::vector<float> got(y->data.size() / 4);
  std::memcpy(got.data(), y->data.data(), y->data.size());
  EXPECT_EQ(got, blocks.mlp(x).to_vector());
  // A wrong input file is a clear error, not a crash.
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
  for (const std::string &p : {model, in, out})
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
  std::string cpuSave = kiln::test::messageOf<Error>([&] { program.save(path); });
  EXPECT_NE(cpuSave.find("cannot hold yet"), std::string::npos) << cpuSave;
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

/// Every malformed file: an error that says so, never a crash (issue 10's
/// corpus: empty, wrong identifier, truncated at many offsets, bit flips).
TEST(Aot, MalformedFilesAreErrors) {
  std::optional<Device> gpu = vulkanOrSkip();
  if (!gpu)
    GTEST_SKIP() << "needs a Vulkan device";
  Blocks blocks(*gpu);
  Tensor x = Tensor::randn({4, 16}, *gpu);
  std::string path = tempPath("good.kiln"), bad = tempPath("bad.kiln");
  compile({blocks.mlp(x)}, {x}, {{"vulkan"}}).save(path);
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
  // Flipped bits load with an error or run (a flipped weight is still a
  // valid file); either way no crash.
  size_t errors = 0;
  for (size_t at = 8; at < good.size(); at += std::max<size_t>(1, good.size() / 211)) {
    std::vector<char> flipped = good;
    flipped[at] = char(flipped[at] ^ 0x5A);
    errors += !loadBytes(flipped).empty();
  }
  EXPECT_GT(errors, 0u);
  std::remove(path.c_str());
  std::remove(bad.c_str());
}
} // namespace
