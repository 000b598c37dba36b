// The PyTorch seed scenario in Kiln: a model's weights on the GPU, its input
// left on the CPU. Kiln finds every conflict of the graph before compiling
// anything, names the lines, and suggests the fix; then the fixed graph runs.
// Without a GPU the "model" goes to a second logical device instead
// (KILN_VIRTUAL_DEVICES) or the example says what it needs.

#include "kiln/kiln.h"

#include <cstdio>

int main() {
  std::vector<kiln::Device> all = kiln::devices();
  if (all.size() < 2) {
    std::printf("needs two devices: install a Vulkan driver or set KILN_VIRTUAL_DEVICES=2\n");
    return 0;
  }
  kiln::Device gpu = all[1], cpu = kiln::Device::cpu();
  std::printf("model on %s (%s), input on %s\n\n", gpu.name().c_str(),
              gpu.adapter_name().c_str(), cpu.name().c_str());

  kiln::Tensor weight = kiln::Tensor::randn({256}, gpu);
  kiln::Tensor bias = kiln::Tensor::randn({256}, gpu);
  kiln::Tensor input = kiln::Tensor::randn({64, 256}, cpu);     // forgot .to(gpu)
  kiln::Tensor labels = kiln::Tensor::rand({64, 256}, cpu);     // forgot .to(gpu)
  kiln::Tensor hidden = kiln::relu(input * weight + bias);
  kiln::Tensor loss = (hidden - labels) * (hidden - labels);

  try {
    (void)loss.to_vector<float>();
  } catch (const kiln::DeviceMismatchError &error) {
    std::printf("%s\n", error.what());
    std::printf("(%zu conflicts, %llu kernels compiled)\n\n", error.conflicts().size(),
                static_cast<unsigned long long>(kiln::stats().kernels_compiled));
  }

  kiln::Tensor fixedHidden = kiln::relu(input.to(gpu) * weight + bias);
  kiln::Tensor diff = fixedHidden - labels.to(gpu);
  std::vector<float> out = (diff * diff).to_vector<float>();
  std::printf("after the fix: %zu values on %s, first %.4f\n", out.size(), gpu.name().c_str(),
              out[0]);

  // The seeds' hardest case: two GPUs, the input hard-coded to the second
  // ("cuda:1" next to "cuda:0"). Two GPUs, or KILN_VIRTUAL_DEVICES=2 on one.
  std::vector<kiln::Device> gpus;
  for (const kiln::Device &d : all)
    if (d.api() == "vulkan")
      gpus.push_back(d);
  if (gpus.size() < 2) {
    std::printf("\nsecond GPU: needs two Vulkan devices (two GPUs, or KILN_VIRTUAL_DEVICES=2)\n");
    return 0;
  }
  std::printf("\n");
  for (const kiln::Device &d : gpus)
    std::printf("%s: %s, uuid %s%s%s\n", d.name().c_str(), d.adapter_name().c_str(),
                d.adapter_uuid().c_str(), d.adapter_pci().empty() ? "" : ", pci ",
                d.adapter_pci().c_str());
  kiln::Tensor w1 = kiln::Tensor::randn({256, 256}, gpus[0]);
  kiln::Tensor w2 = kiln::Tensor::randn({256, 256}, gpus[0]);
  kiln::Tensor x = kiln::Tensor::randn({64, 256}, kiln::Device::parse("vulkan:1")); // hard-coded
  uint64_t compiledBefore = kiln::stats().kernels_compiled;
  try {
    (void)kiln::matmul(kiln::relu(kiln::matmul(x, w1)), w2).to_vector<float>();
  } catch (const kiln::DeviceMismatchError &error) {
    std::printf("%s\n", error.what());
    std::printf("(%zu conflicts, %llu kernels compiled)\n\n", error.conflicts().size(),
                static_cast<unsigned long long>(kiln::stats().kernels_compiled - compiledBefore));
  }
  // The fix the report suggests: the input follows the model.
  kiln::Tensor y = kiln::matmul(kiln::relu(kiln::matmul(x.to(w1.device()), w1)), w2);
  std::vector<float> fixed = y.to_vector<float>();
  std::printf("after the fix: %zu values on %s, first %.4f\n", fixed.size(),
              y.device().name().c_str(), fixed[0]);
  return 0;
}
