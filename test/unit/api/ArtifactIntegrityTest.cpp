// A .kiln file is whole or refused. Damage anywhere (every byte, several
// masks) fails the seal before anything is read; a crafted file (damaged,
// then sealed again) fails a meaning check or runs, and never crashes,
// hangs or runs outside a buffer; a kernel whose assumptions the device
// does not meet is refused before anything runs, or runs right.

#include "TestUtil.h"

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/SpirvInterface.h"

#include "../ScopedEnv.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace kiln;
using kiln::test::ScopedEnv;

namespace {
std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/kiln-integrity-" +
         std::to_string(::getpid()) + "-" + name;
}

std::optional<Device> vulkanDevice() {
  for (const Device &d : kiln::test::availableDevices())
    if (d.api() == "vulkan")
      return d;
  return std::nullopt;
}

std::vector<uint8_t> readBytes(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(file), {});
}

void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
}

/// A small model with a row kernel (layer norm, softmax: subgroup
/// shuffles on GPUs) and a GEMM, compiled for `target`: its file's bytes.
struct SmallModel {
  Tensor x, w, b, g, beta;
  explicit SmallModel(const Device &device) {
    manual_seed(11);
    x = Tensor::randn({4, 16}, device);
    w = Tensor::randn({32, 16}, device);
    b = Tensor::randn({32}, device);
    g = Tensor::rand({32}, device);
    beta = Tensor::randn({32}, device);
    realize({w, b, g, beta});
  }
  Tensor forward() const { return softmax(layer_norm(relu(linear(x, w, b)), g, beta), -1); }
  std::vector<uint8_t> compileFor(const std::string &target, const std::string &name) const {
    std::string path = tempPath(name);
    compile({forward()}, {x}, {{target}}).save(path);
    std::vector<uint8_t> bytes = readBytes(path);
    std::remove(path.c_str());
    return bytes;
  }
};

/// Loads `bytes` as a file on `device` and runs it: "" when it ran, else the
/// error.
std::string loadAndRun(const std::vector<uint8_t> &bytes, const Device &device, const Tensor &x,
                       std::vector<float> *out = nullptr) {
  std::string path = tempPath("candidate.kiln");
  writeBytes(path, bytes);
  try {
    Program p = load(path, device);
    std::vector<Tensor> outputs = p.run({x});
    std::vector<float> values = outputs.at(0).to_vector<float>();
    if (out)
      *out = std::move(values);
    std::remove(path.c_str());
    return "";
  } catch (const Error &e) {
    std::remove(path.c_str());
    return e.what();
  }
}

class Integrity : public ::testing::TestWithParam<const char *> {
protected:
  std::optional<Device> device() const {
    if (std::string(GetParam()) == "cpu")
      return Device::cpu();
    return vulkanDevice();
  }
};

/// Every byte of the file, XORed with each of three masks: the seal refuses
/// each one before anything else is read.
TEST_P(Integrity, EveryDamagedByteIsRefused) {
  std::optional<Device> here = device();
  if (!here)
    GTEST_SKIP() << "needs a Vulkan device";
  SmallModel model(*here);
  std::vector<uint8_t> good = model.compileFor(GetParam(), "good.kiln");
  ASSERT_TRUE(rt::parseArtifact(good.data(), good.size(), "good.kiln").isOk());
  size_t refused = 0, mutations = 0;
  for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xFF)})
    for (size_t at = 0; at < good.size(); ++at) {
      std::vector<uint8_t> bad = good;
      bad[at] ^= mask;
      rt::StatusOr<rt::Artifact> parsed = rt::parseArtifact(bad.data(), bad.size(), "bad.kiln");
      ++mutations;
      if (parsed.isOk()) {
        ADD_FAILURE() << "byte " << at << " ^ " << int(mask) << " loaded";
        continue;
      }
      ++refused;
      const std::string &why = parsed.status().message();
      EXPECT_TRUE(why.find("not a .kiln file") != std::string::npos ||
                  why.find("damaged") != std::string::npos ||
                  why.find("seal") != std::string::npos)
          << "byte " << at << ": " << why;
    }
  EXPECT_EQ(refused, mutations);
  // Through the API's own loader too, with what it says to do.
  std::vector<uint8_t> bad = good;
  bad[bad.size() / 2] ^= 0x5A;
  std::string error = loadAndRun(bad, *here, model.x);
  EXPECT_NE(error.find("its SHA-256 is"), std::string::npos) << error;
  EXPECT_NE(error.find("compile the model again"), std::string::npos) << error;
  // Cut anywhere, or grown: refused.
  for (size_t cut : {size_t(0), size_t(7), good.size() / 3, good.size() - 1}) {
    std::vector<uint8_t> part(good.begin(), good.begin() + std::ptrdiff_t(cut));
    EXPECT_FALSE(loadAndRun(part, *here, model.x).empty()) << "cut at " << cut;
  }
  std::vector<uint8_t> grown = good;
  grown.push_back(0);
  EXPECT_FALSE(loadAndRun(grown, *here, model.x).empty());
}

/// Damaged and sealed again, as a crafted file would be: each loads with an
/// error or runs, and the process survives every one (a hang fails the
/// test by its timeout). Where it runs, it computes from the same weights
/// unless a weight byte was the one changed.
TEST_P(Integrity, CraftedFilesAreErrorsOrRun) {
  std::optional<Device> here = device();
  if (!here)
    GTEST_SKIP() << "needs a Vulkan device";
  SmallModel model(*here);
  std::vector<uint8_t> good = model.compileFor(GetParam(), "good.kiln");
  std::vector<uint8_t> body(good.begin(), good.end() - rt::kSealBytes);
  size_t step = std::max<size_t>(1, body.size() / 3000), errors = 0, runs = 0;
  for (size_t at = 0; at < body.size(); at += step) {
    std::vector<uint8_t> crafted = body;
    crafted[at] ^= 0x5A;
    rt::sealArtifact(crafted);
    std::string error = loadAndRun(crafted, *here, model.x);
    (error.empty() ? runs : errors) += 1;
  }
  EXPECT_GT(errors, 0u);
  EXPECT_GT(runs, 0u); // weight bytes change values, not the file's meaning
  std::cout << body.size() << " bytes, every " << step << "th changed: " << errors
            << " refused, " << runs << " ran\n";
}
INSTANTIATE_TEST_SUITE_P(Artifact, Integrity, ::testing::Values("vulkan", "cpu"));

/// A file compiled for each subgroup size runs right on this device or is
/// refused naming the subgroup size: never a wrong answer.
TEST(KernelAssumptions, SubgroupSizeRunsRightOrIsRefused) {
  std::optional<Device> gpu = vulkanDevice();
  if (!gpu)
    GTEST_SKIP() << "needs a Vulkan device";
  SmallModel model(*gpu);
  std::vector<float> expected = model.forward().to(Device::cpu()).to_vector<float>();
  int refused = 0, ran = 0;
  for (int subgroup : {4, 8, 16, 32, 64, 128}) {
    SCOPED_TRACE("subgroup " + std::to_string(subgroup));
    std::vector<uint8_t> bytes;
    {
      ScopedEnv limits("KILN_GPU_LIMITS", ("subgroup=" + std::to_string(subgroup)).c_str());
      bytes = model.compileFor("vulkan", "subgroup.kiln");
    }
    std::vector<float> got;
    std::string error = loadAndRun(bytes, *gpu, model.x, &got);
    if (!error.empty()) {
      ++refused;
      EXPECT_NE(error.find("subgroup size " + std::to_string(subgroup)), std::string::npos)
          << error;
      continue;
    }
    ++ran;
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], expected[i], 1e-4) << "element " << i;
  }
  EXPECT_GT(ran, 0); // at least its own size runs
  std::cout << "subgroup sizes run: " << ran << ", refused: " << refused << "\n";
}

/// A kernel whose workgroup is larger than the device allows is refused
/// when the model is loaded, naming both sizes.
TEST(KernelAssumptions, WorkgroupLargerThanTheDeviceIsRefused) {
  std::optional<Device> gpu = vulkanDevice();
  if (!gpu)
    GTEST_SKIP() << "needs a Vulkan device";
  SmallModel model(*gpu);
  std::vector<uint8_t> bytes = model.compileFor("vulkan", "workgroup.kiln");
  rt::StatusOr<rt::Artifact> artifact = rt::parseArtifact(bytes.data(), bytes.size(), "w.kiln");
  ASSERT_TRUE(artifact.isOk()) << artifact.status().message();
  // Every kernel's LocalSize, and its record, made 1 x 1 x 65536.
  for (rt::TargetProgram &target : artifact->programs) {
    auto program = std::make_shared<rt::Program>(*target.program);
    for (rt::ProgramKernel &kernel : program->kernels) {
      if (!kernel.spirv)
        continue;
      auto code = std::make_shared<rt::SpirvCode>(*kernel.spirv);
      for (size_t i = 5; i < code->words.size(); i += code->words[i] >> 16)
        if ((code->words[i] & 0xffff) == 16 && code->words[i + 2] == 17) // LocalSize
          code->words[i + 3] = 1, code->words[i + 4] = 1, code->words[i + 5] = 65536;
      code->workgroupSize = {1, 1, 65536};
      kernel.spirv = code;
    }
    target.program = program;
  }
  rt::StatusOr<std::vector<uint8_t>> crafted = rt::serializeArtifact(*artifact);
  ASSERT_TRUE(crafted.isOk());
  std::string error = loadAndRun(*crafted, *gpu, model.x);
  EXPECT_NE(error.find("workgroup"), std::string::npos) << error;
  EXPECT_NE(error.find("65536"), std::string::npos) << error;
}
} // namespace

namespace {
/// The program loaded from `bytes` on `device`: the variant it runs, and
/// its output (or the load's error in `error`).
std::string variantOf(const std::vector<uint8_t> &bytes, const Device &device, const Tensor &x,
                      std::vector<float> &out, std::string &error) {
  std::string path = tempPath("variant.kiln");
  writeBytes(path, bytes);
  std::string variant;
  try {
    Program p = load(path, device);
    variant = p.variant();
    out = p.run({x}).at(0).to_vector<float>();
  } catch (const Error &e) {
    error = e.what();
  }
  std::remove(path.c_str());
  return variant;
}

std::vector<uint8_t> compileVariants(const SmallModel &model,
                                     const std::vector<std::string> &targets) {
  std::string path = tempPath("variants.kiln");
  compile({model.forward()}, {model.x}, {targets}).save(path);
  std::vector<uint8_t> bytes = readBytes(path);
  std::remove(path.c_str());
  return bytes;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], 1e-4) << "element " << i;
}
} // namespace

/// One file with a generic variant and a GPU profile's: the profile's runs
/// where the device meets it (as a file of it alone shows), else the
/// generic one; either way right. The generic variant assumes no subgroup
/// size.
TEST(Variants, TheMostSpecificOneTheDeviceMeetsRuns) {
  std::optional<Device> gpu = vulkanDevice();
  if (!gpu)
    GTEST_SKIP() << "needs a Vulkan device";
  SmallModel model(*gpu);
  std::vector<float> expected = model.forward().to(Device::cpu()).to_vector<float>();
  {
    std::string path = tempPath("generic.kiln");
    Program generic = compile({model.forward()}, {model.x}, {{"vulkan:generic"}});
    std::string text = generic.describe("vulkan:generic");
    EXPECT_NE(text.find("subgroup size any"), std::string::npos) << text;
    EXPECT_EQ(text.find("subgroup size 1"), std::string::npos) << text;
  }
  for (const char *profile : {"nvidia-hopper", "amd-rdna"}) {
    SCOPED_TRACE(profile);
    std::string name = std::string("vulkan:") + profile;
    std::vector<float> got;
    std::string error;
    std::string alone = variantOf(compileVariants(model, {name}), *gpu, model.x, got, error);
    bool meets = error.empty();
    std::string refusal = error;
    if (meets)
      expectNear(got, expected);
    else
      EXPECT_NE(error.find("subgroup size"), std::string::npos) << error;
    error.clear();
    std::string chosen = variantOf(compileVariants(model, {"vulkan:generic", name}), *gpu,
                                   model.x, got, error);
    ASSERT_TRUE(error.empty()) << error;
    EXPECT_EQ(chosen, meets ? name : "vulkan:generic");
    expectNear(got, expected);
    std::cout << name << (meets ? " runs here" : " is refused here (" + refusal + ")")
              << "; with generic: " << chosen << " runs\n";
  }
}

/// Portable CPU code: x86-64-v3 and x86-64-v4 in one file; the highest
/// level this CPU has runs, and computes what the JIT does within rounding.
TEST(Variants, TheHighestCpuLevelThisCpuHasRuns) {
  SmallModel model(Device::cpu());
  std::vector<float> expected = model.forward().to_vector<float>();
  std::vector<float> got;
  std::string error;
  std::string chosen = variantOf(compileVariants(model, {"cpu:x86-64-v3", "cpu:x86-64-v4"}),
                                 Device::cpu(), model.x, got, error);
  ASSERT_TRUE(error.empty()) << error;
  bool v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512cd");
  EXPECT_EQ(chosen, v4 ? "cpu:x86-64-v4" : "cpu:x86-64-v3");
  expectNear(got, expected);
  // A file of x86-64-v4 alone says what this CPU lacks, where it lacks it.
  if (!v4) {
    variantOf(compileVariants(model, {"cpu:x86-64-v4"}), Device::cpu(), model.x, got, error);
    EXPECT_NE(error.find("avx512"), std::string::npos) << error;
  }
}
