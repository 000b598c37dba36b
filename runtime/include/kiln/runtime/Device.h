//===- Device.h - Abstract device and buffer of the runtime -----*- C++ -*-===//
//
// A Device is one logical execution device (e.g. "vulkan:0"); Buffers are
// device memory of a fixed byte size. The interface is what every backend
// (Vulkan and the CPU) offers to executables and the Tensor API.
//
// Ownership: a device is owned by its backend's context and outlives every
// use of it; buffers are owned by shared_ptrs and go back to their device's
// pool when the last one dies. All buffers must die before their device's
// context is destroyed (a device destroyed earlier leaks its memory with a
// warning rather than crash).
//
// Threading: every Device method may be called from any thread; a device
// serializes its own calls. A buffer may be released from any thread.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DEVICE_H
#define KILN_RUNTIME_DEVICE_H

#include "kiln/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::rt {

/// Counters since the device was created or last reset; tests and `--stats`
/// use them to assert what a run did (e.g. "warm run: no pipeline created").
struct DeviceStats {
  uint64_t dispatches = 0;
  uint64_t pipelinesCreated = 0;
  uint64_t pipelineCacheHits = 0;
  uint64_t bytesUploaded = 0;
  uint64_t bytesDownloaded = 0;
  uint64_t submits = 0;
  uint64_t buffersAllocated = 0; // new device allocations (pool misses)
  uint64_t bufferPoolHits = 0;   // allocations served from the pool
  uint64_t validationMessages = 0;
};

class Device;

/// Device memory of a fixed byte size.
class Buffer {
public:
  virtual ~Buffer();
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  /// The size asked for at allocation (the pool may hold more).
  size_t size() const { return size_; }
  Device &device() const { return *device_; }

protected:
  Buffer(Device &device, size_t size) : device_(&device), size_(size) {}

private:
  Device *device_;
  size_t size_;
};

class Device {
public:
  virtual ~Device();

  /// "vulkan:0".
  virtual const std::string &name() const = 0;
  /// "vulkan".
  virtual const std::string &api() const = 0;
  /// "llvmpipe (LLVM 15.0.6, 256 bits)".
  virtual std::string adapterName() const = 0;
  /// 32 lowercase hex digits as 8-4-4-4-12; equal for two logical devices of
  /// one physical adapter.
  virtual std::string adapterUuid() const = 0;

  /// A size-0 buffer is valid and has a minimal allocation behind it.
  virtual StatusOr<std::shared_ptr<Buffer>> allocate(size_t bytes) = 0;
  /// Copies `bytes` from host memory into the start of `dst`; `src` may be
  /// reused as soon as this returns. The device copy is ordered before any
  /// later work on this device.
  virtual Status upload(Buffer &dst, const void *src, size_t bytes) = 0;
  /// Waits for pending work, then copies the first `bytes` of `src` to host.
  virtual Status download(Buffer &src, void *dst, size_t bytes) = 0;
  /// Submits recorded work and waits for it to finish.
  virtual Status flush() = 0;

  virtual DeviceStats stats() const = 0;
  virtual void resetStats() = 0;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_DEVICE_H
