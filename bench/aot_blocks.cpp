// Model latency at batch 1, ahead of time: writes a transformer encoder
// block (128 tokens, width 512, 8 heads, MLP 2048) and a ResNet basic block
// (64 channels, 56x56) as .kiln files with their weights and inputs as .npy,
// for kiln-run on a GPU machine without the compiler, next to the same
// blocks in PyTorch (bench/torch_blocks_cuda.py reads the same weights).
//
//   build/bin/kiln-bench-aot-blocks OUTDIR [--target vulkan|cpu,...] [--cpu-isa LEVEL]
//                                   [--half on]
//
// --half on also writes both blocks in f16 (and bf16) at batch 1 and 32
// (transformer_f16_b1.kiln, ..., resnet_block_f16_b32.kiln) with their f16
// inputs (transformer_f16_x_b1.npy, ...): the end-to-end half-precision models; and
// both in f32 at batch 32 (transformer_f32_b32.kiln,
// resnet_block_f32_b32.kiln), what their bytes and times compare with.
//
// --split on writes the transformer as a stack of 4 blocks (each its own
// weights) at batch 8 (1024 rows) twice: split across two Vulkan devices,
// blocks 0-1 on vulkan:0 and 2-3 on vulkan:1 (transformer_stack_split.kiln), and whole on vulkan:0
// (transformer_stack_one.kiln), with transformer_stack_x.npy: the
// pipeline-parallel model (needs two Vulkan devices: KILN_VIRTUAL_DEVICES=2
// makes two of one adapter).
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
  rt::NpyArray array;
  if (t.dtype() == DType::f16) {
    std::vector<half> values = t.to_vector<half>();
    array.type = {t.shape(), rt::ElementType::f16};
    array.data.resize(values.size() * 2);
    std::memcpy(array.data.data(), values.data(), array.data.size());
  } else if (t.dtype() == DType::bf16) {
    // bf16 values are exact f32s: their upper halves (uint16 .npy).
    std::vector<float> values = t.to_vector();
    array.type = {t.shape(), rt::ElementType::bf16};
    array.data.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &values[i], 4);
      uint16_t upper = uint16_t(bits >> 16);
      std::memcpy(&array.data[2 * i], &upper, 2);
    }
  } else {
    std::vector<float> values = t.to_vector();
    array.type = {t.shape(), rt::ElementType::f32};
    array.data.resize(values.size() * 4);
    std::memcpy(array.data.data(), values.data(), array.data.size());
  }
  if (rt::Status s = rt::writeNpy(out + "/" + name + ".npy", array); !s.isOk())
    throw Error(s.message());
}

// A half-precision model's weights are f16 (or bf16) values, not casts in
// its graph: the conversion runs once, here.
Tensor toHalf(const Tensor &t, DType type) {
  Tensor h = t.to(type);
  realize({h});
  return h;
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
    std::fprintf(stderr, "usage: kiln-bench-aot-blocks OUTDIR [--target vulkan,cpu] [--half on]\n");
    return 2;
  }
  out = argv[1];
  std::filesystem::create_directories(out);
  CompileOptions options;
  options.targets = {"vulkan"};
  bool half = false, split = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--target") {
      options.targets.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');)
        options.targets.push_back(item);
    } else if (flag == "--half") {
      half = std::string(argv[i + 1]) == "on";
    } else if (flag == "--split") {
      split = std::string(argv[i + 1]) == "on";
    } else if (flag == "--cpu-isa") {
      options.cpu_isa = argv[i + 1];
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  manual_seed(11);

  // Transformer encoder block, pre-norm, as in the tests (ModelBlockTest):
  // `batch` sequences of T tokens, rows of x [batch * T, D].
  const int64_t T = 128, D = 512, H = 8, F = 2048, Dh = D / H;
  std::map<std::string, Tensor> tw;
  Tensor g1 = param(tw, "ln1_w", {D}, 0.1f, 1.0f), n1 = param(tw, "ln1_b", {D}, 0.1f);
  Tensor wq = param(tw, "wq", {D, D}, 0.04f), bq = param(tw, "bq", {D}, 0.02f);
  Tensor wk = param(tw, "wk", {D, D}, 0.04f), bk = param(tw, "bk", {D}, 0.02f);
  Tensor wv = param(tw, "wv", {D, D}, 0.04f), bv = param(tw, "bv", {D}, 0.02f);
  Tensor wo = param(tw, "wo", {D, D}, 0.04f), bo = param(tw, "bo", {D}, 0.02f);
  Tensor g2 = param(tw, "ln2_w", {D}, 0.1f, 1.0f), n2 = param(tw, "ln2_b", {D}, 0.1f);
  Tensor f1 = param(tw, "fc1_w", {F, D}, 0.04f), c1 = param(tw, "fc1_b", {F}, 0.02f);
  Tensor f2 = param(tw, "fc2_w", {D, F}, 0.02f), c2 = param(tw, "fc2_b", {D}, 0.02f);
  Tensor tx = Tensor::from(Tensor::randn({T, D}).to_vector(), {T, D});
  auto transformer = [&](const Tensor &x, int64_t batch, const std::map<std::string, Tensor> &w) {
    auto linearOf = [&](const Tensor &v, const char *weight, const char *bias) {
      return linear(v, w.at(weight), w.at(bias));
    };
    auto heads = [&](const Tensor &v, std::vector<int64_t> order) {
      return batch == 1 ? v.reshape({T, H, Dh}).permute({order[1] - 1, order[2] - 1, order[3] - 1})
                        : v.reshape({batch, T, H, Dh}).permute(order);
    };
    Tensor h = layer_norm(x, w.at("ln1_w"), w.at("ln1_b"));
    Tensor q = heads(linearOf(h, "wq", "bq"), {0, 2, 1, 3});
    Tensor k = heads(linearOf(h, "wk", "bk"), {0, 2, 3, 1});
    Tensor v = heads(linearOf(h, "wv", "bv"), {0, 2, 1, 3});
    Tensor p = softmax(matmul(q, k) * (1.0f / std::sqrt(float(Dh))), -1);
    Tensor a = matmul(p, v);
    a = batch == 1 ? a.permute({1, 0, 2}) : a.permute({0, 2, 1, 3});
    Tensor x1 = linearOf(a.reshape({batch * T, D}), "wo", "bo") + x;
    Tensor f = gelu(linearOf(layer_norm(x1, w.at("ln2_w"), w.at("ln2_b")), "fc1_w", "fc1_b"));
    return linearOf(f, "fc2_w", "fc2_b") + x1;
  };
  options.input_names = {"x"};
  options.output_names = {"y"};
  if (split) {
    // Each block its own weights (the block's scaled by 1 + b / 64),
    // committed to the device its half runs on.
    const int64_t batch = 8;
    Device first = Device::vulkan(0), second = Device::vulkan(1);
    std::vector<std::map<std::string, Tensor>> blockWeights(4);
    for (int b = 0; b < 4; ++b)
      for (auto &[name, t] : tw)
        blockWeights[b][name] =
            Tensor::from((t * (1.0f + float(b) / 64.0f)).to_vector(), t.shape());
    Tensor sx = Tensor::from(Tensor::randn({batch * T, D}).to_vector(), {batch * T, D});
    auto stack = [&](const Device &late) {
      Tensor y = sx;
      for (int b = 0; b < 4; ++b) {
        const Device &d = b < 2 ? first : late;
        if (b == 2 && late != first)
          y = y.to(late);
        std::map<std::string, Tensor> on;
        for (auto &[name, t] : blockWeights[b])
          on[name] = t.to(d);
        y = transformer(y, batch, on);
      }
      return y;
    };
    compile({stack(second)}, {sx}, options).save(out + "/transformer_stack_split.kiln");
    compile({stack(first)}, {sx}, options).save(out + "/transformer_stack_one.kiln");
    save(sx, "transformer_stack_x");
    return 0;
  }
  compile({transformer(tx, 1, tw)}, {tx}, options).save(out + "/transformer.kiln");
  // The graph, for kiln-tune (scripts/tune-gpu.sh).
  std::ofstream(out + "/transformer.mlir") << export_graph({transformer(tx, 1, tw)});
  for (auto &[name, t] : tw)
    save(t, "transformer_" + name);
  save(tx, "transformer_x");
  save(transformer(tx, 1, tw), "transformer_y_jit");

  // ResNet basic block: conv3x3-bn-relu-conv3x3-bn + x, relu.
  const int64_t C = 64, S = 56;
  std::map<std::string, Tensor> rw;
  param(rw, "conv1_w", {C, C, 3, 3}, 0.05f), param(rw, "conv2_w", {C, C, 3, 3}, 0.05f);
  param(rw, "bn1_mean", {C}, 0.1f), param(rw, "bn1_var", {C}, 0.1f, 1.0f);
  param(rw, "bn1_w", {C}, 0.1f, 1.0f), param(rw, "bn1_b", {C}, 0.1f);
  param(rw, "bn2_mean", {C}, 0.1f), param(rw, "bn2_var", {C}, 0.1f, 1.0f);
  param(rw, "bn2_w", {C}, 0.1f, 1.0f), param(rw, "bn2_b", {C}, 0.1f);
  Tensor rx = Tensor::from(Tensor::randn({1, C, S, S}).to_vector(), {1, C, S, S});
  auto resnet = [&](const Tensor &x, const std::map<std::string, Tensor> &w) {
    auto bn = [&](const Tensor &v, const std::string &n) {
      return batch_norm(v, w.at(n + "_mean"), w.at(n + "_var"), w.at(n + "_w"), w.at(n + "_b"));
    };
    Tensor y = relu(bn(conv2d(x, w.at("conv1_w"), {1, 1}, {1, 1}), "bn1"));
    return relu(bn(conv2d(y, w.at("conv2_w"), {1, 1}, {1, 1}), "bn2") + x);
  };
  compile({resnet(rx, rw)}, {rx}, options).save(out + "/resnet_block.kiln");
  std::ofstream(out + "/resnet_block.mlir") << export_graph({resnet(rx, rw)});
  for (auto &[name, t] : rw)
    save(t, "resnet_" + name);
  save(rx, "resnet_x");
  save(resnet(rx, rw), "resnet_y_jit");

  // The same blocks in half precision, at batch 1 and 32: f16
  // weights and inputs, the same weights rounded to f16. PyTorch's f16
  // blocks read the f32 weights and round them the same way.
  if (half) {
    // The weights in each half type (PyTorch's half blocks round them alike).
    const std::pair<DType, std::string> halves[] = {{DType::f16, "f16"}, {DType::bf16, "bf16"}};
    std::map<DType, std::map<std::string, Tensor>> thw, rhw;
    for (auto &[type, suffix] : halves) {
      for (auto &[name, t] : tw)
        thw[type][name] = toHalf(t, type);
      for (auto &[name, t] : rw)
        rhw[type][name] = toHalf(t, type);
    }
    for (int64_t batch : {1, 32}) {
      std::string b = "_b" + std::to_string(batch);
      Tensor x32 = batch == 1 ? tx : Tensor::from(Tensor::randn({batch * T, D}).to_vector(), {batch * T, D});
      Tensor r32 = batch == 1 ? rx : Tensor::from(Tensor::randn({batch, C, S, S}).to_vector(), {batch, C, S, S});
      if (batch == 32) {
        // Both blocks in f32 at batch 32 too: what the f16 kernels' bytes
        // and times compare with (bench/RESULTS.md). Inputs: any [4096,
        // 512] and [32, 64, 56, 56] f32 arrays.
        compile({transformer(x32, batch, tw)}, {x32}, options).save(out + "/transformer_f32" + b + ".kiln");
        compile({resnet(r32, rw)}, {r32}, options).save(out + "/resnet_block_f32" + b + ".kiln");
      }
      for (auto &[type, suffix] : halves) {
        std::string tag = "_" + suffix + b;
        Tensor x = toHalf(x32, type), r = toHalf(r32, type);
        compile({transformer(x, batch, thw[type])}, {x}, options)
            .save(out + "/transformer" + tag + ".kiln");
        save(x, "transformer_" + suffix + "_x" + b);
        compile({resnet(r, rhw[type])}, {r}, options).save(out + "/resnet_block" + tag + ".kiln");
        save(r, "resnet_" + suffix + "_x" + b);
        if (type == DType::f16) { // the graphs kiln-tune reads (scripts/tune-gpu.sh)
          std::ofstream(out + "/transformer" + tag + ".mlir") << export_graph({transformer(x, batch, thw[type])});
          std::ofstream(out + "/resnet_block" + tag + ".mlir") << export_graph({resnet(r, rhw[type])});
        }
      }
    }
  }
  std::printf("wrote %s/transformer.kiln and %s/resnet_block.kiln with weights and inputs\n",
              out.c_str(), out.c_str());
}
