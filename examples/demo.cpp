// The main job: build a lazy graph, compile it, run it on the default device
// (then on every other device of this machine) and check each result
// against a float64 host reference.
//
//   y = gelu(tanh(x * w + b) - 0.5) * x   over a 1024x4096 batch
//
// with w and b broadcast along rows: six elementwise ops that fuse into one
// kernel.

#include "kiln/kiln.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {
double geluRef(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

unsigned long long count(uint64_t v) { return static_cast<unsigned long long>(v); }

bool runOn(const kiln::Device &device) {
  std::printf("\n== %s: %s (api %s, adapter %s)\n", device.name().c_str(),
              device.adapter_name().c_str(), device.api().c_str(),
              device.adapter_uuid().c_str());
  const int64_t rows = 1024, cols = 4096;
  kiln::Tensor x = kiln::Tensor::randn({rows, cols}, device);
  kiln::Tensor w = kiln::Tensor::rand({cols});     // uncommitted: follows x
  kiln::Tensor b = kiln::Tensor::randn({1, cols}); // uncommitted: follows x

  kiln::Tensor h = kiln::tanh(x * w + b);
  kiln::Tensor y = kiln::gelu(h - 0.5f) * x;

  kiln::reset_stats();
  auto start = std::chrono::steady_clock::now();
  std::vector<float> out = y.to_vector<float>();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  kiln::Stats first = kiln::stats();

  // numpy-style allclose: |out - ref| <= atol + rtol * |ref|. The absolute
  // term covers results near zero, where f32 cancellation in h - 0.5 makes a
  // relative measure meaningless.
  const double rtol = 1e-5, atol = 1e-6;
  std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>(),
                     bs = b.to_vector<float>();
  double worst = 0, maxAbs = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double xv = xs[r * cols + c];
      double ref = geluRef(std::tanh(xv * ws[c] + bs[c]) - 0.5) * xv;
      double err = std::abs(out[r * cols + c] - ref);
      maxAbs = std::max(maxAbs, err);
      worst = std::max(worst, err / (atol + rtol * std::abs(ref)));
    }
  bool ok = worst <= 1.0;
  std::printf("result:   %lld elements vs float64 reference: max abs error %.3g, "
              "%.2f of the tolerance (rtol %.0e, atol %.0e) -> %s\n",
              static_cast<long long>(out.size()), maxAbs, worst, rtol, atol,
              ok ? "OK" : "MISMATCH");
  std::printf("kernels:  %llu dispatched, %llu compiled\n", count(first.kernels_dispatched),
              count(first.kernels_compiled));
  std::printf("time:     compile %.1f ms, run %.1f ms (wall %.1f ms)\n",
              first.compile_seconds * 1e3, first.run_seconds * 1e3, wall * 1e3);

  // A second graph of the same shape reuses the compiled kernel.
  kiln::reset_stats();
  kiln::Tensor x2 = kiln::Tensor::randn({rows, cols}, device);
  auto again = std::chrono::steady_clock::now();
  (void)(kiln::gelu(kiln::tanh(x2 * w + b) - 0.5f) * x2).to_vector<float>();
  double wall2 = std::chrono::duration<double>(std::chrono::steady_clock::now() - again).count();
  kiln::Stats second = kiln::stats();
  std::printf("again:    %llu dispatched, %llu compiled, %llu cache hits, compile %.1f ms, "
              "run %.1f ms (wall %.1f ms)\n",
              count(second.kernels_dispatched), count(second.kernels_compiled),
              count(second.kernel_cache_hits), second.compile_seconds * 1e3,
              second.run_seconds * 1e3, wall2 * 1e3);
  return ok;
}
} // namespace

int main() {
  try {
    kiln::Device device = kiln::Device::default_device();
    std::printf("default device: %s (%s)\ndevices:", device.name().c_str(),
                device.adapter_name().c_str());
    for (const kiln::Device &d : kiln::devices())
      std::printf(" %s", d.name().c_str());
    std::printf("\n");
    bool ok = runOn(device);
    for (const kiln::Device &other : kiln::devices())
      if (other != device)
        ok = runOn(other) && ok;
    std::printf("\n%s\n", ok ? "all results match the float64 reference" : "MISMATCH");
    return ok ? 0 : 1;
  } catch (const kiln::Error &error) {
    std::fprintf(stderr, "kiln-demo: %s\n", error.what());
    return 2;
  }
}
