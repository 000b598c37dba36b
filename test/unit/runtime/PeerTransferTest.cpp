//===- PeerTransferTest.cpp - copies between two Vulkan devices -----------===//
//
// Two logical devices of one adapter (virtual devices) are two VkDevices
// with their own memory and queues: what two GPUs are to Vulkan. Copies
// between them must arrive byte for byte whichever path they take, and the
// shared-host-memory path must be the one taken where both import host
// memory (lavapipe and NVIDIA's driver do).
//
//===----------------------------------------------------------------------===//

#include "VulkanTestUtil.h"

#include <cstring>
#include <numeric>
#include <random>
#include <thread>

namespace kiln::rt::test {
namespace {

class PeerTransferTest : public VulkanTest {
protected:
  ContextOptions options() const override {
    ContextOptions options = VulkanTest::options();
    options.virtualDevices = 2;
    return options;
  }

  void SetUp() override {
    VulkanTest::SetUp();
    if (!device)
      return;
    StatusOr<VulkanDevice *> other = context->device(1);
    ASSERT_TRUE(other.isOk()) << other.status().toString();
    second = *other;
  }

  /// Copies `bytes` of random data from device 0 to device 1, into a
  /// destination with an upload of other data still pending, and checks
  /// every byte.
  void roundTrip(size_t bytes) {
    std::vector<uint8_t> data(bytes);
    std::mt19937 rng{uint32_t(bytes)};
    for (auto &b : data)
      b = uint8_t(rng());
    KILN_ASSERT_OK_AND_ASSIGN(src, device->allocate(bytes));
    KILN_ASSERT_OK_AND_ASSIGN(dst, second->allocate(bytes));
    KILN_ASSERT_OK(device->upload(*src, data.data(), bytes));
    // The destination's own pending upload must land before the copy.
    std::vector<uint8_t> stale(bytes, 0xee);
    KILN_ASSERT_OK(second->upload(*dst, stale.data(), bytes));
    KILN_ASSERT_OK(device->copyToDevice(*src, *second, *dst, bytes));
    std::vector<uint8_t> back(bytes, 0);
    KILN_ASSERT_OK(second->download(*dst, back.data(), bytes));
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; ++i)
      wrong += back[i] != data[i];
    EXPECT_EQ(wrong, 0u) << "of " << bytes << " bytes";
  }

  VulkanDevice *second = nullptr;
};

TEST_F(PeerTransferTest, ArrivesByteForByteInOneChunkAndInMany) {
  // A few bytes, one chunk, and 3.4 chunks of 16 MiB: more chunks than the
  // ring has slots, the last one partial.
  for (size_t bytes : {size_t(100), size_t(1) << 20, (size_t(54) << 20) + 12345}) {
    SCOPED_TRACE(bytes);
    device->resetStats();
    roundTrip(bytes);
    if (device->importsHostMemory() && second->importsHostMemory()) {
      EXPECT_EQ(device->stats().bytesToPeers, bytes);
      // The host copied nothing: no staging download on the source.
      EXPECT_EQ(device->stats().bytesDownloaded, 0u);
    } else {
      EXPECT_EQ(device->stats().bytesToPeers, 0u);
      EXPECT_EQ(device->stats().bytesDownloaded, bytes);
    }
  }
  if (!device->importsHostMemory())
    GTEST_SKIP() << device->adapterName()
                 << " does not import host memory (VK_EXT_external_memory_host): the staged "
                    "copies above were checked, the shared-memory path was not";
}

TEST_F(PeerTransferTest, SeesTheSourcesPendingWork) {
  // A copy recorded on the source (not yet submitted) is what gets sent.
  constexpr size_t n = 4096;
  std::vector<float> data(n);
  std::iota(data.begin(), data.end(), 1.0f);
  KILN_ASSERT_OK_AND_ASSIGN(a, device->allocate(n * 4));
  KILN_ASSERT_OK_AND_ASSIGN(b, device->allocate(n * 4));
  KILN_ASSERT_OK_AND_ASSIGN(c, second->allocate(n * 4));
  KILN_ASSERT_OK(device->upload(*a, data.data(), n * 4));
  KILN_ASSERT_OK(device->copy(*a, *b, n * 4));
  KILN_ASSERT_OK(device->copyToDevice(*b, *second, *c, n * 4));
  std::vector<float> back(n, 0.0f);
  KILN_ASSERT_OK(second->download(*c, back.data(), n * 4));
  EXPECT_EQ(back, data);
}

TEST_F(PeerTransferTest, TwoThreadsCopyingBetweenThePairTakeTurns) {
  // Both directions and the same direction at once: each copy arrives whole
  // (the ring of a pair is used by one copy at a time; the devices' queues
  // are shared with their own work).
  constexpr size_t bytes = (size_t(20) << 20) + 4;
  auto copies = [&](VulkanDevice *from, VulkanDevice *to, uint8_t seed, size_t *wrong) {
    for (int round = 0; round < 3; ++round) {
      std::vector<uint8_t> data(bytes);
      for (size_t i = 0; i < bytes; ++i)
        data[i] = uint8_t(i * 7 + seed + round);
      auto src = from->allocate(bytes);
      auto dst = to->allocate(bytes);
      if (!src.isOk() || !dst.isOk() || !from->upload(**src, data.data(), bytes).isOk() ||
          !from->copyToDevice(**src, *to, **dst, bytes).isOk()) {
        *wrong = bytes;
        return;
      }
      std::vector<uint8_t> back(bytes);
      if (!to->download(**dst, back.data(), bytes).isOk()) {
        *wrong = bytes;
        return;
      }
      for (size_t i = 0; i < bytes; ++i)
        *wrong += back[i] != data[i];
    }
  };
  size_t wrong[3] = {0, 0, 0};
  std::thread t1(copies, device, second, uint8_t(1), &wrong[0]);
  std::thread t2(copies, device, second, uint8_t(2), &wrong[1]);
  std::thread t3(copies, second, device, uint8_t(3), &wrong[2]);
  t1.join(), t2.join(), t3.join();
  EXPECT_EQ(wrong[0], 0u);
  EXPECT_EQ(wrong[1], 0u);
  EXPECT_EQ(wrong[2], 0u);
}

TEST_F(PeerTransferTest, RefusesBuffersOfOtherDevicesAndOversizedCopies) {
  KILN_ASSERT_OK_AND_ASSIGN(a, device->allocate(256));
  KILN_ASSERT_OK_AND_ASSIGN(b, second->allocate(128));
  Status swapped = device->copyToDevice(*b, *second, *a, 64);
  EXPECT_EQ(swapped.code(), Status::Code::InvalidArgument);
  EXPECT_NE(swapped.message().find("vulkan:1"), std::string::npos) << swapped.message();
  Status tooBig = device->copyToDevice(*a, *second, *b, 256);
  EXPECT_EQ(tooBig.code(), Status::Code::InvalidArgument);
  EXPECT_NE(tooBig.message().find("128-byte"), std::string::npos) << tooBig.message();
  // To itself: an ordinary copy.
  KILN_ASSERT_OK_AND_ASSIGN(c, device->allocate(256));
  KILN_ASSERT_OK(device->copyToDevice(*a, *device, *c, 256));
}

} // namespace
} // namespace kiln::rt::test
