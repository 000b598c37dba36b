// What loading a .kiln costs before any device is touched, per megabyte of
// weights: the seal (SHA-256 over the whole file), the FlatBuffers
// verifier and the meaning checks; and SHA-256 alone, on the CPU's SHA
// instructions where it has them and portable, side by side.
//
//   build/bin/kiln-bench-artifact [--benchmark_filter=...]
//
// Links the runtime only (no MLIR, no LLVM).

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Sha256.h"

#include <benchmark/benchmark.h>

#include <cstdlib>

using namespace kiln::rt;

namespace {
/// A model of one weight of `megabytes` that its program returns: the
/// smallest file that passes every check.
std::vector<uint8_t> fileOf(int64_t megabytes) {
  Artifact artifact;
  TensorType type{{megabytes * (1 << 18)}, ElementType::f32};
  std::vector<uint8_t> data(type.bytes());
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = uint8_t(i * 2654435761u >> 24);
  artifact.weights.push_back({"w", type, Bytes(std::move(data))});
  artifact.outputs.push_back({"y", type});
  auto program = std::make_shared<Program>();
  program->devices = {"cpu:0"};
  program->inputs = {type};
  program->values = {{type, 0, ProgramValue::kNoSlot}};
  ProgramStep input;
  input.kind = ProgramStep::Kind::input;
  input.results = {0};
  program->steps = {input};
  program->outputs = {0};
  artifact.programs.push_back({"cpu", "", program, {{true, 0}}});
  StatusOr<std::vector<uint8_t>> bytes = serializeArtifact(artifact);
  if (!bytes.isOk())
    std::abort();
  return *bytes;
}

int64_t smoke(int64_t megabytes) { return std::getenv("KILN_BENCH_SMOKE") ? 1 : megabytes; }

void BM_ParseArtifact(benchmark::State &state) {
  auto file = std::make_shared<const std::vector<uint8_t>>(fileOf(smoke(state.range(0))));
  for (auto _ : state) {
    // Weights refer to the bytes, as they do to a mapped file (loadArtifact).
    StatusOr<Artifact> parsed = parseArtifact(file->data(), file->size(), "bench.kiln", file);
    if (!parsed.isOk())
      state.SkipWithError(parsed.status().message().c_str());
    benchmark::DoNotOptimize(parsed);
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(file->size()));
}
BENCHMARK(BM_ParseArtifact)->Arg(4)->Arg(48)->Unit(benchmark::kMillisecond);

template <bool portable> void BM_Sha256(benchmark::State &state) {
  std::vector<uint8_t> bytes(smoke(state.range(0)) << 20, 7);
  for (auto _ : state)
    benchmark::DoNotOptimize(portable ? sha256Portable(bytes.data(), bytes.size())
                                      : sha256(bytes.data(), bytes.size()));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes.size()));
  state.SetLabel(portable ? "portable" : sha256UsesCpuInstructions() ? "SHA instructions"
                                                                      : "portable (no SHA)");
}
BENCHMARK(BM_Sha256<false>)->Name("BM_Sha256")->Arg(48)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sha256<true>)->Name("BM_Sha256Portable")->Arg(48)->Unit(benchmark::kMillisecond);
} // namespace

BENCHMARK_MAIN();
