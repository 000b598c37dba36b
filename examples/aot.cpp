// Compile once, run anywhere: a small model written with the Tensor API is
// compiled ahead of time to mlp.kiln (its weights inside), with an example
// input saved as x.npy and the JIT's answer as y_jit.npy (y_jit_cpu.npy on
// the CPU). kiln-run, which links the runtime alone, then runs the file, on
// the first Vulkan device or, with --device cpu:0, as CPU machine code:
//
//   build/bin/kiln-example-aot && build/bin/kiln-run mlp.kiln --input x=x.npy --output y=y.npy

#include "kiln/kiln.h"
#include "kiln/runtime/Npy.h"

#include <cstdio>
#include <cstring>

namespace {
void save(const kiln::Tensor &t, const char *path) {
  std::vector<float> values = t.to_vector();
  kiln::rt::NpyArray array;
  array.type = {t.shape(), kiln::rt::ElementType::f32};
  array.data.resize(values.size() * 4);
  std::memcpy(array.data.data(), values.data(), array.data.size());
  if (kiln::rt::Status s = kiln::rt::writeNpy(path, array); !s.isOk())
    throw kiln::Error(s.message());
}
} // namespace

int main() {
  // The file carries code for every target this machine can run: SPIR-V for
  // Vulkan when there is a Vulkan device, and CPU machine code always.
  std::vector<kiln::Device> all = kiln::devices();
  bool vulkan = all.size() > 1;
  kiln::Device first = vulkan ? all[1] : kiln::Device::cpu();
  kiln::manual_seed(3);
  kiln::Tensor w1 = kiln::Tensor::randn({64, 32}, first), b1 = kiln::Tensor::zeros({64}, first);
  kiln::Tensor w2 = kiln::Tensor::randn({10, 64}, first), b2 = kiln::Tensor::zeros({10}, first);
  auto model = [&](const kiln::Tensor &x) {
    return kiln::softmax(kiln::linear(kiln::relu(kiln::linear(x, w1, b1)), w2, b2), -1);
  };
  kiln::Tensor x = kiln::Tensor::randn({8, 32}, first);
  std::vector<std::string> targets = {"cpu"};
  if (vulkan)
    targets.insert(targets.begin(), "vulkan");
  kiln::Program program = kiln::compile({model(x)}, {x}, {targets, {"x"}, {"y"}});
  program.save("mlp.kiln");
  save(x, "x.npy");
  save(model(x), "y_jit.npy"); // the JIT on the default device, where kiln-run runs
  kiln::Device cpu = kiln::Device::cpu();
  auto onCpu = [&](const kiln::Tensor &x) {
    return kiln::softmax(
        kiln::linear(kiln::relu(kiln::linear(x, w1.to(cpu), b1.to(cpu))), w2.to(cpu), b2.to(cpu)),
        -1);
  };
  save(onCpu(x.to(cpu)), "y_jit_cpu.npy");
  std::printf("wrote mlp.kiln for %s:\n%s", program.targets().c_str(),
              program.signature().c_str());
  std::printf("run it: build/bin/kiln-run mlp.kiln --input x=x.npy --output y=y.npy "
              "[--device cpu:0]\n");
}
