// Writes the kernels of the H200 kernel table (bench_kernels.cpp at GPU
// sizes: rows 4096 x 8192, conv batch 32) as kiln graphs, one .mlir each,
// for kiln-tune --emit-candidates (scripts/tune-gpu.sh), and the CPU
// table's batch-1 conv.
//
//   build/bin/kiln-bench-tune-graphs OUTDIR

#include "kiln/kiln.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace kiln;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kiln-bench-tune-graphs OUTDIR\n");
    return 2;
  }
  std::string out = argv[1];
  std::filesystem::create_directories(out);
  const int64_t rows = 4096, cols = 8192;
  // Data tensors (not constants, which fusion would fold into the kernels):
  // the graphs start from inputs; their values are never read.
  auto input = [](Shape shape) { return Tensor::randn(std::move(shape), Device::cpu()); };
  auto write = [&](const std::string &name, const Tensor &y) {
    std::ofstream(out + "/" + name + ".mlir") << export_graph({y});
  };
  Tensor x = input({rows, cols}), w = input({cols}), b = input({cols});
  write("chain", gelu(tanh(x * w + b) - 0.5f) * x);
  write("softmax", softmax(x, -1));
  write("layer_norm", layer_norm(x, w, b));
  write("row_sum", sum(x, {1}));
  for (int64_t n : {int64_t(1024), int64_t(4096)})
    write("matmul" + std::to_string(n), matmul(input({n, n}), input({n, n})));
  write("conv_resnet", conv2d(input({32, 64, 56, 56}), input({64, 64, 3, 3}), {1, 1}, {1, 1}));
  // The CPU table's conv (batch 1).
  write("conv_resnet_b1", conv2d(input({1, 64, 56, 56}), input({64, 64, 3, 3}), {1, 1}, {1, 1}));
  return 0;
}
