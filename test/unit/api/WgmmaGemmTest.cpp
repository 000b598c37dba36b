// The f16 GEMM on Hopper's warpgroup MMA (WgmmaGemm.h): which
// kernels get PTX, its configurations, the .kiln file carrying it, and, on
// a GPU CUDA runs at sm_90 (the H200), its launch through CUDA between
// Vulkan kernels. The PTX's text is checked by lit (kiln-compile-ptx.mlir).

#include "TestUtil.h"

#include "../ScopedEnv.h"

#include "kiln/Codegen/WgmmaGemm.h"
#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Registry.h"
#include "kiln/runtime/Vulkan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>

using namespace kiln;

namespace {
using test::ScopedEnv;

float roundToHalf(double x) { return float(_Float16(float(x))); }
} // namespace

TEST(WgmmaGemm, ConfigurationsDivideTheProblem) {
  const int64_t h200 = 232448;
  std::optional<WgmmaGemmConfig> big = chooseWgmmaGemm({4096, 4096, 4096, false}, h200);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->str(), "128x256x32 s6 wg2");
  EXPECT_EQ(big->sharedBytes(), 6 * (128 * 32 + 32 * 256) * 2);
  std::optional<WgmmaGemmConfig> narrow = chooseWgmmaGemm({4096, 128, 64, false}, h200);
  ASSERT_TRUE(narrow);
  EXPECT_EQ(narrow->str(), "128x128x64 s4 wg1");
  // No tile divides these; none fits Vulkan's 48 KB.
  EXPECT_FALSE(chooseWgmmaGemm({100, 256, 256, false}, h200));
  EXPECT_FALSE(chooseWgmmaGemm({128, 96, 256, false}, h200));
  EXPECT_FALSE(chooseWgmmaGemm({128, 256, 48, false}, h200));
  EXPECT_FALSE(chooseWgmmaGemm({4096, 4096, 4096, false}, 49152));
  // 32-bit indices.
  EXPECT_FALSE(chooseWgmmaGemm({int64_t(1) << 20, 8192, 4096, false}, h200));
}

/// Kernels of `path`'s first program that carry PTX; every kernel has SPIR-V.
static int kernelsWithPtx(const std::string &path, std::vector<rt::PtxCode> *codes = nullptr) {
  rt::StatusOr<rt::Artifact> loaded = rt::loadArtifact(path);
  EXPECT_TRUE(loaded.isOk()) << loaded.status().message();
  if (!loaded.isOk())
    return -1;
  int withPtx = 0;
  for (const rt::ProgramKernel &kernel : loaded->programs.at(0).program->kernels) {
    EXPECT_TRUE(kernel.spirv) << kernel.name;
    if (kernel.ptx) {
      ++withPtx;
      if (codes)
        codes->push_back(*kernel.ptx);
    }
  }
  return withPtx;
}

/// A program compiled for the H200 (KILN_GPU_LIMITS=...,ptx=90) carries PTX
/// for its plain GEMM beside the SPIR-V, and the .kiln file keeps it; the
/// same graph compiled without ptx=90 has none. Beside a SPIR-V kernel, a
/// GEMM this small loses its PTX (keepPtxThatPays).
TEST(WgmmaGemm, CompiledForTheH200TheFileCarriesPtx) {
  std::string dir = std::filesystem::temp_directory_path() /
                    ("kiln-wgmma-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ScopedEnv cache("KILN_CACHE_DIR", dir.c_str());
  Tensor a = Tensor::zeros({256, 128}).to(DType::f16);
  Tensor b = Tensor::zeros({128, 512}).to(DType::f16);
  realize({a, b});
  std::string limits = "subgroup=32,invocations=1024,shared=49152,units=132,coop=1";
  for (bool cuda : {true, false}) {
    ScopedEnv target("KILN_GPU_LIMITS", (limits + (cuda ? ",ptx=90" : "")).c_str());
    std::string path = dir + (cuda ? "/h200.kiln" : "/vulkan.kiln");
    compile({matmul(a, b)}, {a, b}, {{"vulkan"}}).save(path);
    std::vector<rt::PtxCode> codes;
    EXPECT_EQ(kernelsWithPtx(path, &codes), cuda ? 1 : 0);
    for (const rt::PtxCode &ptx : codes) {
      EXPECT_EQ(ptx.arch, 90u);
      EXPECT_EQ(ptx.config, "wgmma 128x256x32 s6 wg2");
      EXPECT_EQ(ptx.grid[0], 2u * 2u);
      EXPECT_EQ(ptx.block[0], 256u);
      EXPECT_EQ(ptx.sharedBytes, 147456u);
      EXPECT_EQ(ptx.scalars, (std::vector<uint32_t>{256, 512, 128}));
      EXPECT_EQ(ptx.bindingOrder, (std::vector<uint32_t>{0, 1, 2}));
      EXPECT_EQ(ptx.minBytes, (std::vector<uint64_t>{256 * 128 * 2, 128 * 512 * 2, 256 * 512 * 2}));
      EXPECT_NE(ptx.source.find("wgmma.mma_async"), std::string::npos);
    }
    if (!cuda)
      continue;
    // With a transposed GEMM and its relu (SPIR-V alone) beside it.
    compile({matmul(a, b), relu(matmul(b.transpose(0, 1), a.transpose(0, 1)))}, {a, b},
            {{"vulkan"}})
        .save(path);
    EXPECT_EQ(kernelsWithPtx(path), 0);
  }
  std::filesystem::remove_all(dir);
}

/// On a GPU CUDA runs at sm_90, plain f16 GEMMs run as PTX through CUDA on
/// the Vulkan device's buffers (no pipeline is made for them), between
/// Vulkan kernels that write their operands and read their results: each
/// result is the exact sum rounded to f16 once. Skipped where no device
/// here does (lavapipe; a GPU without CUDA, or KILN_CUDA=0).
TEST(WgmmaGemm, LaunchedThroughCudaBetweenVulkanKernels) {
  int ran = 0;
  for (const Device &d : test::availableDevices()) {
    if (d.api() != "vulkan")
      continue;
    rt::StatusOr<rt::Device *> found = rt::findDevice(d.name());
    ASSERT_TRUE(found.isOk());
    rt::VulkanDevice *vulkan = (*found)->replayDevice();
    if (!vulkan || rt::cudaCapability(vulkan->adapter()).arch != 90)
      continue;
    ++ran;
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> dist(-2, 2);
    for (auto [m, k, n] : {std::tuple{512, 256, 512}, {256, 512, 128}, {1024, 2048, 1024}}) {
      std::vector<float> as(size_t(m) * k), bs(size_t(k) * n);
      for (float &x : as)
        x = float(dist(rng));
      for (float &x : bs)
        x = float(dist(rng));
      // Committed, so that every step runs on d (results of kernels follow
      // the default device otherwise).
      Tensor a = (Tensor::from(as, {m, k}, d).to(DType::f16) * 2.0f).to(d);
      Tensor b = (Tensor::from(bs, {k, n}, d).to(DType::f16) - 1.0f).to(d);
      realize({a, b});
      (*found)->resetStats();
      Tensor c = matmul(a, b).to(d);
      realize({c});
      rt::DeviceStats launched = (*found)->stats();
      EXPECT_EQ(launched.pipelinesCreated + launched.pipelineCacheHits, 0u)
          << m << "x" << k << "x" << n << ": the GEMM ran as SPIR-V";
      EXPECT_EQ(launched.dispatches, 1u);
      Tensor after = c + 1.0f;
      EXPECT_EQ(after.device().name(), d.name());
      std::vector<float> got = after.to(DType::f32).to_vector<float>();
      size_t wrong = 0;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double sum = 0;
          for (int p = 0; p < k; ++p)
            sum += 2.0 * as[size_t(i) * k + p] * (bs[size_t(p) * n + j] - 1.0);
          if (got[size_t(i) * n + j] != roundToHalf(double(roundToHalf(sum)) + 1.0))
            ++wrong;
        }
      EXPECT_EQ(wrong, 0u) << m << "x" << k << "x" << n << " on " << d.name();
    }
  }
  if (ran == 0)
    GTEST_SKIP() << "no GPU here runs PTX through CUDA at sm_90 (rt::cudaCapability)";
}
