// Model latency at batch 1, ahead of time: writes a transformer encoder
// block (128 tokens, width 512, 8 heads, MLP 2048) and a ResNet basic block
// (64 channels, 56x56) as .kiln files with their weights and inputs as .npy,
// for kiln-run on a GPU machine without the compiler, next to the same
// blocks in PyTorch (bench/torch_blocks_cuda.py reads the same weights).
//
//   build/bin/kiln-bench-aot-blocks OUTDIR [--target vulkan|cpu,...] [--cpu-isa LEVEL]
//
// Compile for another GPU's limits with KILN_GPU_LIMITS (scripts/aot-gpu-bench.sh).

#include "kiln/kiln.h"
#include "kiln/runtime/Npy.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace kiln;

namespace {
std::string out;

void save(const Tensor &t, const std::string &name) {
  std::vector<float> values = t.to_vector();
  rt::NpyArray array;
  array.type = {t.shape(), rt::ElementType::f32};
  array.data.resize(values.size() * 4);
  std::memcpy(array.data.data(), values.data(), array.data.size());
  if (rt::Status s = rt::writeNpy(out + "/" + name + ".npy", array); !s.isOk())
    throw Error(s.message());
}

Tensor param(std::map<std::string, Tensor> &weights, const std::string &name, Shape shape,
             float scale, float offset = 0.0f) {
  Tensor t = Tensor::randn(shape) * scale + offset;
  t = Tensor::from(t.to_vector(), shape); // a committed leaf, not a graph
  weights[name] = t;
  return t;
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kiln-bench-aot-blocks OUTDIR [--target vulkan,cpu]\n");
    return 2;
  }
  out = argv[1];
  std::filesystem::create_directories(out);
  CompileOptions options;
  options.targets = {"vulkan"};
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--target") {
      options.targets.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');)
        options.targets.push_back(item);
    } else if (flag == "--cpu-isa") {
      options.cpu_isa = argv[i + 1];
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  manual_seed(11);

  // Transformer encoder block, pre-norm, as in the tests (ModelBlockTest).
  {
    const int64_t T = 128, D = 512, H = 8, F = 2048, Dh = D / H;
    std::map<std::string, Tensor> w;
    Tensor g1 = param(w, "ln1_w", {D}, 0.1f, 1.0f), n1 = param(w, "ln1_b", {D}, 0.1f);
    Tensor wq = param(w, "wq", {D, D}, 0.04f), bq = param(w, "bq", {D}, 0.02f);
    Tensor wk = param(w, "wk", {D, D}, 0.04f), bk = param(w, "bk", {D}, 0.02f);
    Tensor wv = param(w, "wv", {D, D}, 0.04f), bv = param(w, "bv", {D}, 0.02f);
    Tensor wo = param(w, "wo", {D, D}, 0.04f), bo = param(w, "bo", {D}, 0.02f);
    Tensor g2 = param(w, "ln2_w", {D}, 0.1f, 1.0f), n2 = param(w, "ln2_b", {D}, 0.1f);
    Tensor f1 = param(w, "fc1_w", {F, D}, 0.04f), c1 = param(w, "fc1_b", {F}, 0.02f);
    Tensor f2 = param(w, "fc2_w", {D, F}, 0.02f), c2 = param(w, "fc2_b", {D}, 0.02f);
    Tensor x = Tensor::from(Tensor::randn({T, D}).to_vector(), {T, D});
    auto block = [&](const Tensor &x) {
      Tensor h = layer_norm(x, g1, n1);
      Tensor q = linear(h, wq, bq).reshape({T, H, Dh}).permute({1, 0, 2});
      Tensor k = linear(h, wk, bk).reshape({T, H, Dh}).permute({1, 2, 0});
      Tensor v = linear(h, wv, bv).reshape({T, H, Dh}).permute({1, 0, 2});
      Tensor p = softmax(matmul(q, k) * (1.0f / std::sqrt(float(Dh))), -1);
      Tensor x1 = linear(matmul(p, v).permute({1, 0, 2}).reshape({T, D}), wo, bo) + x;
      return linear(gelu(linear(layer_norm(x1, g2, n2), f1, c1)), f2, c2) + x1;
    };
    options.input_names = {"x"};
    options.output_names = {"y"};
    compile({block(x)}, {x}, options).save(out + "/transformer.kiln");
    // The graph, for kiln-tune (scripts/tune-gpu.sh).
    std::ofstream(out + "/transformer.mlir") << export_graph({block(x)});
    for (auto &[name, t] : w)
      save(t, "transformer_" + name);
    save(x, "transformer_x");
    save(block(x), "transformer_y_jit");
  }

  // ResNet basic block: conv3x3-bn-relu-conv3x3-bn + x, relu.
  {
    const int64_t C = 64, S = 56;
    std::map<std::string, Tensor> w;
    Tensor k1 = param(w, "conv1_w", {C, C, 3, 3}, 0.05f), k2 = param(w, "conv2_w", {C, C, 3, 3}, 0.05f);
    Tensor m1 = param(w, "bn1_mean", {C}, 0.1f), v1 = param(w, "bn1_var", {C}, 0.1f, 1.0f);
    Tensor s1 = param(w, "bn1_w", {C}, 0.1f, 1.0f), t1 = param(w, "bn1_b", {C}, 0.1f);
    Tensor m2 = param(w, "bn2_mean", {C}, 0.1f), v2 = param(w, "bn2_var", {C}, 0.1f, 1.0f);
    Tensor s2 = param(w, "bn2_w", {C}, 0.1f, 1.0f), t2 = param(w, "bn2_b", {C}, 0.1f);
    Tensor x = Tensor::from(Tensor::randn({1, C, S, S}).to_vector(), {1, C, S, S});
    auto block = [&](const Tensor &x) {
      Tensor y = relu(batch_norm(conv2d(x, k1, {1, 1}, {1, 1}), m1, v1, s1, t1));
      return relu(batch_norm(conv2d(y, k2, {1, 1}, {1, 1}), m2, v2, s2, t2) + x);
    };
    options.input_names = {"x"};
    options.output_names = {"y"};
    compile({block(x)}, {x}, options).save(out + "/resnet_block.kiln");
    std::ofstream(out + "/resnet_block.mlir") << export_graph({block(x)});
    for (auto &[name, t] : w)
      save(t, "resnet_" + name);
    save(x, "resnet_x");
    save(block(x), "resnet_y_jit");
  }
  std::printf("wrote %s/transformer.kiln and %s/resnet_block.kiln with weights and inputs\n",
              out.c_str(), out.c_str());
}
