//===- CudaDriver.h - CUDA's driver API, loaded at run time -----*- C++ -*-===//
//
// Private to runtime/lib. NVIDIA's driver ships libcuda.so.1 beside its
// Vulkan driver; Kiln loads it with dlopen (no CUDA toolkit, no header) to
// launch the PTX kernels its compiler writes for GPUs CUDA runs
// (CudaInterop.h). The declarations below are the driver API's stable C
// ABI (cuda.h of CUDA 12), only the parts Kiln calls.
//
// Ownership: one process-wide table, loaded once and never unloaded.
// Threading: the driver API is thread-safe; a thread makes a context
// current before calling into it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_CUDADRIVER_H
#define KILN_RUNTIME_LIB_CUDADRIVER_H

#include "kiln/runtime/Status.h"

#include <cstdint>
#include <string>

namespace kiln::rt::cuda {

using Result = int; // CUresult: 0 is CUDA_SUCCESS
using DeviceId = int;
using Context = struct CtxSt *;
using Module = struct ModSt *;
using Function = struct FuncSt *;
using Stream = struct StreamSt *;
using ExternalMemory = struct ExtMemSt *;
using DevicePtr = unsigned long long;

struct Uuid {
  unsigned char bytes[16];
};

// CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD and CUDA_EXTERNAL_MEMORY_DEDICATED.
constexpr int kExternalMemoryOpaqueFd = 1;
constexpr unsigned kExternalMemoryDedicated = 1;

struct ExternalMemoryHandleDesc {
  int type;
  union {
    int fd;
    struct {
      void *handle;
      const void *name;
    } win32;
    const void *nvSciBufObject;
  } handle;
  unsigned long long size;
  unsigned flags;
  unsigned reserved[16];
};

struct ExternalMemoryBufferDesc {
  unsigned long long offset;
  unsigned long long size;
  unsigned flags;
  unsigned reserved[16];
};

// CUdevice_attribute and CUfunction_attribute values.
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kAttrMaxSharedPerBlockOptin = 97;
constexpr int kFuncMaxDynamicSharedBytes = 8;

struct Api {
  Result (*init)(unsigned);
  Result (*deviceGetCount)(int *);
  Result (*deviceGet)(DeviceId *, int);
  Result (*deviceGetUuid)(Uuid *, DeviceId);
  Result (*deviceGetAttribute)(int *, int, DeviceId);
  Result (*primaryCtxRetain)(Context *, DeviceId);
  Result (*primaryCtxRelease)(DeviceId);
  Result (*ctxSetCurrent)(Context);
  Result (*streamCreate)(Stream *, unsigned);
  Result (*streamDestroy)(Stream);
  Result (*streamSynchronize)(Stream);
  Result (*moduleLoadData)(Module *, const void *);
  Result (*moduleUnload)(Module);
  Result (*moduleGetFunction)(Function *, Module, const char *);
  Result (*funcSetAttribute)(Function, int, int);
  Result (*launchKernel)(Function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, Stream, void **, void **);
  Result (*importExternalMemory)(ExternalMemory *, const ExternalMemoryHandleDesc *);
  Result (*externalMemoryGetMappedBuffer)(DevicePtr *, ExternalMemory,
                                          const ExternalMemoryBufferDesc *);
  Result (*destroyExternalMemory)(ExternalMemory);
  Result (*memFree)(DevicePtr);
  Result (*getErrorName)(Result, const char **);
  Result (*getErrorString)(Result, const char **);
};

/// The driver's table, loaded and cuInit'ed on first use; an error saying
/// why not (no libcuda.so.1, a symbol missing, cuInit failing) otherwise.
StatusOr<const Api *> driver();

/// "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (invalid argument)" as a
/// Status, or ok for 0.
Status check(Result result, const std::string &what);

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_LIB_CUDADRIVER_H
