// A transformer stack split across two devices (pipeline parallel): the
// first half of its blocks on vulkan:0, the second on vulkan:1, `.to()`
// between, compiled once and run on micro-batches that overlap. Here the
// two devices are logical devices of one adapter (KILN_VIRTUAL_DEVICES=2,
// set by the test main): two VkDevices with their own memory and queues,
// what two GPUs are to Vulkan. The split results must equal the same
// stack compiled on one device, bit for bit.

#include "TestUtil.h"

#include "kiln/Program.h"
#include "kiln/runtime/Npy.h"

#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <unistd.h>

using namespace kiln;

namespace {
constexpr int64_t T = 8, D = 32, H = 2, Dh = D / H, F = 64;

std::vector<float> values(size_t n, uint32_t seed, float scale, float offset = 0.0f) {
  std::mt19937 rng{seed};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = normal(rng) * scale + offset;
  return v;
}

/// One pre-norm transformer block with its parameters committed to `device`
/// (the same values for the same seed on any device).
struct Block {
  Tensor g1, b1, wq, wk, wv, wo, bq, bk, bv, bo, g2, b2, w1, c1, w2, c2;

  Block(const Device &device, uint32_t seed) {
    uint32_t k = seed * 100;
    auto p = [&](Shape shape, float scale, float offset = 0.0f) {
      size_t n = 1;
      for (int64_t d : shape)
        n *= size_t(d);
      return Tensor::from(values(n, ++k, scale, offset), shape, device);
    };
    g1 = p({D}, 0.1f, 1.0f), b1 = p({D}, 0.1f);
    wq = p({D, D}, 0.2f), wk = p({D, D}, 0.2f), wv = p({D, D}, 0.2f), wo = p({D, D}, 0.2f);
    bq = p({D}, 0.1f), bk = p({D}, 0.1f), bv = p({D}, 0.1f), bo = p({D}, 0.1f);
    g2 = p({D}, 0.1f, 1.0f), b2 = p({D}, 0.1f);
    w1 = p({F, D}, 0.2f), c1 = p({F}, 0.1f), w2 = p({D, F}, 0.2f), c2 = p({D}, 0.1f);
  }

  Tensor operator()(const Tensor &x) const {
    Tensor h = layer_norm(x, g1, b1);
    Tensor q = linear(h, wq, bq).reshape({T, H, Dh}).permute({1, 0, 2});
    Tensor k = linear(h, wk, bk).reshape({T, H, Dh}).permute({1, 2, 0});
    Tensor v = linear(h, wv, bv).reshape({T, H, Dh}).permute({1, 0, 2});
    Tensor p = softmax(matmul(q, k) * (1.0f / std::sqrt(float(Dh))), -1);
    Tensor attn = matmul(p, v).permute({1, 0, 2}).reshape({T, D});
    Tensor x1 = linear(attn, wo, bo) + x;
    return linear(gelu(linear(layer_norm(x1, g2, b2), w1, c1)), w2, c2) + x1;
  }
};

/// Four blocks: 0-1 on `first`, 2-3 on `second` (the same device for the
/// reference), the activations moved between them.
Tensor stack(const Tensor &x, const Device &first, const Device &second) {
  Tensor y = x;
  for (uint32_t b = 0; b < 4; ++b) {
    const Device &d = b < 2 ? first : second;
    if (b == 2)
      y = y.to(second);
    y = Block(d, b + 1)(y);
  }
  return y;
}

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/kiln-split-" + std::to_string(::getpid()) +
         "-" + name;
}

std::vector<std::vector<Tensor>> microBatches(int n) {
  std::vector<std::vector<Tensor>> batches;
  for (int b = 0; b < n; ++b)
    batches.push_back({Tensor::from(values(T * D, 1000 + b, 1.0f), {T, D})});
  return batches;
}

#define KILN_REQUIRE_TWO_VULKAN_DEVICES()                                                    \
  do {                                                                                       \
    size_t vulkan = 0;                                                                       \
    for (const Device &d : ::kiln::test::availableDevices())                                 \
      vulkan += d.api() == "vulkan";                                                         \
    if (vulkan < 2)                                                                          \
      GTEST_SKIP() << "needs two Vulkan devices (KILN_VIRTUAL_DEVICES=2 makes two of one "   \
                      "adapter); found "                                                     \
                   << vulkan;                                                                \
  } while (0)

TEST(SplitModel, CompilesSplitAndRunsMicroBatchesBitForBit) {
  KILN_REQUIRE_TWO_VULKAN_DEVICES();
  Device d0 = Device::vulkan(0), d1 = Device::vulkan(1);
  Tensor example = Tensor::randn({T, D});
  // No target named: the tensors are on Vulkan devices, so Vulkan (even
  // where the default device is the CPU, as with lavapipe).
  Program split = compile({stack(example, d0, d1)}, {example});
  EXPECT_EQ(split.targets(), "vulkan");
  ASSERT_EQ(split.devices().size(), 2u);
  EXPECT_EQ(split.devices()[0], d0);
  EXPECT_EQ(split.devices()[1], d1);
  Program whole = compile({stack(example, d0, d0)}, {example}, {{"vulkan"}});
  ASSERT_EQ(whole.devices().size(), 1u);

  std::vector<std::vector<Tensor>> batches = microBatches(5);
  std::vector<std::vector<Tensor>> outs = split.run_pipelined(batches);
  ASSERT_EQ(outs.size(), batches.size());
  for (size_t b = 0; b < batches.size(); ++b) {
    SCOPED_TRACE(b);
    ASSERT_EQ(outs[b].size(), 1u);
    // The split model's output is where its last blocks ran.
    EXPECT_EQ(outs[b][0].device(), d1);
    std::vector<float> expected = whole.run(batches[b])[0].to_vector();
    EXPECT_EQ(outs[b][0].to_vector(), expected);
    EXPECT_EQ(split.run(batches[b])[0].to_vector(), expected);
  }
}

TEST(SplitModel, SavedSplitLoadsOntoTwoDevicesOrOne) {
  KILN_REQUIRE_TWO_VULKAN_DEVICES();
  Device d0 = Device::vulkan(0), d1 = Device::vulkan(1);
  Tensor example = Tensor::randn({T, D});
  std::string path = tempPath("split.kiln");
  compile({stack(example, d0, d1)}, {example}, {{"vulkan"}}).save(path);
  std::vector<std::vector<Tensor>> batches = microBatches(3);

  Program two = load(path, std::vector<Device>{d0, d1});
  Program reversed = load(path, std::vector<Device>{d1, d0});
  Program one = load(path, d0);
  EXPECT_EQ(one.devices().size(), 1u);
  std::vector<std::vector<Tensor>> outs = two.run_pipelined(batches);
  std::vector<std::vector<Tensor>> back = reversed.run_pipelined(batches);
  for (size_t b = 0; b < batches.size(); ++b) {
    std::vector<float> expected = one.run(batches[b])[0].to_vector();
    EXPECT_EQ(outs[b][0].to_vector(), expected) << b;
    EXPECT_EQ(back[b][0].device(), d0);
    EXPECT_EQ(back[b][0].to_vector(), expected) << b;
  }
  // Three devices for a model of two: the error says what it was compiled for.
  try {
    load(path, std::vector<Device>{d0, d1, d0});
    ADD_FAILURE() << "expected Error";
  } catch (const Error &e) {
    std::string text = e.what();
    EXPECT_NE(text.find("2 devices (vulkan:0, vulkan:1 when compiled), got 3"),
              std::string::npos)
        << text;
  }
  std::remove(path.c_str());
}

TEST(SplitModel, KilnRunTakesTwoDevices) {
  KILN_REQUIRE_TWO_VULKAN_DEVICES();
  Device d0 = Device::vulkan(0), d1 = Device::vulkan(1);
  Tensor example = Tensor::randn({T, D});
  std::string model = tempPath("split-run.kiln");
  compile({stack(example, d0, d1)}, {example}, {{"vulkan"}, {"x"}, {"y"}}).save(model);
  std::string x = tempPath("x.npy"), y1 = tempPath("y1.npy"), y2 = tempPath("y2.npy");
  {
    std::vector<float> v = values(T * D, 7, 1.0f);
    rt::NpyArray array;
    array.type = {{T, D}, rt::ElementType::f32};
    array.data.resize(v.size() * 4);
    std::memcpy(array.data.data(), v.data(), array.data.size());
    ASSERT_TRUE(rt::writeNpy(x, array).isOk());
  }
  auto run = [&](const std::string &devices, const std::string &out, const std::string &more) {
    std::string command = std::string(KILN_RUN_PATH) + " " + model + " --device " + devices +
                          " --input x=" + x + " --output y=" + out + more + " 2>&1";
    FILE *pipe = popen(command.c_str(), "r");
    std::string said;
    char line[512];
    while (fgets(line, sizeof line, pipe))
      said += line;
    int status = pclose(pipe);
    return std::make_pair(status, said);
  };
  auto [splitStatus, splitSaid] = run("vulkan:0,vulkan:1", y1, " --benchmark 2 --micro-batches 3");
  ASSERT_EQ(splitStatus, 0) << splitSaid;
  EXPECT_NE(splitSaid.find("3 micro-batches on vulkan:0,vulkan:1, pipelined"), std::string::npos)
      << splitSaid;
  auto [oneStatus, oneSaid] = run("vulkan:0", y2, "");
  ASSERT_EQ(oneStatus, 0) << oneSaid;
  std::FILE *a = std::fopen(y1.c_str(), "rb"), *b = std::fopen(y2.c_str(), "rb");
  ASSERT_TRUE(a && b);
  std::vector<char> ba(1 << 16), bb(1 << 16);
  size_t na = std::fread(ba.data(), 1, ba.size(), a), nb = std::fread(bb.data(), 1, bb.size(), b);
  std::fclose(a), std::fclose(b);
  EXPECT_EQ(na, nb);
  EXPECT_TRUE(na > 128 && std::equal(ba.begin(), ba.begin() + na, bb.begin()))
      << "kiln-run's split output differs from its one-device output";
  auto [badStatus, badSaid] = run("vulkan:0,vulkan:1,vulkan:0", y1, "");
  EXPECT_NE(badStatus, 0);
  EXPECT_NE(badSaid.find("pass one device, or 2 in that order"), std::string::npos) << badSaid;
  for (const std::string &p : {model, x, y1, y2})
    std::remove(p.c_str());
}
} // namespace
