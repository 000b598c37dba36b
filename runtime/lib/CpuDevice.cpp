//===- CpuDevice.cpp - Host memory and kernels on the thread pool ---------===//
//
// CpuBuffer owns one aligned host allocation, freed by its destructor without
// touching the device. The device keeps only immutable names and atomic
// counters, so no method takes a lock; dispatches split their element range
// over ThreadPool::get().
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Cpu.h"

#include "kiln/runtime/ThreadPool.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <new>

#include <sys/sysinfo.h>

namespace kiln::rt {

namespace {

/// Freed host memory kept for reuse, by rounded size: fresh pages cost a
/// page fault each on first touch (16 ms for 64 MiB here), which dominated
/// elementwise kernels that allocate their result every run. Thread-safe.
class HostPool {
public:
  static constexpr size_t kMaxCachedBytes = size_t(1) << 30;

  void *take(size_t rounded) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(rounded);
    if (it == free_.end() || it->second.empty())
      return nullptr;
    void *data = it->second.back();
    it->second.pop_back();
    cached_ -= rounded;
    return data;
  }

  void give(void *data, size_t rounded) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + rounded <= kMaxCachedBytes) {
        free_[rounded].push_back(data);
        cached_ += rounded;
        return;
      }
    }
    std::free(data);
  }

private:
  std::mutex mutex_;
  std::map<size_t, std::vector<void *>> free_;
  size_t cached_ = 0;
};

class CpuBuffer final : public Buffer {
public:
  CpuBuffer(Device &device, size_t size, void *data, size_t rounded, HostPool &pool)
      : Buffer(device, size), data_(data), rounded_(rounded), pool_(pool) {}
  ~CpuBuffer() override { pool_.give(data_, rounded_); }

  void *data() const { return data_; }

private:
  void *data_;
  size_t rounded_;
  HostPool &pool_;
};

/// The "model name" line of /proc/cpuinfo, or "host CPU" without one (other
/// systems, or architectures that name their cores differently).
std::string cpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0)
      continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    size_t first = line.find_first_not_of(" \t", colon + 1);
    size_t last = line.find_last_not_of(" \t\r");
    if (first == std::string::npos || last < first)
      continue;
    return line.substr(first, last - first + 1);
  }
  return "host CPU";
}

} // namespace

struct CpuDevice::State {
  std::string name = "cpu:0";
  std::string api = "cpu";
  std::string model = cpuModelName();

  std::atomic<uint64_t> dispatches{0};
  std::atomic<uint64_t> bytesUploaded{0};
  std::atomic<uint64_t> bytesDownloaded{0};
  std::atomic<uint64_t> buffersAllocated{0};
  std::atomic<uint64_t> bufferPoolHits{0};
  HostPool pool;
};

CpuDevice::CpuDevice() : state_(std::make_unique<State>()) {}
CpuDevice::~CpuDevice() = default;

CpuDevice &CpuDevice::get() {
  // Never destroyed: buffers held by other static objects may outlive any
  // destruction order, and the device owns nothing that needs releasing.
  static CpuDevice *device = new CpuDevice();
  return *device;
}

const std::string &CpuDevice::name() const { return state_->name; }
const std::string &CpuDevice::api() const { return state_->api; }
std::string CpuDevice::adapterUuid() const { return "host"; }

std::string CpuDevice::adapterName() const {
  return state_->model + " (" + std::to_string(threads()) + " threads)";
}

size_t CpuDevice::threads() const { return ThreadPool::get().threads(); }

void *CpuDevice::data(Buffer &buffer) {
  // Only this device makes buffers whose device() is it.
  if (&buffer.device() != &get())
    return nullptr;
  return static_cast<CpuBuffer &>(buffer).data();
}

StatusOr<std::shared_ptr<Buffer>> CpuDevice::allocate(size_t bytes) {
  auto outOfMemory = [&] {
    return Status::outOfMemory("cannot allocate " + std::to_string(bytes) +
                               " bytes of host memory on " + name());
  };
  if (bytes > std::numeric_limits<size_t>::max() - kAlignment)
    return outOfMemory();
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0)
    rounded = kAlignment;
  // Where the kernel overcommits memory (vm.overcommit_memory=1, common on
  // servers), malloc grants any size and the first write past what the
  // machine has kills the process: refuse a buffer larger than its memory
  // and swap together up front (read once: not a system call per buffer).
  static const uint64_t machineBytes = [] {
    struct sysinfo info;
    if (sysinfo(&info) != 0)
      return std::numeric_limits<uint64_t>::max();
    unsigned __int128 total =
        (unsigned __int128)(uint64_t(info.totalram) + info.totalswap) * info.mem_unit;
    return total > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                         : uint64_t(total);
  }();
  if (rounded > machineBytes)
    return outOfMemory();
  void *data = state_->pool.take(rounded);
  bool reused = data != nullptr;
  if (!data)
    data = std::aligned_alloc(kAlignment, rounded);
  if (!data)
    return outOfMemory();
  std::shared_ptr<Buffer> buffer;
  try {
    buffer = std::make_shared<CpuBuffer>(*this, bytes, data, rounded, state_->pool);
  } catch (const std::bad_alloc &) {
    std::free(data);
    return outOfMemory();
  }
  ++(reused ? state_->bufferPoolHits : state_->buffersAllocated);
  return buffer;
}

/// Checks a transfer of `bytes` between host memory `host` and `buffer`.
static Status checkTransfer(const CpuDevice &device, Buffer &buffer,
                            const void *host, size_t bytes, const char *what) {
  if (&buffer.device() != &device)
    return Status::invalidArgument(
        std::string(what) + " on " + device.name() + " of a buffer of " +
        buffer.device().name() + ": use that buffer's own device");
  if (bytes > buffer.size())
    return Status::invalidArgument(
        std::string(what) + " of " + std::to_string(bytes) +
        " bytes exceeds the " + std::to_string(buffer.size()) +
        "-byte buffer on " + device.name());
  if (!host && bytes != 0)
    return Status::invalidArgument(std::string(what) + " of " +
                                   std::to_string(bytes) +
                                   " bytes with a null host pointer");
  return Status::ok();
}

Status CpuDevice::upload(Buffer &dst, const void *src, size_t bytes) {
  Status status = checkTransfer(*this, dst, src, bytes, "upload");
  if (!status.isOk())
    return status;
  if (bytes != 0)
    std::memcpy(data(dst), src, bytes);
  state_->bytesUploaded += bytes;
  return Status::ok();
}

Status CpuDevice::download(Buffer &src, void *dst, size_t bytes) {
  Status status = checkTransfer(*this, src, dst, bytes, "download");
  if (!status.isOk())
    return status;
  if (bytes != 0)
    std::memcpy(dst, data(src), bytes);
  state_->bytesDownloaded += bytes;
  return Status::ok();
}

Status CpuDevice::flush() { return Status::ok(); }

DeviceStats CpuDevice::stats() const {
  DeviceStats stats;
  stats.dispatches = state_->dispatches.load();
  stats.bytesUploaded = state_->bytesUploaded.load();
  stats.bytesDownloaded = state_->bytesDownloaded.load();
  stats.buffersAllocated = state_->buffersAllocated.load();
  stats.bufferPoolHits = state_->bufferPoolHits.load();
  return stats;
}

void CpuDevice::resetStats() {
  state_->dispatches = 0;
  state_->bytesUploaded = 0;
  state_->bytesDownloaded = 0;
  state_->buffersAllocated = 0;
  state_->bufferPoolHits = 0;
}

Status CpuDevice::dispatch(CpuKernelFn kernel,
                           const std::vector<Buffer *> &bindings,
                           int64_t elements, int64_t grain, int64_t alignment) {
  if (!kernel)
    return Status::invalidArgument("dispatch on " + name() +
                                   " of a null kernel");
  if (elements < 0 || grain < 1)
    return Status::invalidArgument(
        "dispatch on " + name() + " over " + std::to_string(elements) +
        " elements with grain " + std::to_string(grain) +
        ": expected elements >= 0 and grain >= 1");
  // The bindings' values; args point into this, shared by every chunk.
  std::vector<void *> pointers;
  pointers.reserve(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (!bindings[i])
      return Status::invalidArgument("binding " + std::to_string(i) +
                                     " of a dispatch on " + name() +
                                     " is null");
    void *pointer = data(*bindings[i]);
    if (!pointer)
      return Status::invalidArgument(
          "binding " + std::to_string(i) + " belongs to " +
          bindings[i]->device().name() + ", not " + name() +
          ": allocate it on " + name() + " or copy it there through the host");
    pointers.push_back(pointer);
  }
  ++state_->dispatches;

  size_t numArgs = pointers.size() + 2;
  auto runChunk = [&](int64_t begin, int64_t end) {
    std::vector<void *> args(numArgs);
    for (size_t i = 0; i < pointers.size(); ++i)
      args[i] = &pointers[i];
    args[numArgs - 2] = &begin;
    args[numArgs - 1] = &end;
    kernel(args.data());
  };
  try {
    ThreadPool::get().parallelFor(elements, grain, runChunk, alignment);
  } catch (const std::exception &e) {
    return Status::internal("a kernel dispatched on " + name() +
                            " threw: " + e.what());
  } catch (...) {
    return Status::internal("a kernel dispatched on " + name() +
                            " threw a non-standard exception");
  }
  return Status::ok();
}

} // namespace kiln::rt
