//===- Cpu.h - The CPU device of the Kiln runtime ---------------*- C++ -*-===//
//
// CpuDevice runs JIT-compiled kernels on host memory, spread over the
// process's ThreadPool. Buffers are plain 64-byte aligned host allocations.
//
// Ownership: get() is the process's one CPU device, alive until exit; its
// buffers are owned by shared_ptrs and freed when the last one dies.
//
// Threading: every method may be called from any thread. Work is synchronous
// (each call has finished when it returns), so calls are not serialized
// against each other: callers order conflicting uses of one buffer. Two
// dispatches at once do not oversubscribe: the second runs serially on its
// own thread (see ThreadPool.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_H
#define KILN_RUNTIME_CPU_H

#include "kiln/runtime/Device.h"
#include "kiln/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {

/// A JIT-compiled kernel: the packed calling convention of MLIR's
/// ExecutionEngine (`_mlir_<name>`): args[i] points at the i-th argument's
/// value. Kernels take one pointer per binding (bare data pointers), then two
/// int64_t: begin and end of the element range to compute.
using CpuKernelFn = void (*)(void **args);

class CpuDevice final : public Device {
public:
  /// Alignment, in bytes, of every buffer's data (and of its rounded size).
  static constexpr size_t kAlignment = 64;

  /// The process's one CPU device, "cpu:0".
  static CpuDevice &get();

  ~CpuDevice() override;
  CpuDevice(const CpuDevice &) = delete;
  CpuDevice &operator=(const CpuDevice &) = delete;

  /// "cpu:0".
  const std::string &name() const override;
  /// "cpu".
  const std::string &api() const override;
  /// The "model name" of /proc/cpuinfo (else "host CPU"), then " (N threads)".
  std::string adapterName() const override;
  /// "host".
  std::string adapterUuid() const override;

  /// kAlignment-aligned host memory of `bytes` rounded up to kAlignment (a
  /// 0-byte buffer still has memory behind it); not zeroed. OutOfMemory,
  /// saying how many bytes were asked, if the host has none to give.
  StatusOr<std::shared_ptr<Buffer>> allocate(size_t bytes) override;
  /// memcpy into the start of `dst`; more than dst.size() bytes, or a buffer
  /// of another device, is an InvalidArgument.
  Status upload(Buffer &dst, const void *src, size_t bytes) override;
  /// memcpy from the start of `src`, checked as upload().
  Status download(Buffer &src, void *dst, size_t bytes) override;
  /// Kernels run synchronously: nothing to wait for.
  Status flush() override;

  /// Counts dispatches, bytesUploaded, bytesDownloaded and buffersAllocated;
  /// the other fields stay 0.
  DeviceStats stats() const override;
  void resetStats() override;
  /// The kernel's CPU entry (JIT or loaded ahead-of-time code).
  StatusOr<std::shared_ptr<Executable>> prepare(const ProgramKernel &kernel) override;
  /// Splits the kernel's outer loop over the thread pool.
  Status dispatch(Executable &executable, const std::vector<Buffer *> &arguments) override;

  /// The host address of a buffer of this device (nullptr for others').
  static void *data(Buffer &buffer);

  /// Runs `kernel` over [0, elements) split into chunks across the thread
  /// pool; each call gets (binding pointers..., begin, end). `grain` is the
  /// minimum elements per chunk; chunk boundaries are multiples of
  /// `alignment` (ThreadPool::parallelFor; below 1 is taken as 1). Returns
  /// after all chunks have finished.
  /// A binding of another device, a null kernel, elements < 0 or grain < 1
  /// is an InvalidArgument; an exception thrown by the kernel is Internal.
  Status dispatch(CpuKernelFn kernel, const std::vector<Buffer *> &bindings,
                  int64_t elements, int64_t grain = 16384, int64_t alignment = 16);

  /// Threads a dispatch runs on (the pool's, the caller included).
  size_t threads() const;

  struct State;

private:
  CpuDevice();

  std::unique_ptr<State> state_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_CPU_H
