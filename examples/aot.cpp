// Compile once, run anywhere: a small model written with the Tensor API is
// compiled ahead of time to mlp.kiln (its weights inside), with an example
// input saved as x.npy and the JIT's answer as y_jit.npy. kiln-run, which
// links the runtime alone, then runs the file:
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
  std::vector<kiln::Device> all = kiln::devices();
  if (all.size() < 2) {
    std::printf("needs a Vulkan device: the .kiln file holds SPIR-V (the CPU target runs in "
                "process but cannot be saved yet)\n");
    return 0;
  }
  kiln::Device gpu = all[1];
  kiln::manual_seed(3);
  kiln::Tensor w1 = kiln::Tensor::randn({64, 32}, gpu), b1 = kiln::Tensor::zeros({64}, gpu);
  kiln::Tensor w2 = kiln::Tensor::randn({10, 64}, gpu), b2 = kiln::Tensor::zeros({10}, gpu);
  auto model = [&](const kiln::Tensor &x) {
    return kiln::softmax(kiln::linear(kiln::relu(kiln::linear(x, w1, b1)), w2, b2), -1);
  };
  kiln::Tensor x = kiln::Tensor::randn({8, 32}, gpu);
  kiln::Program program = kiln::compile({model(x)}, {x}, {{"vulkan"}, {"x"}, {"y"}});
  program.save("mlp.kiln");
  save(x, "x.npy");
  save(model(x), "y_jit.npy");
  std::printf("wrote mlp.kiln for %s:\n%s", program.targets().c_str(),
              program.signature().c_str());
  std::printf("run it: build/bin/kiln-run mlp.kiln --input x=x.npy --output y=y.npy\n");
}
