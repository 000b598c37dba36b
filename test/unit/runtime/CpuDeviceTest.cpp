//===- CpuDeviceTest.cpp - CPU device and thread pool ---------------------===//
//
// Kernels here are hand-written C++ with the packed signature that JIT code
// has. They cannot capture, so each test hands them state through the
// file-level `kernelState`; tests run one at a time, never concurrently.
//
//===----------------------------------------------------------------------===//

#include "VulkanTestUtil.h"

#include "kiln/runtime/Cpu.h"
#include "kiln/runtime/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::rt::test {
namespace {

using Clock = std::chrono::steady_clock;

/// What the kernels of a test share with it.
struct KernelState {
  std::atomic<uint32_t> *visits = nullptr; // one counter per element
  std::atomic<int64_t> chunks{0};
  std::atomic<int64_t> misalignedChunks{0};
  int64_t elements = 0;
  std::mutex mutex;
  std::set<std::thread::id> threadIds;
};
KernelState *kernelState = nullptr;

template <class T> T *binding(void **args, int index) {
  return *static_cast<T **>(args[index]);
}
int64_t rangeBegin(void **args, int numBindings) {
  return *static_cast<int64_t *>(args[numBindings]);
}
int64_t rangeEnd(void **args, int numBindings) {
  return *static_cast<int64_t *>(args[numBindings + 1]);
}

/// y[i] = 2 * x[i] + 1, counting each element and chunk it sees.
void affineKernel(void **args) {
  const float *x = binding<const float>(args, 0);
  float *y = binding<float>(args, 1);
  int64_t begin = rangeBegin(args, 2), end = rangeEnd(args, 2);
  for (int64_t i = begin; i < end; ++i)
    y[i] = 2.0f * x[i] + 1.0f;
  if (KernelState *state = kernelState; state && state->visits) {
    for (int64_t i = begin; i < end; ++i)
      state->visits[i].fetch_add(1, std::memory_order_relaxed);
    ++state->chunks;
    if (begin % 16 != 0 || (end % 16 != 0 && end != state->elements))
      ++state->misalignedChunks;
  }
}

/// Records its thread, then waits (at most 10 s) until a second thread has
/// entered too, so that a pool that really runs chunks in parallel always
/// shows two ids, however the chunks are scheduled.
void threadIdKernel(void **args) {
  KernelState &state = *kernelState;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.threadIds.insert(std::this_thread::get_id());
  }
  ++state.chunks;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      if (state.threadIds.size() >= 2)
        break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  (void)args;
}

/// y[i] = x[i] + 1 through a parallelFor nested in the kernel.
void nestedKernel(void **args) {
  const int32_t *x = binding<const int32_t>(args, 0);
  int32_t *y = binding<int32_t>(args, 1);
  int64_t begin = rangeBegin(args, 2), end = rangeEnd(args, 2);
  ThreadPool::get().parallelFor(end - begin, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = begin + b; i < begin + e; ++i)
      y[i] = x[i] + 1;
  });
}

void throwingKernel(void **args) {
  if (rangeBegin(args, 0) == 0)
    throw std::runtime_error("kernel failure");
}

void countingKernel(void **args) {
  (void)args;
  ++kernelState->chunks;
}

/// A device that is not the CPU device, to make foreign buffers.
class OtherDevice final : public Device {
public:
  class OtherBuffer final : public Buffer {
  public:
    OtherBuffer(Device &device, size_t size) : Buffer(device, size) {}
  };

  const std::string &name() const override { return name_; }
  const std::string &api() const override { return name_; }
  std::string adapterName() const override { return name_; }
  std::string adapterUuid() const override { return name_; }
  StatusOr<std::shared_ptr<Buffer>> allocate(size_t bytes) override {
    return std::shared_ptr<Buffer>(std::make_shared<OtherBuffer>(*this, bytes));
  }
  Status upload(Buffer &, const void *, size_t) override {
    return Status::ok();
  }
  Status download(Buffer &, void *, size_t) override { return Status::ok(); }
  Status flush() override { return Status::ok(); }
  DeviceStats stats() const override { return {}; }
  void resetStats() override {}
  StatusOr<std::shared_ptr<Executable>> prepare(const ProgramKernel &) override {
    return Status::notFound("other:0 runs no kernels");
  }
  Status dispatch(Executable &, const std::vector<Buffer *> &) override {
    return Status::notFound("other:0 runs no kernels");
  }

private:
  std::string name_ = "other:0";
};

class CpuDeviceTest : public ::testing::Test {
protected:
  void SetUp() override {
    kernelState = &state;
    cpu.resetStats();
  }
  void TearDown() override { kernelState = nullptr; }

  CpuDevice &cpu = CpuDevice::get();
  KernelState state;
};

TEST_F(CpuDeviceTest, NamesTheHost) {
  EXPECT_EQ(&CpuDevice::get(), &cpu);
  EXPECT_EQ(cpu.name(), "cpu:0");
  EXPECT_EQ(cpu.api(), "cpu");
  EXPECT_EQ(cpu.adapterUuid(), "host");
  std::string suffix = " (" + std::to_string(cpu.threads()) + " threads)";
  std::string adapter = cpu.adapterName();
  ASSERT_GT(adapter.size(), suffix.size());
  EXPECT_EQ(adapter.substr(adapter.size() - suffix.size()), suffix) << adapter;
  EXPECT_EQ(cpu.threads(), ThreadPool::get().threads());
  EXPECT_GE(cpu.threads(), 1u);
  KILN_ASSERT_OK(cpu.flush());
}

TEST_F(CpuDeviceTest, AllocationsOfOddSizesAreAlignedTo64Bytes) {
  std::vector<std::shared_ptr<Buffer>> buffers;
  for (size_t bytes = 0; bytes < 600; bytes += 7) {
    for (size_t extra : {size_t(0), size_t(1), size_t(63), size_t(65)}) {
      KILN_ASSERT_OK_AND_ASSIGN(buffer, cpu.allocate(bytes + extra));
      EXPECT_EQ(buffer->size(), bytes + extra);
      EXPECT_EQ(&buffer->device(), &cpu);
      void *data = CpuDevice::data(*buffer);
      ASSERT_NE(data, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 64, 0u)
          << "buffer of " << bytes + extra << " bytes";
      // The rounded-up size is writable (checked under sanitizers).
      std::memset(data, 0xab, (bytes + extra + 63) / 64 * 64);
      buffers.push_back(std::move(buffer));
    }
  }
  // The host pool is process-wide: earlier tests may have left buffers of
  // these sizes in it.
  EXPECT_EQ(cpu.stats().buffersAllocated + cpu.stats().bufferPoolHits, buffers.size());
}

TEST_F(CpuDeviceTest, AnImpossibleAllocationIsOutOfMemory) {
  for (size_t bytes : {std::numeric_limits<size_t>::max(),
                       std::numeric_limits<size_t>::max() / 2}) {
    StatusOr<std::shared_ptr<Buffer>> buffer = cpu.allocate(bytes);
    ASSERT_FALSE(buffer.isOk());
    EXPECT_EQ(buffer.status().code(), Status::Code::OutOfMemory);
    EXPECT_NE(buffer.status().message().find(std::to_string(bytes)),
              std::string::npos)
        << buffer.status().message();
  }
}

TEST_F(CpuDeviceTest, RoundTripIsBitExact) {
  constexpr size_t count = (1 << 20) + 3;
  std::mt19937 rng(7);
  std::vector<uint32_t> input(count);
  for (uint32_t &word : input)
    word = rng();
  KILN_ASSERT_OK_AND_ASSIGN(buffer, cpu.allocate(count * 4));
  KILN_ASSERT_OK(cpu.upload(*buffer, input.data(), count * 4));
  std::vector<uint32_t> output(count, 0xdeadbeef);
  KILN_ASSERT_OK(cpu.download(*buffer, output.data(), count * 4));
  EXPECT_TRUE(output == input);
  // A partial download reads the start of the buffer.
  uint32_t first[3] = {0, 0, 0};
  KILN_ASSERT_OK(cpu.download(*buffer, first, sizeof(first)));
  EXPECT_EQ(std::memcmp(first, input.data(), sizeof(first)), 0);
}

TEST_F(CpuDeviceTest, OutOfBoundsTransfersAreErrors) {
  std::vector<uint8_t> host(101, 1);
  KILN_ASSERT_OK_AND_ASSIGN(buffer, cpu.allocate(100));
  KILN_ASSERT_OK(cpu.upload(*buffer, host.data(), 100));
  Status upload = cpu.upload(*buffer, host.data(), 101);
  EXPECT_EQ(upload.code(), Status::Code::InvalidArgument);
  EXPECT_NE(upload.message().find("101"), std::string::npos)
      << upload.message();
  Status download = cpu.download(*buffer, host.data(), 101);
  EXPECT_EQ(download.code(), Status::Code::InvalidArgument);
  EXPECT_EQ(cpu.upload(*buffer, nullptr, 4).code(),
            Status::Code::InvalidArgument);
  KILN_ASSERT_OK(cpu.upload(*buffer, nullptr, 0));
  KILN_ASSERT_OK_AND_ASSIGN(empty, cpu.allocate(0));
  EXPECT_EQ(cpu.upload(*empty, host.data(), 1).code(),
            Status::Code::InvalidArgument);
  KILN_ASSERT_OK(cpu.download(*empty, host.data(), 0));
}

TEST_F(CpuDeviceTest, BuffersOfOtherDevicesAreRejected) {
  OtherDevice other;
  KILN_ASSERT_OK_AND_ASSIGN(foreign, other.allocate(64));
  EXPECT_EQ(CpuDevice::data(*foreign), nullptr);
  uint8_t host[64] = {};
  EXPECT_EQ(cpu.upload(*foreign, host, 4).code(),
            Status::Code::InvalidArgument);
  EXPECT_EQ(cpu.download(*foreign, host, 4).code(),
            Status::Code::InvalidArgument);
  KILN_ASSERT_OK_AND_ASSIGN(own, cpu.allocate(64));
  Status status = cpu.dispatch(affineKernel, {own.get(), foreign.get()}, 16);
  EXPECT_EQ(status.code(), Status::Code::InvalidArgument);
  EXPECT_NE(status.message().find("other:0"), std::string::npos)
      << status.message();
  EXPECT_EQ(cpu.dispatch(affineKernel, {own.get(), nullptr}, 16).code(),
            Status::Code::InvalidArgument);
}

TEST_F(CpuDeviceTest, BadDispatchArgumentsAreErrors) {
  KILN_ASSERT_OK_AND_ASSIGN(buffer, cpu.allocate(64));
  EXPECT_EQ(cpu.dispatch(nullptr, {buffer.get()}, 16).code(),
            Status::Code::InvalidArgument);
  EXPECT_EQ(cpu.dispatch(countingKernel, {}, -1).code(),
            Status::Code::InvalidArgument);
  EXPECT_EQ(cpu.dispatch(countingKernel, {}, 16, 0).code(),
            Status::Code::InvalidArgument);
  KILN_ASSERT_OK(cpu.dispatch(countingKernel, {}, 0));
  EXPECT_EQ(state.chunks.load(), 0) << "an empty dispatch ran the kernel";
}

TEST_F(CpuDeviceTest, DispatchComputesEveryElementExactlyOnce) {
  constexpr int64_t count = 1000003;
  std::vector<float> x(count);
  for (int64_t i = 0; i < count; ++i)
    x[i] = static_cast<float>(i % 4099) - 2049.0f; // exact in float
  auto visits = std::make_unique<std::atomic<uint32_t>[]>(count);
  state.visits = visits.get();
  state.elements = count;

  KILN_ASSERT_OK_AND_ASSIGN(xBuffer, cpu.allocate(count * 4));
  KILN_ASSERT_OK_AND_ASSIGN(yBuffer, cpu.allocate(count * 4));
  KILN_ASSERT_OK(cpu.upload(*xBuffer, x.data(), count * 4));
  KILN_ASSERT_OK(cpu.dispatch(affineKernel, {xBuffer.get(), yBuffer.get()},
                              count, 16384));
  std::vector<float> y(count, -1.0f);
  KILN_ASSERT_OK(cpu.download(*yBuffer, y.data(), count * 4));

  int64_t wrongValues = 0, wrongVisits = 0;
  for (int64_t i = 0; i < count; ++i) {
    wrongValues += y[i] != 2.0f * x[i] + 1.0f;
    wrongVisits += visits[i].load() != 1;
  }
  EXPECT_EQ(wrongValues, 0);
  EXPECT_EQ(wrongVisits, 0) << "elements computed zero or several times";
  EXPECT_GE(state.chunks.load(), 1);
  EXPECT_LE(state.chunks.load(), static_cast<int64_t>(cpu.threads()));
  EXPECT_EQ(state.misalignedChunks.load(), 0);
}

TEST_F(CpuDeviceTest, DispatchUsesSeveralThreads) {
  if (cpu.threads() < 2)
    GTEST_SKIP() << "the pool has one thread (KILN_NUM_THREADS or one core)";
  KILN_ASSERT_OK(cpu.dispatch(threadIdKernel, {}, 1 << 16, 16));
  EXPECT_EQ(state.chunks.load(), static_cast<int64_t>(cpu.threads()));
  EXPECT_GE(state.threadIds.size(), 2u);
}

TEST_F(CpuDeviceTest, NestedParallelForInAKernelDoesNotDeadlock) {
  constexpr int64_t count = 100000;
  std::vector<int32_t> x(count);
  for (int64_t i = 0; i < count; ++i)
    x[i] = static_cast<int32_t>(i * 3);
  KILN_ASSERT_OK_AND_ASSIGN(xBuffer, cpu.allocate(count * 4));
  KILN_ASSERT_OK_AND_ASSIGN(yBuffer, cpu.allocate(count * 4));
  KILN_ASSERT_OK(cpu.upload(*xBuffer, x.data(), count * 4));
  KILN_ASSERT_OK(
      cpu.dispatch(nestedKernel, {xBuffer.get(), yBuffer.get()}, count, 64));
  std::vector<int32_t> y(count);
  KILN_ASSERT_OK(cpu.download(*yBuffer, y.data(), count * 4));
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i)
    wrong += y[i] != x[i] + 1;
  EXPECT_EQ(wrong, 0);
}

TEST_F(CpuDeviceTest, AKernelExceptionIsAnInternalError) {
  Status status = cpu.dispatch(throwingKernel, {}, 1 << 16, 16);
  EXPECT_EQ(status.code(), Status::Code::Internal);
  EXPECT_NE(status.message().find("kernel failure"), std::string::npos)
      << status.message();
  // The pool is usable afterwards.
  KILN_ASSERT_OK(cpu.dispatch(countingKernel, {}, 1 << 16, 16));
}

TEST_F(CpuDeviceTest, StatsCountDispatchesAndBytes) {
  KILN_ASSERT_OK_AND_ASSIGN(a, cpu.allocate(256));
  KILN_ASSERT_OK_AND_ASSIGN(b, cpu.allocate(256));
  std::vector<uint8_t> host(256, 3);
  KILN_ASSERT_OK(cpu.upload(*a, host.data(), 256));
  KILN_ASSERT_OK(cpu.upload(*b, host.data(), 100));
  KILN_ASSERT_OK(cpu.download(*a, host.data(), 40));
  KILN_ASSERT_OK(cpu.dispatch(countingKernel, {a.get(), b.get()}, 64));
  KILN_ASSERT_OK(cpu.dispatch(countingKernel, {a.get()}, 64));
  EXPECT_FALSE(cpu.upload(*a, host.data(), 257).isOk());
  DeviceStats stats = cpu.stats();
  EXPECT_EQ(stats.dispatches, 2u);
  EXPECT_EQ(stats.bytesUploaded, 356u);
  EXPECT_EQ(stats.bytesDownloaded, 40u);
  // The host pool is process-wide: earlier tests may have left 256-byte
  // buffers in it, so the two allocations are new ones or pool hits.
  EXPECT_EQ(stats.buffersAllocated + stats.bufferPoolHits, 2u);
  EXPECT_EQ(stats.submits, 0u);
  cpu.resetStats();
  stats = cpu.stats();
  EXPECT_EQ(stats.dispatches, 0u);
  EXPECT_EQ(stats.bytesUploaded, 0u);
  EXPECT_EQ(stats.bytesDownloaded, 0u);
  EXPECT_EQ(stats.buffersAllocated, 0u);
  EXPECT_EQ(stats.bufferPoolHits, 0u);
}

//===----------------------------------------------------------------------===//
// ThreadPool
//===----------------------------------------------------------------------===//

struct Chunk {
  int64_t begin, end;
  bool operator<(const Chunk &other) const { return begin < other.begin; }
};

/// The chunks parallelFor(n, grain, alignment) hands out, sorted.
std::vector<Chunk> chunksOf(ThreadPool &pool, int64_t n, int64_t grain,
                            int64_t alignment = ThreadPool::kChunkAlignment) {
  std::mutex mutex;
  std::set<Chunk> chunks;
  pool.parallelFor(
      n, grain,
      [&](int64_t begin, int64_t end) {
        std::lock_guard<std::mutex> lock(mutex);
        chunks.insert({begin, end});
      },
      alignment);
  return {chunks.begin(), chunks.end()};
}

TEST(ThreadPoolTest, ChunksCoverTheRangeAlignedAndNoSmallerThanTheGrain) {
  ThreadPool pool(5);
  ASSERT_EQ(pool.threads(), 5u);
  for (int64_t n : {1, 15, 16, 17, 100, 1000, 4096, 65537, 1000003}) {
    for (int64_t grain : {1, 7, 16, 30, 100, 16384}) {
      std::vector<Chunk> chunks = chunksOf(pool, n, grain);
      SCOPED_TRACE("n=" + std::to_string(n) +
                   " grain=" + std::to_string(grain));
      ASSERT_FALSE(chunks.empty());
      EXPECT_LE(chunks.size(), 5u);
      EXPECT_EQ(chunks.front().begin, 0);
      EXPECT_EQ(chunks.back().end, n);
      for (size_t i = 0; i < chunks.size(); ++i) {
        EXPECT_LT(chunks[i].begin, chunks[i].end);
        EXPECT_EQ(chunks[i].begin % 16, 0);
        if (i + 1 < chunks.size())
          EXPECT_EQ(chunks[i].end, chunks[i + 1].begin);
        if (chunks.size() > 1)
          EXPECT_GE(chunks[i].end - chunks[i].begin, grain);
      }
      // Enough work is spread over every thread.
      if (n / 16 >= 5 * ((grain + 15) / 16))
        EXPECT_EQ(chunks.size(), 5u);
    }
  }
  EXPECT_TRUE(chunksOf(pool, 0, 1).empty());
  EXPECT_TRUE(chunksOf(pool, -5, 1).empty());
}

// Iterations that are whole loops (matmul panels, rows) split without the
// 16-element alignment: 7 panels still reach every thread.
TEST(ThreadPoolTest, AlignmentOneSplitsFewCoarseIterations) {
  ThreadPool pool(3);
  for (int64_t n : {2, 3, 7, 16, 17}) {
    std::vector<Chunk> chunks = chunksOf(pool, n, 1, 1);
    SCOPED_TRACE("n=" + std::to_string(n));
    EXPECT_EQ(chunks.size(), std::min<size_t>(3, n));
    EXPECT_EQ(chunks.front().begin, 0);
    EXPECT_EQ(chunks.back().end, n);
    for (size_t i = 0; i + 1 < chunks.size(); ++i)
      EXPECT_EQ(chunks[i].end, chunks[i + 1].begin);
  }
  EXPECT_EQ(chunksOf(pool, 7, 1).size(), 1u) << "16-aligned: one chunk";
}

TEST(ThreadPoolTest, EveryThreadOfAPrivatePoolRunsAChunk) {
  ThreadPool pool(4);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  std::atomic<int> chunks{0};
  // Each chunk waits (at most 10 s) until four threads have entered, so the
  // chunks must be on four different threads.
  pool.parallelFor(4096, 16, [&](int64_t, int64_t) {
    ++chunks;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    {
      std::lock_guard<std::mutex> lock(mutex);
      ids.insert(std::this_thread::get_id());
    }
    while (Clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (ids.size() >= 4)
          break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_EQ(chunks.load(), 4);
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u)
      << "the caller did not run a chunk";
}

TEST(ThreadPoolTest, NestedCallsRunInlineOnTheirThread) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::atomic<int> foreignThreads{0};
  pool.parallelFor(3 * 1024, 16, [&](int64_t begin, int64_t end) {
    std::thread::id outer = std::this_thread::get_id();
    int calls = 0;
    pool.parallelFor(end - begin, 1, [&](int64_t b, int64_t e) {
      ++calls;
      if (std::this_thread::get_id() != outer)
        ++foreignThreads;
      total += e - b;
    });
    EXPECT_EQ(calls, 1);
  });
  EXPECT_EQ(total.load(), 3 * 1024);
  EXPECT_EQ(foreignThreads.load(), 0);
}

TEST(ThreadPoolTest, ACallDuringAnotherThreadsCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<bool> firstInside{false}, release{false};
  std::thread first([&] {
    pool.parallelFor(1024, 16, [&](int64_t, int64_t) {
      firstInside = true;
      auto deadline = Clock::now() + std::chrono::seconds(10);
      while (!release && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!firstInside && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(firstInside.load());
  std::vector<Chunk> chunks = chunksOf(pool, 1024, 16);
  release = true;
  first.join();
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].begin, 0);
  EXPECT_EQ(chunks[0].end, 1024);
}

TEST(ThreadPoolTest, AnExceptionReachesTheCallerAfterEveryChunkFinished) {
  ThreadPool pool(4);
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> finished{0};
    bool caught = false;
    try {
      pool.parallelFor(4096, 16, [&](int64_t begin, int64_t) {
        if (begin == 1024)
          throw std::runtime_error("chunk failure");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ++finished;
      });
    } catch (const std::runtime_error &e) {
      caught = true;
      EXPECT_STREQ(e.what(), "chunk failure");
      EXPECT_EQ(finished.load(), 3) << "returned before the other chunks";
    }
    EXPECT_TRUE(caught);
  }
  // Also when the caller's own chunk throws.
  EXPECT_THROW(pool.parallelFor(4096, 16,
                                [&](int64_t, int64_t) {
                                  throw std::logic_error("everywhere");
                                }),
               std::logic_error);
  std::atomic<int64_t> total{0};
  pool.parallelFor(4096, 16,
                   [&](int64_t begin, int64_t end) { total += end - begin; });
  EXPECT_EQ(total.load(), 4096);
}

TEST(ThreadPoolTest, ASingleThreadPoolRunsEverythingOnTheCaller) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.threads(), 1u);
  std::vector<Chunk> chunks = chunksOf(pool, 100000, 16);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].end, 100000);
  EXPECT_EQ(ThreadPool(0).threads(), 1u);
}

TEST(ThreadPoolTest, ThreadCountsAreParsedStrictly) {
  for (auto [text, expected] :
       {std::pair<const char *, size_t>{"1", 1}, {"4", 4}, {"64", 64},
        {"1024", 1024}, {"0008", 8}}) {
    StatusOr<size_t> count = ThreadPool::parseThreadCount(text);
    ASSERT_TRUE(count.isOk()) << text << ": " << count.status().toString();
    EXPECT_EQ(*count, expected) << text;
  }
  for (const char *text : {(const char *)nullptr, "", "0", "1025", "-1", "+4",
                           " 4", "4 ", "4x", "0x10", "99999", "1e3", "4.0"}) {
    StatusOr<size_t> count = ThreadPool::parseThreadCount(text);
    ASSERT_FALSE(count.isOk()) << (text ? text : "(null)");
    EXPECT_EQ(count.status().code(), Status::Code::InvalidArgument);
    EXPECT_NE(count.status().message().find("KILN_NUM_THREADS"),
              std::string::npos)
        << count.status().message();
  }
}

TEST(ThreadPoolTest, TheEnvironmentSetsTheThreadCount) {
  const char *saved = std::getenv("KILN_NUM_THREADS");
  std::string savedValue = saved ? saved : "";
  setenv("KILN_NUM_THREADS", "3", 1);
  EXPECT_EQ(ThreadPool::threadCountFromEnvironment(), 3u);
  size_t cores = std::max(1u, std::thread::hardware_concurrency());
  setenv("KILN_NUM_THREADS", "lots", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(ThreadPool::threadCountFromEnvironment(),
            std::min<size_t>(cores, ThreadPool::kMaxThreads));
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("KILN_NUM_THREADS='lots'"), std::string::npos)
      << warning;
  unsetenv("KILN_NUM_THREADS");
  EXPECT_EQ(ThreadPool::threadCountFromEnvironment(),
            std::min<size_t>(cores, ThreadPool::kMaxThreads));
  if (saved)
    setenv("KILN_NUM_THREADS", savedValue.c_str(), 1);
}

} // namespace
} // namespace kiln::rt::test
