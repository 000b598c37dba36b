//===- BufferTest.cpp - Allocation, pooling and transfers -----------------===//

#include "VulkanTestUtil.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace kiln::rt::test {
namespace {

using BufferTest = VulkanTest;

/// Random bit patterns (NaNs and denormals included), so that any
/// conversion or truncation on the way shows up.
std::vector<uint32_t> randomWords(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> words(count);
  for (uint32_t &word : words)
    word = rng();
  return words;
}

TEST_F(BufferTest, RoundTripOfOneMillionFloatsIsBitExact) {
  constexpr size_t count = 1 << 20;
  std::vector<uint32_t> input = randomWords(count, 1);
  std::vector<float> floats(count);
  std::memcpy(floats.data(), input.data(), count * 4);
  KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(count * sizeof(float)));
  EXPECT_EQ(buffer->size(), count * sizeof(float));
  EXPECT_EQ(&buffer->device(), device);
  KILN_ASSERT_OK(device->upload(*buffer, floats.data(), count * sizeof(float)));
  std::vector<uint32_t> output(count, 0xdeadbeef);
  KILN_ASSERT_OK(
      device->download(*buffer, output.data(), count * sizeof(float)));
  EXPECT_TRUE(output == input)
      << "downloaded words differ from the uploaded ones";
  DeviceStats stats = device->stats();
  EXPECT_EQ(stats.bytesUploaded, count * 4);
  EXPECT_EQ(stats.bytesDownloaded, count * 4);
}

TEST_F(BufferTest, TransfersLargerThanTheStagingBufferGoInChunks) {
  // 80 MiB: more than one 64 MiB staging chunk each way.
  constexpr size_t count = size_t(20) << 20;
  std::vector<uint32_t> input = randomWords(count, 2);
  KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(count * 4));
  KILN_ASSERT_OK(device->upload(*buffer, input.data(), count * 4));
  std::vector<uint32_t> output(count, 0);
  KILN_ASSERT_OK(device->download(*buffer, output.data(), count * 4));
  EXPECT_TRUE(output == input);
  EXPECT_GE(device->stats().submits, 3u);
}

TEST_F(BufferTest, ManyUploadsBeforeOneFlushKeepTheirOwnData) {
  // 64 uploads of 64 KiB outgrow the initial staging buffer mid-way.
  constexpr size_t count = 64, words = 16384;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::vector<std::vector<uint32_t>> inputs;
  for (size_t i = 0; i < count; ++i) {
    inputs.push_back(randomWords(words, uint32_t(100 + i)));
    KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(words * 4));
    KILN_ASSERT_OK(device->upload(*buffer, inputs.back().data(), words * 4));
    buffers.push_back(buffer);
  }
  for (size_t i = 0; i < count; ++i) {
    std::vector<uint32_t> output(words, 0);
    KILN_ASSERT_OK(device->download(*buffers[i], output.data(), words * 4));
    ASSERT_TRUE(output == inputs[i]) << "buffer " << i;
  }
}

TEST_F(BufferTest, FreedBufferIsReusedForTheSameBucket) {
  { KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(1000)); }
  DeviceStats before = device->stats();
  EXPECT_EQ(before.buffersAllocated, 1u);
  EXPECT_EQ(before.bufferPoolHits, 0u);
  // 1000 and 1024 bytes share the 1024-byte bucket.
  KILN_ASSERT_OK_AND_ASSIGN(again, device->allocate(1024));
  DeviceStats after = device->stats();
  EXPECT_EQ(after.bufferPoolHits, 1u);
  EXPECT_EQ(after.buffersAllocated, 1u);
  EXPECT_EQ(again->size(), 1024u);
  // A different bucket is a new allocation.
  KILN_ASSERT_OK_AND_ASSIGN(bigger, device->allocate(1025));
  EXPECT_EQ(device->stats().buffersAllocated, 2u);
  device->resetStats();
  EXPECT_EQ(device->stats().buffersAllocated, 0u);
  EXPECT_EQ(device->stats().bufferPoolHits, 0u);
}

TEST_F(BufferTest, BufferFreedWithPendingWorkIsReusedOnlyAfterFlush) {
  std::vector<uint32_t> data = randomWords(256, 3);
  {
    KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(1024));
    KILN_ASSERT_OK(
        device->upload(*buffer, data.data(), 1024)); // recorded, not submitted
  }
  KILN_ASSERT_OK_AND_ASSIGN(second, device->allocate(1024));
  EXPECT_EQ(device->stats().bufferPoolHits, 0u)
      << "memory still in use was handed out";
  KILN_ASSERT_OK(device->flush());
  KILN_ASSERT_OK_AND_ASSIGN(third, device->allocate(1024));
  EXPECT_EQ(device->stats().bufferPoolHits, 1u);
}

TEST_F(BufferTest, ZeroSizeBufferIsValid) {
  KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(0));
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(buffer->size(), 0u);
  KILN_ASSERT_OK(device->upload(*buffer, nullptr, 0));
  KILN_ASSERT_OK(device->download(*buffer, nullptr, 0));
  KILN_ASSERT_OK_AND_ASSIGN(other, device->allocate(0));
  KILN_ASSERT_OK(device->copy(*buffer, *other, 0));
  KILN_ASSERT_OK(device->flush());
}

TEST_F(BufferTest, HugeAllocationIsOutOfMemoryNamingBytesAndDevice) {
  size_t huge = size_t(1) << 50;
  StatusOr<std::shared_ptr<Buffer>> buffer = device->allocate(huge);
  ASSERT_FALSE(buffer.isOk());
  EXPECT_EQ(buffer.status().code(), Status::Code::OutOfMemory);
  EXPECT_NE(buffer.status().message().find(std::to_string(huge) + " bytes"),
            std::string::npos)
      << buffer.status().message();
  EXPECT_NE(buffer.status().message().find("vulkan:0"), std::string::npos);

  StatusOr<std::shared_ptr<Buffer>> impossible = device->allocate(SIZE_MAX);
  ASSERT_FALSE(impossible.isOk());
  EXPECT_EQ(impossible.status().code(), Status::Code::OutOfMemory);
  // The device still works afterwards.
  KILN_ASSERT_OK_AND_ASSIGN(small, device->allocate(16));
}

TEST_F(BufferTest, TransfersOutOfBoundsOrFromNullAreInvalid) {
  KILN_ASSERT_OK_AND_ASSIGN(buffer, device->allocate(100));
  std::vector<uint8_t> host(200, 7);
  EXPECT_EQ(device->upload(*buffer, host.data(), 101).code(),
            Status::Code::InvalidArgument);
  EXPECT_EQ(device->download(*buffer, host.data(), 101).code(),
            Status::Code::InvalidArgument);
  EXPECT_EQ(device->upload(*buffer, nullptr, 4).code(),
            Status::Code::InvalidArgument);
  EXPECT_EQ(device->download(*buffer, nullptr, 4).code(),
            Status::Code::InvalidArgument);
  KILN_ASSERT_OK_AND_ASSIGN(small, device->allocate(10));
  EXPECT_EQ(device->copy(*buffer, *small, 11).code(),
            Status::Code::InvalidArgument);
  // Exactly size() bytes is fine.
  KILN_ASSERT_OK(device->upload(*buffer, host.data(), 100));
}

TEST_F(BufferTest, CopyBetweenBuffersAfterUpload) {
  std::vector<uint32_t> data = randomWords(4096, 4);
  KILN_ASSERT_OK_AND_ASSIGN(src, device->allocate(data.size() * 4));
  KILN_ASSERT_OK_AND_ASSIGN(dst, device->allocate(data.size() * 4));
  std::vector<uint32_t> zeros(data.size(), 0);
  KILN_ASSERT_OK(device->upload(*dst, zeros.data(), zeros.size() * 4));
  KILN_ASSERT_OK(device->upload(*src, data.data(), data.size() * 4));
  // Copy half, in the same command buffer as the uploads.
  KILN_ASSERT_OK(device->copy(*src, *dst, data.size() * 2));
  std::vector<uint32_t> output(data.size(), 1);
  KILN_ASSERT_OK(device->download(*dst, output.data(), output.size() * 4));
  for (size_t i = 0; i < data.size(); ++i)
    ASSERT_EQ(output[i], i < data.size() / 2 ? data[i] : 0u) << "word " << i;
  KILN_ASSERT_OK(device->copy(*src, *src, 16)); // onto itself: nothing to do
}

} // namespace
} // namespace kiln::rt::test
