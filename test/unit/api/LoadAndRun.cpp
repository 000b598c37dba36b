// A process that never builds a graph: kiln::load a .kiln file, run it on
// the device named, write the outputs. AotTest runs it to check that a
// loaded model alone gives the JIT's results.
//
//   kiln-test-load-and-run model.kiln DEVICE in0.npy ... -- out0.npy ...

#include "kiln/kiln.h"
#include "kiln/runtime/Npy.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s model.kiln DEVICE in.npy ... -- out.npy ...\n", argv[0]);
    return 2;
  }
  try {
    kiln::Device device = kiln::Device::parse(argv[2]);
    kiln::Program program = kiln::load(argv[1], device);
    std::vector<kiln::Tensor> inputs;
    int i = 3;
    for (; i < argc && std::string(argv[i]) != "--"; ++i) {
      kiln::rt::StatusOr<kiln::rt::NpyArray> array = kiln::rt::readNpy(argv[i]);
      if (!array.isOk())
        throw kiln::Error(array.status().message());
      std::vector<float> values(array->data.size() / 4);
      std::memcpy(values.data(), array->data.data(), array->data.size());
      inputs.push_back(kiln::Tensor::from(values, array->type.shape, device));
    }
    std::vector<kiln::Tensor> outputs = program.run(inputs);
    for (size_t o = 0; ++i < argc && o < outputs.size(); ++o) {
      std::vector<float> values = outputs[o].to_vector();
      kiln::rt::NpyArray array;
      array.type = {outputs[o].shape(), kiln::rt::ElementType::f32};
      array.data.resize(values.size() * 4);
      std::memcpy(array.data.data(), values.data(), array.data.size());
      if (kiln::rt::Status s = kiln::rt::writeNpy(argv[i], array); !s.isOk())
        throw kiln::Error(s.message());
    }
    std::printf("graphs compiled in this process: %llu, kernels compiled: %llu\n",
                (unsigned long long)kiln::stats().graphs_compiled,
                (unsigned long long)kiln::stats().kernels_compiled);
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
