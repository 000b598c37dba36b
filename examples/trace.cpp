// A device conflict inside a reusable layer. The report names the layer's
// line; with KILN_TRACE=1 (here: kiln::set_trace(true), before any op) it
// also names who called the layer, and where each argument was created.

#include "kiln/kiln.h"

#include <cstdio>

struct Dense {
  kiln::Tensor weight, bias;
  kiln::Tensor operator()(const kiln::Tensor &x) const {
    return kiln::relu(kiln::linear(x, weight, bias));
  }
};

Dense makeLayer(int64_t in, int64_t out, const kiln::Device &device) {
  return {kiln::Tensor::randn({out, in}, device), kiln::Tensor::zeros({out}, device)};
}

int main() {
  std::vector<kiln::Device> all = kiln::devices();
  if (all.size() < 2) {
    std::printf("needs two devices: install a Vulkan driver or set KILN_VIRTUAL_DEVICES=2\n");
    return 0;
  }
  kiln::set_trace(true);
  kiln::Device gpu = all[1];
  Dense first = makeLayer(16, 32, gpu);
  Dense second = makeLayer(32, 8, kiln::Device::cpu()); // built on the wrong device
  kiln::Tensor x = kiln::Tensor::randn({4, 16}, gpu);
  try {
    (void)second(first(x)).to_vector();
  } catch (const kiln::DeviceMismatchError &error) {
    std::printf("%s", error.what());
  }
}
