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
// Kernels run in two steps, the same for every backend: prepare() makes a
// kernel of a Program runnable on the device (a Vulkan pipeline, a CPU
// entry point) as an Executable, and dispatch() runs an executable over
// the dispatch step's arguments. Devices are found by name through the
// registry (Registry.h), not by comparing API strings.
//
// Threading: every Device method may be called from any thread; a device
// serializes its own calls. A buffer may be released from any thread. An
// Executable is immutable and may be dispatched from several threads.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DEVICE_H
#define KILN_RUNTIME_DEVICE_H

#include "kiln/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {

/// Counters since the device was created or last reset; tests and `--stats`
/// use them to assert what a run did (e.g. "warm run: no pipeline created").
struct DeviceStats {
  uint64_t dispatches = 0;
  uint64_t pipelinesCreated = 0;
  uint64_t pipelineCacheHits = 0;
  /// Pipelines the driver found in its cache (Vulkan 1.3 drivers report
  /// it): made by an earlier process and kept in the cache's store.
  uint64_t driverCacheHits = 0;
  uint64_t bytesUploaded = 0;
  uint64_t bytesDownloaded = 0;
  /// Bytes copied to another Vulkan device through host memory both import
  /// (VulkanDevice::copyToDevice), counted on the source.
  uint64_t bytesToPeers = 0;
  uint64_t submits = 0;
  uint64_t buffersAllocated = 0; // new device allocations (pool misses)
  uint64_t bufferPoolHits = 0;   // allocations served from the pool
  uint64_t validationMessages = 0;
};

class Device;
class VulkanDevice;
struct ProgramKernel;

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

/// A kernel made runnable on one device by Device::prepare().
class Executable {
public:
  virtual ~Executable();
  Executable(const Executable &) = delete;
  Executable &operator=(const Executable &) = delete;
  Device &device() const { return *device_; }

protected:
  explicit Executable(Device &device) : device_(&device) {}

private:
  Device *device_;
};

class Device {
public:
  virtual ~Device();

  /// `kernel` made runnable here; NotFound, naming the kernel and this
  /// device, when it has no code for this device's kind; the device's own
  /// error when its code is rejected (malformed SPIR-V).
  virtual StatusOr<std::shared_ptr<Executable>> prepare(const ProgramKernel &kernel) = 0;
  /// Whether this device runs `kernel` as it was compiled (a GPU kernel's
  /// subgroup size, workgroup limits and features): checked for every
  /// kernel of a model before anything runs. Unavailable, naming the
  /// assumption, the kernel's value and the device's, when it does not.
  virtual Status checkKernel(const ProgramKernel &) { return Status::ok(); }
  /// Runs an executable prepared here over `arguments`: the dispatch step's
  /// operands, then its results, all buffers of this device. Ordered after
  /// earlier work on the device.
  virtual Status dispatch(Executable &executable, const std::vector<Buffer *> &arguments) = 0;
  /// This device, when it can record and replay programs (Vulkan); else
  /// null.
  virtual VulkanDevice *replayDevice() { return nullptr; }

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
