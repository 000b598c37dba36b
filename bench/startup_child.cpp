// One fresh process of the start-up benchmark (bench/bench_startup.cpp):
// builds the transformer encoder block of aot_blocks.cpp (128 tokens, width
// 512, 8 heads, MLP 2048) on a device, reads its output and prints what the
// process compiled and what it read from the cache's store.
//
//   kiln-bench-startup-child DEVICE            the JIT
//   kiln-bench-startup-child DEVICE OUT.kiln   also writes the block as a
//                                              .kiln and its input as OUT.npy

#include "kiln/kiln.h"
#include "kiln/runtime/Npy.h"

#include <cmath>
#include <cstdio>
#include <cstring>

using namespace kiln;

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kiln-bench-startup-child DEVICE [OUT.kiln]\n");
    return 2;
  }
  try {
    Device device = Device::parse(argv[1]);
    const int64_t T = 128, D = 512, H = 8, F = 2048, Dh = D / H;
    int salt = 0;
    // Fixed values: every process computes the same block.
    auto param = [&](Shape shape, float scale, float offset = 0.0f) {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      std::vector<float> v(static_cast<size_t>(n));
      ++salt;
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = offset + scale * std::sin(0.731f * float(i) + float(salt));
      return Tensor::from(v, shape, device);
    };
    Tensor x = param({T, D}, 1.0f);
    Tensor h = layer_norm(x, param({D}, 0.1f, 1.0f), param({D}, 0.1f));
    Tensor q = linear(h, param({D, D}, 0.04f), param({D}, 0.02f)).reshape({T, H, Dh}).permute({1, 0, 2});
    Tensor k = linear(h, param({D, D}, 0.04f), param({D}, 0.02f)).reshape({T, H, Dh}).permute({1, 2, 0});
    Tensor v = linear(h, param({D, D}, 0.04f), param({D}, 0.02f)).reshape({T, H, Dh}).permute({1, 0, 2});
    Tensor p = softmax(matmul(q, k) * (1.0f / std::sqrt(float(Dh))), -1);
    Tensor attn = matmul(p, v).permute({1, 0, 2}).reshape({T, D});
    Tensor x1 = linear(attn, param({D, D}, 0.04f), param({D}, 0.02f)) + x;
    Tensor n2 = layer_norm(x1, param({D}, 0.1f, 1.0f), param({D}, 0.1f));
    Tensor y = linear(gelu(linear(n2, param({F, D}, 0.04f), param({F}, 0.02f))),
                      param({D, F}, 0.04f), param({D}, 0.02f)) + x1;
    if (argc > 2) {
      CompileOptions options;
      options.targets = {device.api()};
      compile({y}, {x}, options).save(argv[2]);
      std::vector<float> values = x.to_vector();
      rt::NpyArray array;
      array.type = {{T, D}, rt::ElementType::f32};
      array.data.resize(values.size() * 4);
      std::memcpy(array.data.data(), values.data(), array.data.size());
      std::string npy = std::string(argv[2]) + ".npy";
      if (rt::Status s = rt::writeNpy(npy, array); !s.isOk())
        throw Error(s.message());
    }
    float first = y.to_vector<float>()[0];
    Stats s = stats();
    std::printf("compiled %llu loaded %llu y0 %.6f compile_ms %.1f run_ms %.1f\n",
                (unsigned long long)s.kernels_compiled, (unsigned long long)s.kernels_loaded, first,
                s.compile_seconds * 1e3, s.run_seconds * 1e3);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln-bench-startup-child: %s\n", e.what());
    return 1;
  }
  return 0;
}
