//===- CudaInterop.cpp - PTX kernels on a Vulkan device's memory ----------===//

#include "CudaInterop.h"

#include "VulkanUtil.h"

#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <unistd.h>

using namespace kiln::rt;

namespace {
/// The CUDA device whose UUID is the Vulkan adapter's, or -1.
int findDevice(const cuda::Api &api, const std::string &vulkanUuid) {
  int count = 0;
  if (api.deviceGetCount(&count) != 0)
    return -1;
  for (int i = 0; i < count; ++i) {
    cuda::DeviceId device = 0;
    cuda::Uuid uuid{};
    if (api.deviceGet(&device, i) == 0 && api.deviceGetUuid(&uuid, device) == 0 &&
        formatUuid(uuid.bytes) == vulkanUuid)
      return device;
  }
  return -1;
}

bool cudaTurnedOff() {
  const char *value = std::getenv("KILN_CUDA");
  return value && std::string(value) == "0";
}
} // namespace

bool kiln::rt::cudaDriverLoadable() {
  if (cudaTurnedOff())
    return false;
  // Loading the library is cheap (about 1 ms); starting the driver is not.
  static const bool loadable = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;
  return loadable;
}

CudaCapability kiln::rt::cudaCapability(const AdapterInfo &adapter) {
  if (!adapter.cudaCandidate)
    return {};
  static std::mutex mutex;
  static std::map<std::string, CudaCapability> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(adapter.uuid); it != known.end())
    return it->second;
  CudaCapability capability;
  StatusOr<const cuda::Api *> api = cuda::driver();
  int device = api.isOk() ? findDevice(**api, adapter.uuid) : -1;
  int major = 0, minor = 0, shared = 0;
  if (device >= 0 &&
      (*api)->deviceGetAttribute(&major, cuda::kAttrComputeCapabilityMajor, device) == 0 &&
      (*api)->deviceGetAttribute(&minor, cuda::kAttrComputeCapabilityMinor, device) == 0 &&
      (*api)->deviceGetAttribute(&shared, cuda::kAttrMaxSharedPerBlockOptin, device) == 0) {
    capability.arch = static_cast<uint32_t>(10 * major + minor);
    capability.sharedBytes = static_cast<uint32_t>(shared);
  }
  known[adapter.uuid] = capability;
  return capability;
}

StatusOr<std::shared_ptr<CudaInterop>> CudaInterop::create(const std::string &vulkanUuid,
                                                           VkDevice device, std::string label) {
  std::shared_ptr<CudaInterop> interop(new CudaInterop(vulkanUuid, std::move(label)));
  interop->device_ = device;
  interop->getMemoryFd_ =
      reinterpret_cast<PFN_vkGetMemoryFdKHR>(vkGetDeviceProcAddr(device, "vkGetMemoryFdKHR"));
  if (!interop->getMemoryFd_)
    return Status::unavailable(interop->label_ + " does not export memory (vkGetMemoryFdKHR)");
  return interop;
}

CudaInterop::~CudaInterop() {
  if (!context_)
    return;
  if (makeCurrent().isOk()) {
    if (stream_) {
      (void)api_->streamSynchronize(stream_);
      (void)api_->streamDestroy(stream_);
    }
    for (auto &[hash, loaded] : functions_)
      (void)api_->moduleUnload(loaded.first);
  }
  (void)api_->primaryCtxRelease(cudaDevice_);
}

Status CudaInterop::makeCurrent() {
  if (!api_) {
    StatusOr<const cuda::Api *> api = cuda::driver();
    if (!api.isOk())
      return api.status();
    int found = findDevice(**api, uuid_);
    if (found < 0)
      return Status::unavailable("CUDA lists no device with " + label_ + "'s UUID");
    cudaDevice_ = found;
    api_ = *api;
  }
  if (!context_) {
    if (Status s = cuda::check(api_->primaryCtxRetain(&context_, cudaDevice_),
                               "cuDevicePrimaryCtxRetain for " + label_);
        !s.isOk()) {
      context_ = nullptr;
      return s;
    }
  }
  if (Status s = cuda::check(api_->ctxSetCurrent(context_), "cuCtxSetCurrent on " + label_);
      !s.isOk())
    return s;
  // CU_STREAM_NON_BLOCKING: not ordered with the legacy default stream.
  if (!stream_)
    return cuda::check(api_->streamCreate(&stream_, 1), "cuStreamCreate on " + label_);
  return Status::ok();
}

StatusOr<cuda::Function> CudaInterop::function(const PtxCode &code) {
  if (auto it = functions_.find(code.hash); it != functions_.end())
    return it->second.second;
  if (Status s = makeCurrent(); !s.isOk())
    return s;
  cuda::Module module = nullptr;
  // The driver compiles the PTX for this GPU (its own JIT; no toolkit).
  if (Status s = cuda::check(api_->moduleLoadData(&module, code.source.c_str()),
                             "loading the PTX of kernel '" + code.entryPoint + "' on " + label_);
      !s.isOk())
    return s;
  cuda::Function function = nullptr;
  Status s = cuda::check(api_->moduleGetFunction(&function, module, code.entryPoint.c_str()),
                         "finding entry '" + code.entryPoint + "' in its PTX");
  // Over 48 KB of dynamic shared memory needs the kernel's opt-in.
  if (s.isOk() && code.sharedBytes > 48 * 1024)
    s = cuda::check(api_->funcSetAttribute(function, cuda::kFuncMaxDynamicSharedBytes,
                                          static_cast<int>(code.sharedBytes)),
                    "opting kernel '" + code.entryPoint + "' in to " +
                        std::to_string(code.sharedBytes) + " bytes of shared memory");
  if (!s.isOk()) {
    (void)api_->moduleUnload(module);
    return s;
  }
  functions_.emplace(code.hash, std::make_pair(module, function));
  return function;
}

StatusOr<cuda::DevicePtr> CudaInterop::map(VulkanBuffer &buffer) {
  Allocation &allocation = buffer.allocation();
  if (allocation.cudaMemory)
    return allocation.cudaAddress;
  VkMemoryGetFdInfoKHR info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR;
  info.memory = allocation.memory;
  info.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  int fd = -1;
  if (VkResult r = getMemoryFd_(device_, &info, &fd); r != VK_SUCCESS)
    return vkFailure(r, "exporting a buffer's memory on " + label_);
  cuda::ExternalMemoryHandleDesc desc{};
  desc.type = cuda::kExternalMemoryOpaqueFd;
  desc.handle.fd = fd;
  desc.size = allocation.memoryBytes;
  desc.flags = cuda::kExternalMemoryDedicated;
  cuda::ExternalMemory memory = nullptr;
  // CUDA owns the descriptor once the import succeeds.
  if (Status s = cuda::check(api_->importExternalMemory(&memory, &desc),
                             "importing a buffer of " + label_ + " into CUDA");
      !s.isOk()) {
    close(fd);
    return s;
  }
  cuda::ExternalMemoryBufferDesc whole{};
  whole.size = allocation.capacity;
  cuda::DevicePtr address = 0;
  if (Status s = cuda::check(api_->externalMemoryGetMappedBuffer(&address, memory, &whole),
                             "mapping an imported buffer of " + label_);
      !s.isOk()) {
    (void)api_->destroyExternalMemory(memory);
    return s;
  }
  allocation.cudaMemory = memory;
  allocation.cudaAddress = address;
  return address;
}

Status CudaInterop::launch(const PtxCode &code, cuda::Function function,
                           const std::vector<VulkanBuffer *> &buffers) {
  if (Status s = makeCurrent(); !s.isOk())
    return s;
  std::vector<uint64_t> pointers;
  for (VulkanBuffer *buffer : buffers) {
    StatusOr<cuda::DevicePtr> address = map(*buffer);
    if (!address.isOk())
      return address.status();
    pointers.push_back(*address);
  }
  std::vector<uint32_t> scalars = code.scalars;
  std::vector<void *> params;
  for (uint64_t &pointer : pointers)
    params.push_back(&pointer);
  for (uint32_t &scalar : scalars)
    params.push_back(&scalar);
  const auto &g = code.grid, &b = code.block;
  if (Status s = cuda::check(api_->launchKernel(function, g[0], g[1], g[2], b[0], b[1], b[2],
                                               code.sharedBytes, stream_, params.data(), nullptr),
                             "launching kernel '" + code.entryPoint + "' on " + label_);
      !s.isOk())
    return s;
  pending_ = true;
  return Status::ok();
}

Status CudaInterop::synchronize() {
  if (!pending_)
    return Status::ok();
  pending_ = false;
  if (Status s = makeCurrent(); !s.isOk())
    return s;
  return cuda::check(api_->streamSynchronize(stream_), "running CUDA kernels on " + label_);
}

void CudaInterop::release(const Allocation &allocation) {
  std::lock_guard<std::mutex> lock(releaseMutex_);
  // Imported, so the context was made.
  if (!allocation.cudaMemory || !makeCurrent().isOk())
    return;
  // A launch still queued may read it.
  (void)api_->streamSynchronize(stream_);
  (void)api_->memFree(allocation.cudaAddress);
  (void)api_->destroyExternalMemory(static_cast<cuda::ExternalMemory>(allocation.cudaMemory));
}
