// Shared helpers of the API tests: the device list (skipping visibly when no
// Vulkan device exists) and the float64 comparison.
#ifndef KILN_TEST_UNIT_API_TESTUTIL_H
#define KILN_TEST_UNIT_API_TESTUTIL_H

#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::test {

/// Every device: cpu:0, then the Vulkan ones (tests needing more GTEST_SKIP).
inline std::vector<Device> availableDevices() {
  try {
    return devices();
  } catch (const DeviceError &) {
    return {};
  }
}

#define KILN_REQUIRE_DEVICES(n)                                                \
  do {                                                                         \
    if (::kiln::test::availableDevices().size() < (n))                         \
      GTEST_SKIP() << "needs " << (n) << " devices (cpu:0, then Vulkan); found " \
                   << ::kiln::test::availableDevices().size();                 \
  } while (0)

/// A test run once per device of the machine: cpu:0, vulkan:0, vulkan:1
/// (the test main asks for two logical Vulkan devices); missing ones skip.
class OnEveryDevice : public ::testing::TestWithParam<int> {
protected:
  void SetUp() override {
    std::vector<Device> all = availableDevices();
    if (static_cast<size_t>(GetParam()) >= all.size())
      GTEST_SKIP() << "no device #" << GetParam() << " (found " << all.size() << ")";
    device = std::make_unique<Device>(all[GetParam()]);
  }
  std::unique_ptr<Device> device;
};

#define KILN_ON_EVERY_DEVICE(Suite)                                            \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::Range(0, 3),             \
                           [](const ::testing::TestParamInfo<int> &info) {     \
                             return "device" + std::to_string(info.param);     \
                           })

/// The message of the `E` that `f` throws; empty when it throws none.
template <typename E = Error> std::string messageOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const E &e) {
    return e.what();
  }
  return "";
}

/// f32 tolerance: |got - want| <= atol + rtol * |want| (numpy's allclose).
inline ::testing::AssertionResult allClose(const std::vector<float> &got,
                                           const std::vector<double> &want,
                                           double rtol = 1e-5, double atol = 1e-6) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    // NaN matches NaN, and an infinity itself (as in numpy's allclose).
    bool same = (std::isnan(got[i]) && std::isnan(want[i])) || double(got[i]) == want[i];
    if (!same && !(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", want " << want[i]
             << " (of " << got.size() << ")";
  }
  return ::testing::AssertionSuccess();
}

/// Row-major broadcast of `shape` into `out`: the flat source index of each
/// output element (the reference's own, independent of the compiler's maps).
inline std::vector<size_t> broadcastIndex(const Shape &shape, const Shape &out) {
  size_t n = 1;
  for (int64_t d : out)
    n *= d;
  std::vector<size_t> index(n);
  size_t offset = out.size() - shape.size();
  for (size_t i = 0; i < n; ++i) {
    size_t rest = i, src = 0, stride = 1;
    for (size_t k = out.size(); k-- > 0;) {
      size_t coord = rest % out[k];
      rest /= out[k];
      if (k >= offset) {
        int64_t d = shape[k - offset];
        if (d != 1)
          src += coord * stride;
        stride *= d;
      }
    }
    index[i] = src;
  }
  return index;
}

/// How many times `what` occurs in `text` (overlapping ones too).
inline size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace kiln::test

#endif
