// Whole networks written with the Tensor API (examples/networks): ResNet-18,
// MobileNetV2 and SqueezeNet 1.1 at 224x224, and a BERT-base encoder layer (768 wide, 12
// heads, 128 tokens), at batch 1 and 8. Each iteration records the network
// again and realizes it, as a user's inference loop does (the graph cache
// turns the second recording into a replay of its Program); the *Program
// benchmarks compile the network once and time Program::run alone.
//
//   build/bin/kiln-bench-networks [--benchmark_filter=...]      timing, cpu:0
//   KILN_BENCH_DEVICE=vulkan:0 ...                              another device
//   kiln-bench-networks --check NET DIR [DEVICE]                PyTorch's weights
//   kiln-bench-networks --profile NET [BATCH] [RUNS]            kiln::profile's table
//
// --check loads DIR/<state_dict key>.npy and DIR/x.npy, runs NET (resnet18,
// mobilenet_v2, squeezenet1_1 or encoder) once and writes DIR/kiln_y.npy;
// bench/compare_networks.py compares it with PyTorch's output, then times
// Kiln, PyTorch and ONNX Runtime side by side. KILN_BENCH_SMOKE=1 runs each
// network once at 64x64 / 16 tokens (CI).

#include "../examples/networks/KilnOps.h"

#include "kiln/runtime/Npy.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

using namespace kiln;
using namespace kiln::networks;

namespace {
bool smoke() { return std::getenv("KILN_BENCH_SMOKE") != nullptr; }

Device benchDevice() {
  const char *name = std::getenv("KILN_BENCH_DEVICE");
  return name ? Device::parse(name) : Device::cpu();
}

Tensor randomInput(const Shape &shape, const Device &d) {
  Tensor t = Tensor::randn(shape);
  t = Tensor::from(t.to_vector(), shape, d);
  realize({t});
  return t;
}

Tensor build(const std::string &net, KilnOps &ops, const Tensor &x) {
  if (net == "resnet18")
    return resnet18(ops, x);
  if (net == "mobilenet_v2")
    return mobilenet_v2(ops, x);
  if (net == "squeezenet1_1")
    return squeezenet1_1(ops, x);
  if (net == "encoder")
    return encoder_layer(ops, x);
  throw Error("unknown network " + net + " (resnet18, mobilenet_v2, squeezenet1_1, encoder)");
}

// Each iteration records the network and realizes it; with `program`, the
// network is compiled once to a Program (kiln::compile, weights included)
// and each iteration is Program::run alone, as ONNX Runtime's session.run
// is timed: the warm latency without recording the graph.
void run(benchmark::State &state, const std::string &net, Shape inputShape, bool program) {
  Device d = benchDevice();
  manual_seed(1);
  auto weights = std::make_shared<RandomWeights>(d);
  KilnOps ops;
  ops.weight = [weights](const std::string &n, const Shape &s) { return (*weights)(n, s); };
  Tensor x = randomInput(inputShape, d);
  if (program) {
    CompileOptions options;
    options.targets = {d.api()};
    Program compiled = compile({build(net, ops, x)}, {x}, options);
    compiled.run({x}); // the first run binds the buffers
    for (auto _ : state) {
      std::vector<Tensor> y = compiled.run({x});
      benchmark::DoNotOptimize(y);
    }
  } else {
    realize({build(net, ops, x)}); // compile outside the timing
    for (auto _ : state) {
      Tensor y = build(net, ops, x);
      realize({y});
      benchmark::DoNotOptimize(y);
    }
  }
  state.counters["batch"] = double(inputShape[0]);
}

/// ResNet18, MobileNetV2, SqueezeNet11 and EncoderLayer at batch 1 and 8, each also as
/// <name>Program.
void registerBenchmarks() {
  int64_t side = smoke() ? 64 : 224, tokens = smoke() ? 16 : 128;
  const struct {
    const char *name, *net;
    std::function<Shape(int64_t)> shape;
  } nets[] = {
      {"ResNet18", "resnet18", [=](int64_t b) { return Shape{b, 3, side, side}; }},
      {"MobileNetV2", "mobilenet_v2", [=](int64_t b) { return Shape{b, 3, side, side}; }},
      {"SqueezeNet11", "squeezenet1_1", [=](int64_t b) { return Shape{b, 3, side, side}; }},
      {"EncoderLayer", "encoder", [=](int64_t b) { return Shape{b, tokens, 768}; }},
  };
  for (bool program : {false, true})
    for (const auto &n : nets)
      benchmark::RegisterBenchmark((std::string(n.name) + (program ? "Program" : "")).c_str(),
                                   [net = std::string(n.net), shape = n.shape,
                                    program](benchmark::State &state) {
                                     run(state, net, shape(state.range(0)), program);
                                   })
          ->Arg(1)
          ->Arg(8)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
}

Tensor loadNpy(const std::string &path, const Device &d) {
  auto array = rt::readNpy(path);
  if (!array.isOk())
    throw Error(array.status().message());
  if (array->type.element != rt::ElementType::f32)
    throw Error(path + ": expected float32 values");
  std::vector<float> values(array->data.size() / 4);
  std::memcpy(values.data(), array->data.data(), array->data.size());
  return Tensor::from(std::move(values), array->type.shape, d);
}


/// One network's kernels, each timed alone (random weights, cpu:0 or
/// KILN_BENCH_DEVICE).
int profileNetwork(const std::string &net, int64_t batch, int runs) {
  Device d = benchDevice();
  manual_seed(1);
  auto weights = std::make_shared<RandomWeights>(d);
  KilnOps ops;
  ops.weight = [weights](const std::string &n, const Shape &s) { return (*weights)(n, s); };
  Shape shape = net == "encoder" ? Shape{batch, 128, 768} : Shape{batch, 3, 224, 224};
  std::printf("%s", profile({build(net, ops, randomInput(shape, d))}, runs).table().c_str());
  return 0;
}

int check(const std::string &net, const std::string &dir, const Device &d) {
  KilnOps ops;
  ops.weight = [&](const std::string &name, const Shape &shape) {
    Tensor t = loadNpy(dir + "/" + name + ".npy", d);
    if (t.shape() != shape)
      throw Error(dir + "/" + name + ".npy has the wrong shape for " + net);
    return t;
  };
  Tensor x = loadNpy(dir + "/x.npy", d);
  Tensor y = build(net, ops, x);
  reset_stats();
  realize({y});
  std::printf("%s on %s: %llu kernels\n", net.c_str(), d.name().c_str(),
              (unsigned long long)stats().kernels_dispatched);
  std::vector<float> values = y.to_vector();
  rt::NpyArray out;
  out.type = {y.shape(), rt::ElementType::f32};
  out.data.resize(values.size() * 4);
  std::memcpy(out.data.data(), values.data(), out.data.size());
  if (rt::Status s = rt::writeNpy(dir + "/kiln_y.npy", out); !s.isOk())
    throw Error(s.message());
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  if (argc >= 4 && std::strcmp(argv[1], "--check") == 0) {
    try {
      return check(argv[2], argv[3], argc > 4 ? Device::parse(argv[4]) : Device::cpu());
    } catch (const std::exception &e) {
      std::fprintf(stderr, "kiln-bench-networks: %s\n", e.what());
      return 1;
    }
  }
  if (argc >= 3 && std::strcmp(argv[1], "--profile") == 0) {
    try {
      return profileNetwork(argv[2], argc > 3 ? std::atoi(argv[3]) : 1,
                            argc > 4 ? std::atoi(argv[4]) : 10);
    } catch (const std::exception &e) {
      std::fprintf(stderr, "kiln-bench-networks: %s\n", e.what());
      return 1;
    }
  }
  registerBenchmarks();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
