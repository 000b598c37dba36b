// Autotuning and the persistent caches: cache keys, replayed
// timings, wrong candidates, and warm processes that compile nothing.

#include "TestUtil.h"

#include "lib/Target/SPIRV/KernelCompiler.h"
#include "lib/Compiler/KernelStore.h"
#include "lib/Driver/ProcessSession.h"
#include "lib/Tune/Tuner.h"

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/runtime/PipelineCacheBlob.h"
#include "kiln/runtime/Registry.h"
#include "kiln/runtime/Store.h"

#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace kiln;

namespace {
/// A module holding one kiln.kernel, parsed in the session's context.
mlir::OwningOpRef<mlir::ModuleOp> parseKernel(const std::string &text) {
  mlir::MLIRContext &ctx = session().contextForGraph();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  EXPECT_TRUE(module) << text;
  return module;
}

KernelOp kernelIn(mlir::ModuleOp module) {
  KernelOp kernel;
  module.walk([&](KernelOp k) { kernel = k; });
  return kernel;
}

std::string matmulKernel(int m, int k, int n, const std::string &type = "f32",
                         const std::string &device = "vulkan:0",
                         const std::string &config = "") {
  std::string a = "tensor<" + std::to_string(m) + "x" + std::to_string(k) + "x" + type + ">";
  std::string b = "tensor<" + std::to_string(k) + "x" + std::to_string(n) + "x" + type + ">";
  std::string c = "tensor<" + std::to_string(m) + "x" + std::to_string(n) + "x" + type + ">";
  return "func.func @f(%a: " + a + ", %b: " + b + ") -> " + c + " {\n" +
         "  %0 = kiln.kernel on \"" + device + "\" " + config + "(%a, %b) : (" + a + ", " + b +
         ") -> " + c + " {\n  ^bb0(%x: " + a + ", %y: " + b + "):\n" +
         "    %m = kiln.matmul %x, %y : " + a + ", " + b + " -> " + c + "\n" +
         "    kiln.yield %m : " + c + "\n  }\n  return %0 : " + c + "\n}\n";
}

std::string elementwiseKernel() {
  std::string t = "tensor<64x256xf32>";
  return "func.func @f(%a: " + t + ") -> " + t + " {\n  %0 = kiln.kernel on \"vulkan:0\" (%a) : (" +
         t + ") -> " + t + " {\n  ^bb0(%x: " + t + "):\n    %e = kiln.exp %x : " + t +
         "\n    %t = kiln.tanh %e : " + t + "\n    kiln.yield %t : " + t + "\n  }\n  return %0 : " +
         t + "\n}\n";
}

rt::AdapterInfo h200Like() {
  rt::AdapterInfo adapter;
  adapter.vendorId = 0x10de;
  adapter.deviceId = 0x2335;
  adapter.driverVersion = 100;
  adapter.pipelineCacheUUID[0] = 7;
  return adapter;
}

TEST(TuningKeys, EveryComponentChangesTheKey) {
  std::lock_guard<std::mutex> lock(session().mutex);
  std::string base = deviceFingerprint(h200Like(), CompilerOptions());
  auto key = [](const std::string &text, const std::string &fingerprint) {
    mlir::OwningOpRef<mlir::ModuleOp> module = parseKernel(text);
    return tuningKey(kernelIn(*module), fingerprint);
  };
  std::vector<std::pair<std::string, std::string>> keys = {
      {"base", key(matmulKernel(64, 32, 48), base)},
      {"m", key(matmulKernel(65, 32, 48), base)},
      {"k", key(matmulKernel(64, 33, 48), base)},
      {"n", key(matmulKernel(64, 32, 49), base)},
      {"dtype", key(matmulKernel(64, 32, 48, "f16"), base)},
      {"cpu", key(matmulKernel(64, 32, 48), cpuFingerprint(CompilerOptions()))},
  };
  auto field = [&](const char *name, auto change) {
    rt::AdapterInfo adapter = h200Like();
    change(adapter);
    keys.push_back({name, key(matmulKernel(64, 32, 48), deviceFingerprint(adapter, CompilerOptions()))});
  };
  field("vendor", [](rt::AdapterInfo &a) { a.vendorId = 0x1002; });
  field("device", [](rt::AdapterInfo &a) { a.deviceId = 0x2336; });
  field("driver", [](rt::AdapterInfo &a) { a.driverVersion = 101; });
  for (int byte : {0, 15})
    field("pipelineCacheUUID", [&](rt::AdapterInfo &a) { a.pipelineCacheUUID[byte] ^= 0x80; });
  std::set<std::string> distinct;
  for (const auto &[name, k] : keys)
    EXPECT_TRUE(distinct.insert(k).second) << name << " did not change the key";
  // The versions are in every key: a new compiler release or search space
  // reads none of the old records.
  EXPECT_NE(keys[0].second.find(std::string("compiler ") + compilerVersion()), std::string::npos);
  EXPECT_NE(keys[0].second.find("search space " + std::to_string(kSearchSpaceVersion)),
            std::string::npos);
  // A compiled kernel's key also names this build of the compiler.
  EXPECT_NE(compilerBuild().find(compilerVersion()), std::string::npos);
  EXPECT_NE(compilerBuild().find(" build "), std::string::npos);
  EXPECT_EQ(compilerBuild().find("unknown"), std::string::npos) << compilerBuild();
}

TEST(TuningKeys, ConfigsChangeTheKernelButNotItsTuningKey) {
  std::lock_guard<std::mutex> lock(session().mutex);
  std::string fp = deviceFingerprint(h200Like(), CompilerOptions());
  std::vector<std::string> configs = {
      "config {form = \"gemm\", tile = array<i64: 64, 64, 16>, thread = array<i64: 4, 4>}",
      "config {form = \"gemm\", tile = array<i64: 32, 64, 16>, thread = array<i64: 4, 4>}",
      "config {form = \"gemm\", tile = array<i64: 64, 32, 16>, thread = array<i64: 4, 4>}",
      "config {form = \"gemm\", tile = array<i64: 64, 64, 8>, thread = array<i64: 4, 4>}",
      "config {form = \"gemm\", tile = array<i64: 64, 64, 16>, thread = array<i64: 8, 4>}",
      "config {form = \"gemm\", tile = array<i64: 64, 64, 16>, thread = array<i64: 4, 8>}",
      "config {form = \"gemm\", tile = array<i64: 64, 64, 16>, thread = array<i64: 4, 4>, "
      "split_k = 2}",
      "config {form = \"gemm\", tile = array<i64: 64, 64, 16>, thread = array<i64: 4, 4>, "
      "stages = 2}",
  };
  std::set<std::string> texts, tuningKeys;
  for (const std::string &config : configs) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        parseKernel(matmulKernel(64, 32, 48, "f32", "vulkan:0", config));
    KernelOp kernel = kernelIn(*module);
    EXPECT_TRUE(texts.insert(kernelText(kernel)).second) << config;
    tuningKeys.insert(tuningKey(kernel, fp));
    EXPECT_TRUE(kernel.getConfigAttr()) << "the key is taken without touching the config";
  }
  EXPECT_EQ(tuningKeys.size(), 1u);
}

/// Tunes the one kernel of `text` on `device` with `options`; the
/// candidates it searched come back in `candidates`.
TuneResult tuneOn(const std::string &text, rt::Device &device, const TuneOptions &options,
                  std::vector<KernelConfig> &candidates, std::string &hash) {
  Session &s = session();
  auto lock = lockForCompile(s);
  mlir::OwningOpRef<mlir::ModuleOp> module = parseKernel(text);
  KernelOp kernel = kernelIn(*module);
  rt::VulkanDevice *vulkan = device.replayDevice();
  DeviceLimits limits = vulkan ? gpuTargetOf(vulkan->adapter(), s.options).limits : DeviceLimits();
  candidates = candidateKernelConfigs(kernel, vulkan ? &limits : nullptr);
  hash = tuningKeyHash(tuningKey(kernel, vulkan ? deviceFingerprint(vulkan->adapter(), s.options)
                                              : cpuFingerprint(s.options)));
  return tuneKernel(s, kernel, device, options);
}

rt::Device *runtimeDeviceNamed(const std::string &name) {
  rt::StatusOr<rt::Device *> device = rt::findDevice(name);
  return device.isOk() ? *device : nullptr;
}

/// Replayed times make candidate `winner` fastest and `second` next.
TimingReplay replayFavouring(const std::string &hash, const std::vector<KernelConfig> &candidates,
                             size_t winner, size_t second) {
  TimingReplay replay;
  for (size_t i = 0; i < candidates.size(); ++i)
    replay.seconds[hash][candidates[i].str()] = i == winner ? 0.5 : i == second ? 0.6 : 1.0;
  return replay;
}

struct TuneCase {
  const char *device;
  std::string text;
};

std::vector<TuneCase> tuneCases() {
  return {{"cpu:0", matmulKernel(32, 64, 96, "f32", "cpu:0")}, {"vulkan:0", elementwiseKernel()}};
}

TEST(Tuner, ReplayPicksTheRecordedWinner) {
  for (const TuneCase &c : tuneCases()) {
    rt::Device *device = runtimeDeviceNamed(c.device);
    if (!device) {
      std::printf("[  SKIPPED ] %s: no such device here\n", c.device);
      continue;
    }
    std::vector<KernelConfig> candidates;
    std::string hash;
    // First pass: only to learn the candidates and the key.
    TuneOptions probe;
    probe.runs = 1;
    probe.warmups = 0;
    probe.budgetSeconds = 1e-9;
    tuneOn(c.text, *device, probe, candidates, hash);
    ASSERT_GE(candidates.size(), 3u) << c.device;
    size_t winner = candidates.size() - 1;
    TimingReplay replay = replayFavouring(hash, candidates, winner, 1);
    TuneOptions options;
    options.runs = 1;
    options.warmups = 0;
    options.replay = &replay;
    TuneResult result = tuneOn(c.text, *device, options, candidates, hash);
    EXPECT_EQ(result.best.str(), candidates[winner].str()) << c.device;
    EXPECT_EQ(result.bestSeconds, 0.5) << c.device;
    EXPECT_EQ(result.defaultSeconds, 1.0) << c.device;
    EXPECT_EQ(result.wrong, 0) << c.device;
    EXPECT_EQ(result.tried + result.failed, result.candidates) << c.device;
  }
}

TEST(Tuner, AWrongCandidateNeverWins) {
  for (const TuneCase &c : tuneCases()) {
    rt::Device *device = runtimeDeviceNamed(c.device);
    if (!device) {
      std::printf("[  SKIPPED ] %s: no such device here\n", c.device);
      continue;
    }
    std::vector<KernelConfig> candidates;
    std::string hash;
    TuneOptions probe;
    probe.runs = 1;
    probe.warmups = 0;
    probe.budgetSeconds = 1e-9;
    tuneOn(c.text, *device, probe, candidates, hash);
    ASSERT_GE(candidates.size(), 3u);
    size_t fastest = candidates.size() - 1, second = 1;
    TimingReplay replay = replayFavouring(hash, candidates, fastest, second);
    TuneOptions options;
    options.runs = 1;
    options.warmups = 0;
    options.replay = &replay;
    // The fastest candidate computes one element wrong by 1%.
    std::string bad = candidates[fastest].str();
    options.corruptOutput = [&](const KernelConfig &config,
                                std::vector<std::vector<uint8_t>> &outputs) {
      if (config.str() != bad)
        return;
      float v;
      std::memcpy(&v, outputs[0].data(), 4);
      v *= 1.01f;
      std::memcpy(outputs[0].data(), &v, 4);
    };
    TuneResult result = tuneOn(c.text, *device, options, candidates, hash);
    EXPECT_EQ(result.wrong, 1) << c.device;
    EXPECT_NE(result.best.str(), bad) << c.device;
    EXPECT_EQ(result.best.str(), candidates[second].str()) << c.device;
  }
}

/// Double-buffered tiles (stages = 2) compute what one buffer does: every
/// such candidate of a ragged matmul and a padded, strided convolution runs
/// on the GPU and agrees with the default config's output (the tuner's own
/// check), none refused by the builders.
TEST(Tuner, DoubleBufferedTilesAgreeWithTheDefault) {
  rt::Device *device = runtimeDeviceNamed("vulkan:0");
  if (!device) {
    std::printf("[  SKIPPED ] vulkan:0: no such device here\n");
    return;
  }
  std::string conv =
      "func.func @f(%x: tensor<2x12x11x13xf32>, %w: tensor<40x12x3x3xf32>) -> "
      "tensor<2x40x6x7xf32> {\n"
      "  %0 = kiln.kernel on \"vulkan:0\" (%x, %w) : (tensor<2x12x11x13xf32>, "
      "tensor<40x12x3x3xf32>) -> tensor<2x40x6x7xf32> {\n"
      "  ^bb0(%a: tensor<2x12x11x13xf32>, %f: tensor<40x12x3x3xf32>):\n"
      "    %y = kiln.conv2d %a, %f strides [2, 2] padding [1, 1] dilation [1, 1] groups 1\n"
      "        : tensor<2x12x11x13xf32>, tensor<40x12x3x3xf32> -> tensor<2x40x6x7xf32>\n"
      "    kiln.yield %y : tensor<2x40x6x7xf32>\n  }\n  return %0 : tensor<2x40x6x7xf32>\n}\n";
  for (const std::string &text : {matmulKernel(100, 70, 130), conv}) {
    std::vector<KernelConfig> candidates;
    std::string hash;
    TuneOptions options;
    options.runs = 1;
    options.warmups = 0;
    options.only = "stages=2 tile=32x32x8";
    TuneResult result = tuneOn(text, *device, options, candidates, hash);
    int doubled = 0;
    for (const KernelConfig &c : candidates)
      doubled += configMatches(c, options.only);
    EXPECT_GE(doubled, 2) << text;
    EXPECT_EQ(result.candidates, doubled + 1) << "the default and the stage-2 candidates";
    EXPECT_EQ(result.tried, result.candidates) << text;
    EXPECT_EQ(result.failed, 0) << text;
    EXPECT_EQ(result.wrong, 0) << text;
  }
}

/// --only words no candidate holds (a misspelt "stage=2") are an error
/// naming a real config line, not a search of the defaults alone.
TEST(Tuner, OnlyWordsThatMatchNothingAreAnError) {
  std::string graph = "func.func @graph() -> tensor<64x48xf32> {\n"
                      "  %a = kiln.input 0 on \"cpu:0\" : tensor<64x32xf32>\n"
                      "  %b = kiln.input 1 on \"cpu:0\" : tensor<32x48xf32>\n"
                      "  %y = kiln.matmul %a, %b : tensor<64x32xf32>, tensor<32x48xf32> -> tensor<64x48xf32>\n"
                      "  return %y : tensor<64x48xf32>\n}\n";
  TuneGraphOptions options;
  options.device = "cpu:0";
  options.only = "stage=2";
  try {
    tune_graph(graph, "g.mlir", options);
    ADD_FAILURE() << "a search of nothing ran";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("matches no candidate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cpu_gemm rows="), std::string::npos) << e.what();
  }
}

/// The form an f16 matmul takes on each Vulkan device here, and whether
/// that device has f16 cooperative matrices.
std::vector<std::pair<std::string, bool>> halfMatmulForms(std::vector<KernelConfig> &forms) {
  std::vector<std::pair<std::string, bool>> devices;
  for (const Device &d : test::availableDevices()) {
    if (d.api() != "vulkan")
      continue;
    rt::Device *device = runtimeDeviceNamed(d.name());
    DeviceLimits limits =
        gpuTargetOf(device->replayDevice()->adapter(), CompilerOptions::fromEnvironment()).limits;
    std::lock_guard<std::mutex> lock(session().mutex);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        parseKernel(matmulKernel(64, 96, 128, "f16", d.name()));
    forms.push_back(defaultKernelConfig(kernelIn(*module), &limits));
    devices.push_back({d.name(), limits.cooperativeMatrix});
  }
  return devices;
}

/// GPUs without 16x16x16 f16 cooperative matrices (lavapipe) build f16
/// matmuls in the tiled form (exact: MatmulOnEveryDevice.
/// HalfPrecisionExactOnSmallIntegers).
TEST(CooperativeMatrix, GpusWithoutThemTakeTheTiledForm) {
  std::vector<KernelConfig> forms;
  std::vector<std::pair<std::string, bool>> devices = halfMatmulForms(forms);
  for (size_t i = 0; i < devices.size(); ++i)
    if (!devices[i].second)
      EXPECT_EQ(forms[i].form, KernelConfig::Form::Gemm) << devices[i].first;
}

/// GPUs with them (the H200) build f16 matmuls on the tensor cores. Skipped
/// where no GPU here has them; the H200 runs of scripts/half-gpu-bench.sh
/// check that form's results (no compiler runs on that machine).
TEST(CooperativeMatrix, GpusWithThemTakeTheCoopForm) {
  std::vector<KernelConfig> forms;
  std::vector<std::pair<std::string, bool>> devices = halfMatmulForms(forms);
  int with = 0;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].second) {
      ++with;
      EXPECT_EQ(forms[i].form, KernelConfig::Form::CoopGemm) << devices[i].first;
    }
  if (with == 0)
    GTEST_SKIP() << "no GPU here has f16 cooperative matrices (VK_KHR_cooperative_matrix)";
}

/// --only's words are whole words of the config line.
TEST(Tuner, OnlyMatchesWholeConfigWords) {
  KernelConfig c;
  c.form = KernelConfig::Form::Gemm;
  c.gemm = {64, 128, 8, 8, 8, 1, 2};
  EXPECT_TRUE(configMatches(c, ""));
  EXPECT_TRUE(configMatches(c, "stages=2"));
  EXPECT_TRUE(configMatches(c, "thread=8x8  tile=64x128x8"));
  EXPECT_FALSE(configMatches(c, "tile=64x128"));
  EXPECT_FALSE(configMatches(c, "stages=2 split_k=2"));
  c.gemm.stages = 1;
  EXPECT_FALSE(configMatches(c, "stages=2"));
  // Alternatives: every word of one of them.
  EXPECT_TRUE(configMatches(c, "stages=2 | tile=64x128x8 thread=8x8"));
  EXPECT_TRUE(configMatches(c, "tile=32x32x8|tile=64x128x8"));
  EXPECT_FALSE(configMatches(c, "stages=2 | tile=64x128x8 split_k=2"));
}

// --- Processes sharing one cache directory --------------------------------

std::string selfPath() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

struct ChildRun {
  int status = -1;
  std::string output; // stdout and stderr
  std::map<std::string, std::string> values; // "key value" lines of the child's report
};

/// Runs this test binary's TuningChild.Run in a fresh process with `env`.
ChildRun runChild(const std::string &env, const std::string &report) {
  std::string command = env + " KILN_TUNING_CHILD_REPORT=" + report + " " + selfPath() + " 2>&1";
  ChildRun run;
  FILE *pipe = popen(command.c_str(), "r");
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe))
    run.output.append(buffer, n);
  run.status = pclose(pipe);
  std::ifstream in(report);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name, value;
    fields >> name >> value;
    run.values[name] = value;
  }
  std::filesystem::remove(report);
  return run;
}

} // namespace

/// What the child process runs instead of the tests (TestMain.cpp): the
/// transformer block of ModelBlockTest (smaller), on every device, from
/// fixed inputs; it reports its stats and a hash of its outputs' bytes.
int kilnTuningChild(const char *report) {
  std::ofstream out(report);
  reset_stats();
  // KILN_TUNING_CHILD_SMALL: a kernel of each GPU form with few candidates
  // (an elementwise chain, a softmax), tuned when KILN_AUTOTUNE=on.
  if (std::getenv("KILN_TUNING_CHILD_SMALL")) {
    for (const Device &device : test::availableDevices()) {
      std::vector<float> values(64 * 256);
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = std::sin(0.37f * float(i));
      Tensor x = Tensor::from(values, {64, 256}, device);
      std::vector<float> y = softmax(tanh(exp(x) * 0.5f), -1).to_vector<float>();
      out << "hash_" << device.name() << " " << rt::fnv1a64(y.data(), y.size() * 4) << "\n";
    }
    Stats st = stats();
    out << "compiled " << st.kernels_compiled << "\nloaded " << st.kernels_loaded
        << "\ntuned " << st.kernels_tuned << "\n";
    return out ? 0 : 1;
  }
  for (const Device &device : test::availableDevices()) {
    const int T = 16, D = 64, F = 128;
    auto param = [&](Shape shape, float scale, int salt) {
      size_t count = 1;
      for (int64_t d : shape)
        count *= static_cast<size_t>(d);
      std::vector<float> values(count);
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = scale * std::sin(0.37f * float(i) + float(salt));
      return Tensor::from(values, shape, device);
    };
    Tensor x = param({T, D}, 1.0f, 1);
    Tensor h = layer_norm(x, param({D}, 0.1f, 2) + 1.0f, param({D}, 0.1f, 3));
    Tensor q = linear(h, param({D, D}, 0.2f, 4), param({D}, 0.1f, 5));
    Tensor k = linear(h, param({D, D}, 0.2f, 6), param({D}, 0.1f, 7));
    Tensor p = softmax(matmul(q, k.transpose(0, 1)) * 0.125f, -1);
    Tensor x1 = matmul(p, h) + x;
    Tensor y = linear(gelu(linear(x1, param({F, D}, 0.2f, 8), param({F}, 0.1f, 9))),
                      param({D, F}, 0.2f, 10), param({D}, 0.1f, 11)) + x1;
    std::vector<float> values = y.to_vector<float>();
    out << "hash_" << device.api() << " "
        << rt::fnv1a64(values.data(), values.size() * sizeof(float)) << "\n";
  }
  Stats st = stats();
  out << "compiled " << st.kernels_compiled << "\nloaded " << st.kernels_loaded << "\n"
      << "tuning_hits " << st.tuning_hits << "\ntuning_misses " << st.tuning_misses << "\n";
  return out ? 0 : 1;
}

namespace {

std::string freshDirectory(const char *name) {
  std::string dir = (std::filesystem::temp_directory_path() /
                     (std::string(name) + "-" + std::to_string(::getpid())))
                        .string();
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(WarmStart, ASecondProcessCompilesNothing) {
  std::string dir = freshDirectory("kiln-warm");
  std::string env = "KILN_CACHE_DIR=" + dir;
  ChildRun cold = runChild(env, dir + ".report");
  ASSERT_EQ(cold.status, 0) << cold.output;
  ChildRun warm = runChild(env, dir + ".report");
  ASSERT_EQ(warm.status, 0) << warm.output;
  EXPECT_GT(std::stoul(cold.values["compiled"]), 0u);
  EXPECT_EQ(cold.values["loaded"], "0");
  EXPECT_EQ(warm.values["compiled"], "0") << warm.output;
  EXPECT_EQ(warm.values["loaded"], cold.values["compiled"]);
  // The code read back computes the same bytes on every device.
  for (const auto &[name, value] : cold.values)
    if (name.rfind("hash_", 0) == 0)
      EXPECT_EQ(warm.values[name], value) << name;
  std::filesystem::remove_all(dir);
}

TEST(WarmStart, EightProcessesTuneAndCompileIntoOneCache) {
  std::string dir = freshDirectory("kiln-eight");
  std::filesystem::create_directories(dir);
  // All eight start before any finishes: they race to create the
  // database, tune the same kernels and store the same code.
  std::vector<FILE *> pipes;
  for (int i = 0; i < 8; ++i) {
    std::string report = dir + ".report" + std::to_string(i);
    std::string command = "KILN_CACHE_DIR=" + dir +
                          " KILN_AUTOTUNE=on KILN_TUNING_CHILD_SMALL=1 KILN_TUNING_CHILD_REPORT=" +
                          report + " " + selfPath() + " >" + report + ".log 2>&1";
    pipes.push_back(popen(command.c_str(), "r"));
  }
  std::map<std::string, std::string> first;
  unsigned long tuned = 0;
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(pclose(pipes[i]), 0) << "child " << i;
    std::string report = dir + ".report" + std::to_string(i);
    std::ifstream in(report);
    std::map<std::string, std::string> values;
    for (std::string name, value; in >> name >> value;)
      values[name] = value;
    EXPECT_FALSE(values.empty()) << "child " << i << " wrote no report";
    tuned += values.count("tuned") ? std::stoul(values["tuned"]) : 0;
    // Every process computes the same bytes on every device.
    for (const auto &[name, value] : values)
      if (name.rfind("hash_", 0) == 0) {
        if (first.count(name))
          EXPECT_EQ(value, first[name]) << name << " of child " << i;
        else
          first[name] = value;
      }
    std::filesystem::remove(report);
    std::filesystem::remove(report + ".log");
  }
  EXPECT_GT(tuned, 0u) << "KILN_AUTOTUNE=on tuned nothing";
  std::shared_ptr<rt::Store> store = rt::Store::open(dir);
  ASSERT_TRUE(store->enabled()) << store->whyDisabled();
  rt::Status verified = store->verify();
  EXPECT_TRUE(verified.isOk()) << verified.message();
  // One record per tuned kernel, whoever wrote it first: the keys are
  // unique, and each GPU kernel of the graph has its record.
  std::set<std::string> tuningKeys;
  size_t tuning = 0;
  for (const rt::Store::Entry &entry : store->list())
    if (entry.table == "tuning") {
      ++tuning;
      tuningKeys.insert(entry.key);
    }
  EXPECT_EQ(tuning, tuningKeys.size());
  size_t gpus = 0;
  for (const Device &device : test::availableDevices())
    gpus += device.api() == "vulkan";
  // The chain fuses into the softmax: one kernel per device (virtual
  // devices of one adapter share a fingerprint, not the device name in the
  // kernel), the CPU's included.
  EXPECT_EQ(tuning, gpus + 1);
  store.reset();
  std::filesystem::remove_all(dir);
}

TEST(WarmStart, ACorruptCacheIsAWarningAndTheSameAnswer) {
  std::string dir = freshDirectory("kiln-corrupt");
  ChildRun reference = runChild("KILN_CACHE_DIR=off", dir + ".report");
  ASSERT_EQ(reference.status, 0) << reference.output;
  std::filesystem::create_directories(dir);
  {
    std::ofstream garbage(dir + "/kiln.db", std::ios::binary);
    for (int i = 0; i < 4096; ++i)
      garbage.put(static_cast<char>(i * 7919));
  }
  ChildRun corrupt = runChild("KILN_CACHE_DIR=" + dir, dir + ".report");
  ASSERT_EQ(corrupt.status, 0) << corrupt.output;
  EXPECT_NE(corrupt.output.find("kiln: cache " + dir + "/kiln.db"), std::string::npos)
      << corrupt.output;
  EXPECT_NE(corrupt.output.find("running without it"), std::string::npos) << corrupt.output;
  for (const auto &[name, value] : reference.values)
    if (name.rfind("hash_", 0) == 0)
      EXPECT_EQ(corrupt.values[name], value) << name;
  std::filesystem::remove_all(dir);
}

TEST(WarmStart, ABadPipelineBlobIsRefusedBeforeTheDriverSeesIt) {
  rt::Device *device = runtimeDeviceNamed("vulkan:0");
  if (!device)
    GTEST_SKIP() << "no Vulkan device";
  const rt::AdapterInfo &adapter = device->replayDevice()->adapter();
  rt::PipelineCacheIdentity id;
  id.vendorId = adapter.vendorId;
  id.deviceId = adapter.deviceId;
  id.driverVersion = adapter.driverVersion;
  std::memcpy(id.uuid, adapter.pipelineCacheUUID, 16);
  std::string dir = freshDirectory("kiln-blob");
  {
    std::shared_ptr<rt::Store> store = rt::Store::open(dir);
    ASSERT_TRUE(store->enabled());
    // Another driver version's data under this device's key.
    rt::PipelineCacheIdentity other = id;
    other.driverVersion ^= 1;
    std::vector<uint8_t> payload(64, 0);
    payload[0] = 32;
    payload[4] = 1;
    std::vector<uint8_t> blob = rt::wrapPipelineCache(other, payload.data(), payload.size());
    ASSERT_TRUE(store->putPipelineCache(rt::fingerprint(id), blob.data(), blob.size()));
  }
  ChildRun run = runChild("KILN_CACHE_DIR=" + dir, dir + ".report");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("is not usable"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("driver version"), std::string::npos) << run.output;
  std::filesystem::remove_all(dir);
}
} // namespace
