//===- CudaDriver.cpp - CUDA's driver API, loaded at run time -------------===//

#include "CudaDriver.h"

#include <atomic>
#include <dlfcn.h>

using namespace kiln::rt;
using namespace kiln::rt::cuda;

namespace {
/// Resolves `name` (or, for entry points CUDA 12's header maps to a
/// versioned symbol, `name`_v2 first) into `slot`; false when absent.
template <typename Fn> bool resolve(void *library, const char *name, Fn &slot, bool v2 = false) {
  void *symbol = nullptr;
  if (v2)
    symbol = dlsym(library, (std::string(name) + "_v2").c_str());
  if (!symbol)
    symbol = dlsym(library, name);
  slot = reinterpret_cast<Fn>(symbol);
  return symbol != nullptr;
}

Api api;
// Set once the error-name entry points resolved: check() names errors.
std::atomic<bool> namesResolved{false};

StatusOr<const Api *> load() {
  // Only the driver's own library: CUDA's runtime and toolkit are not needed.
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return Status::unavailable(std::string("no CUDA driver (libcuda.so.1: ") + dlerror() + ")");
  if (resolve(library, "cuGetErrorName", api.getErrorName) &&
      resolve(library, "cuGetErrorString", api.getErrorString))
    namesResolved = true;
  bool ok = namesResolved && resolve(library, "cuInit", api.init) &&
            resolve(library, "cuDeviceGetCount", api.deviceGetCount) &&
            resolve(library, "cuDeviceGet", api.deviceGet) &&
            resolve(library, "cuDeviceGetUuid", api.deviceGetUuid, true) &&
            resolve(library, "cuDeviceGetAttribute", api.deviceGetAttribute) &&
            resolve(library, "cuDevicePrimaryCtxRetain", api.primaryCtxRetain) &&
            resolve(library, "cuDevicePrimaryCtxRelease", api.primaryCtxRelease, true) &&
            resolve(library, "cuCtxSetCurrent", api.ctxSetCurrent) &&
            resolve(library, "cuStreamCreate", api.streamCreate) &&
            resolve(library, "cuStreamDestroy", api.streamDestroy, true) &&
            resolve(library, "cuStreamSynchronize", api.streamSynchronize) &&
            resolve(library, "cuModuleLoadData", api.moduleLoadData) &&
            resolve(library, "cuModuleUnload", api.moduleUnload) &&
            resolve(library, "cuModuleGetFunction", api.moduleGetFunction) &&
            resolve(library, "cuFuncSetAttribute", api.funcSetAttribute) &&
            resolve(library, "cuLaunchKernel", api.launchKernel) &&
            resolve(library, "cuImportExternalMemory", api.importExternalMemory) &&
            resolve(library, "cuExternalMemoryGetMappedBuffer",
                    api.externalMemoryGetMappedBuffer) &&
            resolve(library, "cuDestroyExternalMemory", api.destroyExternalMemory) &&
            resolve(library, "cuMemFree", api.memFree, true);
  if (!ok)
    return Status::unavailable("the CUDA driver (libcuda.so.1) lacks an entry point Kiln needs "
                               "(CUDA 11.4 or newer): update the NVIDIA driver");
  if (Status status = check(api.init(0), "cuInit"); !status.isOk())
    return Status::unavailable("the CUDA driver does not start: " + status.message());
  return &api;
}
} // namespace

StatusOr<const Api *> cuda::driver() {
  static StatusOr<const Api *> loaded = load();
  return loaded;
}

Status cuda::check(Result result, const std::string &what) {
  if (result == 0)
    return Status::ok();
  std::string message = what + ": CUDA error " + std::to_string(result);
  // The names come from the driver itself, when it loaded far enough.
  const char *name = nullptr, *text = nullptr;
  if (namesResolved && api.getErrorName(result, &name) == 0 && name)
    message = what + ": " + name;
  if (namesResolved && api.getErrorString(result, &text) == 0 && text)
    message += std::string(" (") + text + ")";
  if (result == 2) // CUDA_ERROR_OUT_OF_MEMORY
    return Status::outOfMemory(message);
  return Status::internal(message);
}
