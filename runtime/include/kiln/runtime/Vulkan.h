//===- Vulkan.h - Vulkan devices of the Kiln runtime ------------*- C++ -*-===//
//
// VulkanContext owns the VkInstance and the logical devices made from its
// physical adapters; VulkanDevice runs compute pipelines on one of them.
// This header does not include <vulkan/vulkan.h>: Vulkan state lives in
// private structs defined in runtime/lib.
//
// Ownership: the process-wide context (get()) lives until exit; contexts from
// create() are owned by the caller and must outlive their devices' buffers.
// A context owns its devices; a device owns its pipelines, buffer pool,
// staging memory, descriptor pools and its one command buffer.
//
// Threading: context creation and device() are thread-safe. A device
// serializes its calls with its own mutex, so two devices never contend.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_VULKAN_H
#define KILN_RUNTIME_VULKAN_H

#include "kiln/runtime/Device.h"
#include "kiln/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {

/// What Kiln needs to know about a physical adapter (codegen targets its
/// limits; caches key on its ids).
struct AdapterInfo {
  std::string name;
  uint32_t vendorId = 0;
  uint32_t deviceId = 0;
  uint32_t driverVersion = 0;
  uint32_t apiVersion = 0;
  /// deviceUUID as 8-4-4-4-12 lowercase hex.
  std::string uuid;
  /// VkPhysicalDeviceProperties::pipelineCacheUUID: pipeline cache data is
  /// valid only for a driver with the same one.
  uint8_t pipelineCacheUUID[16] = {};
  enum class Type {
    Discrete,
    Integrated,
    Virtual,
    Cpu,
    Other
  } type = Type::Other;
  /// "discrete GPU", "integrated GPU", "virtual GPU", "CPU" or "other".
  std::string typeName() const;

  uint32_t maxWorkgroupCount[3] = {0, 0, 0};
  uint32_t maxWorkgroupSize[3] = {0, 0, 0};
  uint32_t maxWorkgroupInvocations = 0;
  uint32_t maxSharedMemoryBytes = 0;
  uint32_t subgroupSize = 0;
  /// Subgroup sizes a compute pipeline may require
  /// (VK_EXT_subgroup_size_control, core in Vulkan 1.3), and at most how
  /// many subgroups a workgroup may then hold; all 0 where the device
  /// cannot choose (it runs subgroupSize only).
  uint32_t minSubgroupSize = 0;
  uint32_t maxSubgroupSize = 0;
  uint32_t maxComputeWorkgroupSubgroups = 0;
  /// Shader features kernels may declare, as the device supports them.
  bool shaderFloat16 = false;
  bool storageBuffer16BitAccess = false;
  bool shaderInt64 = false;
  bool shaderInt16 = false;
  bool shaderInt8 = false;
  bool storageBuffer8BitAccess = false;
  uint64_t maxStorageBufferRange = 0;
  /// Storage buffers one kernel may bind (maxPerStageDescriptorStorageBuffers).
  uint32_t maxStorageBuffersPerStage = 0;
  /// Loop iterations a kernel invocation may run in all; 0: no known limit.
  uint64_t maxLoopIterations = 0;
  /// Streaming multiprocessors or compute units, where the driver reports
  /// them (VK_NV_shader_sm_builtins, VK_AMD_shader_core_properties); else 0.
  uint32_t computeUnits = 0;
  /// Nanoseconds per timestamp tick; 0 when compute queues cannot time.
  float timestampPeriod = 0;
  /// 16 x 16 x 16 f16 cooperative matrices with f32 accumulators
  /// (VK_KHR_cooperative_matrix, with the Vulkan memory model), enabled on
  /// the device: f16 matmuls then run on its tensor cores.
  bool cooperativeMatrixF16 = false;
  /// The same with bf16 operands (VK_KHR_shader_bfloat16), enabled on the
  /// device: bf16 matmuls run on its tensor cores too.
  bool cooperativeMatrixBF16 = false;
  /// Workgroup-scope f16 cooperative matrices of flexible dimensions
  /// (VK_NV_cooperative_matrix2), enabled on the device where offered: the
  /// invocations of the workgroups that use them, the granularity of their
  /// rows, columns and depth, the largest dimension; all 0 where not offered.
  uint32_t workgroupMatrixInvocations = 0;
  uint32_t workgroupMatrixGranularity[3] = {0, 0, 0};
  uint32_t workgroupMatrixMaxDimension = 0;
  /// Shared memory the driver keeps for those matrices' staging.
  uint32_t workgroupMatrixReservedShared = 0;
  /// Their loads may go through tensor layouts (SPV_NV_tensor_addressing).
  bool workgroupMatrixTensorAddressing = false;
  /// An NVIDIA GPU that exports memory (VK_KHR_external_memory_fd) in a
  /// process that can load CUDA's driver (libcuda.so.1; KILN_CUDA=0 says
  /// not to): CUDA may run it too (cudaCapability() says), so its buffers
  /// are allocated for CUDA to import.
  bool cudaCandidate = false;
  /// The physical devices in this adapter's device group
  /// (vkEnumeratePhysicalDeviceGroups, Vulkan 1.1): more than one where the
  /// driver links GPUs so one VkDevice spans them (peer memory); 1 else.
  uint32_t deviceGroupSize = 1;
  /// Where the adapter sits on the PCI bus (VK_EXT_pci_bus_info), as
  /// nvidia-smi and lspci print it: "0000:06:00.0"; empty where the driver
  /// does not say (lavapipe).
  std::string pciAddress;
};

/// The order Kiln numbers adapters in (vulkan:0, vulkan:1, ...), as indices
/// into `adapters` (the loader's order): discrete GPUs first, then
/// integrated, virtual, other and CPU adapters; within a kind, by PCI
/// address where every adapter of it has one (nvidia-smi's order, and
/// CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID), else in the loader's order.
/// The same machine numbers its GPUs the same way in every process, however
/// its Vulkan drivers are listed.
std::vector<size_t> adapterOrder(const std::vector<AdapterInfo> &adapters);

struct ContextOptions {
  /// Logical devices per adapter, each with its own VkDevice (as XLA's forced
  /// host device count); KILN_VIRTUAL_DEVICES, 1 to 64.
  size_t virtualDevices = 1;
  /// Enable VK_LAYER_KHRONOS_validation, with synchronization validation,
  /// when installed (else one warning); KILN_VULKAN_VALIDATION=1. Messages
  /// go to stderr as "kiln: vulkan validation: ..." and are counted.
  bool validation = false;

  /// Reads the variables above; a malformed value is an InvalidArgument
  /// naming the variable.
  static StatusOr<ContextOptions> fromEnvironment();
};

class VulkanDevice;

class VulkanContext {
public:
  /// The process-wide context, created on first call from the environment
  /// (thread-safe). The outcome, error included, is kept for the process.
  static StatusOr<VulkanContext *> get();
  /// A fresh context, independent of get()'s (for tests and embedders).
  static StatusOr<std::unique_ptr<VulkanContext>>
  create(const ContextOptions &options);

  ~VulkanContext();
  VulkanContext(const VulkanContext &) = delete;
  VulkanContext &operator=(const VulkanContext &) = delete;

  const std::vector<AdapterInfo> &adapters() const;
  /// Logical devices: adapters().size() * virtualDevices. Ordinal i is
  /// virtual device i % N of adapter i / N.
  size_t numDevices() const;
  size_t virtualDevicesPerAdapter() const;
  /// `ordinal` must be below numDevices().
  const AdapterInfo &adapterOf(size_t ordinal) const;
  /// Created on first use; an ordinal out of range is NotFound, listing the
  /// devices that exist.
  StatusOr<VulkanDevice *> device(size_t ordinal);
  /// The devices created so far (none is created here).
  std::vector<VulkanDevice *> createdDevices();
  /// The first discrete GPU, else the first integrated one, else ordinal 0.
  size_t preferredOrdinal() const;

  bool validationEnabled() const;
  /// Validation warnings and errors reported since the context was created.
  uint64_t validationMessages() const;
  /// The same over every context of the process, including destroyed ones
  /// (whose teardown may report leaks after their own counter is gone).
  static uint64_t validationMessagesInProcess();

  struct State;

private:
  explicit VulkanContext(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

/// A compute kernel as SPIR-V. Bindings are storage buffers at descriptor
/// set 0, bindings 0..numBindings-1. `hash` identifies the kernel in the
/// device's pipeline cache; `spirv` need only live during pipeline().
struct SpirvCode;

struct KernelBinary {
  uint64_t hash = 0;
  const std::vector<uint32_t> *spirv = nullptr;
  std::string entryPoint = "main";
  uint32_t numBindings = 0;
  /// The subgroup size it must run with; 0: any (SpirvCode::subgroupSize).
  uint32_t subgroupSize = 0;
  /// Where it comes from a Program: checked against the device
  /// (checkAssumptions) when its pipeline is made.
  const SpirvCode *code = nullptr;
};

/// Whether `adapter` runs `code` as it was compiled: its subgroup size (the
/// device's own, or one it can be asked for), workgroup size and memory,
/// and the features its module declares. The error names the kernel's
/// assumption, its value and the device's.
Status checkAssumptions(const SpirvCode &code, const AdapterInfo &adapter,
                        const std::string &kernelName);
/// The subgroup size a pipeline for a kernel compiled for `subgroupSize`
/// (0: none) is created with on `adapter`, or 0 for the device's own: a
/// size other than the device's own where the device can be asked for it
/// (with `invocations` per workgroup), and the kernel's own size where a
/// SPIR-V 1.6 module would otherwise let the driver vary it.
uint32_t pinnedSubgroupSize(uint32_t subgroupSize, uint64_t invocations, bool mayVary,
                            const AdapterInfo &adapter);
/// The same for a kernel of a Program.
uint32_t pinnedSubgroupSize(const SpirvCode &code, const AdapterInfo &adapter);

/// Opaque: shader module, descriptor set layout, pipeline layout, pipeline.
/// Owned by its device; valid until the device is destroyed.
class Pipeline;

/// Dispatches recorded once into a command buffer of their own, with their
/// descriptor sets written once, and replayed by one submit per run (as CUDA
/// graphs are). Its buffers are fixed: the caller keeps them alive as long
/// as the recording and moves data in and out around replays. Holds its
/// pipelines (a released pipeline lives on while a recording uses it). Must
/// be destroyed before its device.
class Recording;
struct SpirvCode;

struct RecordedDispatch {
  Pipeline *pipeline = nullptr;
  std::vector<Buffer *> bindings; ///< binding i, on this device
  uint32_t groups[3] = {1, 1, 1};
};

struct BufferCopy {
  Buffer *src = nullptr;
  Buffer *dst = nullptr;
  size_t bytes = 0;
};

class VulkanDevice final : public Device {
public:
  ~VulkanDevice() override;

  const std::string &name() const override;
  const std::string &api() const override;
  std::string adapterName() const override;
  std::string adapterUuid() const override;
  StatusOr<std::shared_ptr<Buffer>> allocate(size_t bytes) override;
  Status upload(Buffer &dst, const void *src, size_t bytes) override;
  Status download(Buffer &src, void *dst, size_t bytes) override;
  Status flush() override;
  DeviceStats stats() const override;
  void resetStats() override;
  /// The kernel's pipeline (created, or from the device's cache).
  StatusOr<std::shared_ptr<Executable>> prepare(const ProgramKernel &kernel) override;
  Status checkKernel(const ProgramKernel &kernel) override;
  /// Binds the arguments in the SPIR-V's binding order and records the
  /// dispatch of the kernel's workgroups.
  Status dispatch(Executable &executable, const std::vector<Buffer *> &arguments) override;
  VulkanDevice *replayDevice() override { return this; }
  /// Whether `kernel` runs here as PTX launched through CUDA (it has PTX
  /// for this GPU's architecture and CUDA runs this device).
  bool launchesPtx(const ProgramKernel &kernel) const;

  const AdapterInfo &adapter() const;
  size_t ordinal() const;
  /// The VkDevice, for interop and tests.
  void *vkDevice() const;

  /// Cached by `kernel.hash`: a hit counts pipelineCacheHits, a creation
  /// pipelinesCreated. Malformed SPIR-V is an error, never a crash.
  StatusOr<Pipeline *> pipeline(const KernelBinary &kernel);
  /// The pipeline of a Program kernel's SPIR-V (as pipeline(KernelBinary)).
  StatusOr<Pipeline *> pipeline(const SpirvCode &code);
  /// Whether pipelines capture the driver's statistics (asked for by
  /// KILN_PIPELINE_STATISTICS=1 and offered by the driver:
  /// PipelineStatistics.h).
  bool capturesPipelineStatistics() const;
  /// Destroys the pipeline built from kernel `hash` (if there is one) once
  /// the work recorded so far has finished: a bounded kernel cache evicts
  /// through this. A later pipeline() with the hash creates it again.
  Status releasePipeline(uint64_t hash);
  /// Pipelines held now.
  size_t pipelineCount() const;
  /// Writes the driver's pipeline cache to the process's store when
  /// pipelines were created since the last save (also done when the device
  /// is destroyed), so the next process creates them from the cache.
  void savePipelineCache();
  /// Records a dispatch into the current command buffer (started lazily),
  /// ordered after all earlier work on this device by memory barriers.
  /// `bindings[i]` is bound at binding i and must belong to this device.
  Status dispatch(Pipeline *pipeline, const std::vector<Buffer *> &bindings,
                  uint32_t groupsX, uint32_t groupsY, uint32_t groupsZ);
  /// Records a copy of the first `bytes` of `src` into `dst` (same device).
  Status copy(Buffer &src, Buffer &dst, size_t bytes);
  /// Copies `bytes` of `src` (this device's) into `dst` on `target`, another
  /// Vulkan device: another adapter, or another logical device of this one.
  /// Where both import host memory (VK_EXT_external_memory_host) the copy
  /// goes in chunks through host memory both see, this device's copy engine
  /// writing one chunk while the target's reads the one before, and the host
  /// copies nothing; otherwise through each device's staging memory (a
  /// download, then an upload). Waits for earlier work on both first, and
  /// for the copy.
  Status copyToDevice(Buffer &src, VulkanDevice &target, Buffer &dst, size_t bytes);
  /// Whether copyToDevice can take the shared host memory path from or to
  /// this device.
  bool importsHostMemory() const;

  /// Records `dispatches`, each ordered after the one before, into a new
  /// Recording. Checked as dispatch() checks them; nothing runs.
  /// With `timed`, each dispatch is bracketed by timestamps (the adapter
  /// must have a timestampPeriod) and replay() can report its GPU time.
  StatusOr<std::shared_ptr<Recording>> record(const std::vector<RecordedDispatch> &dispatches,
                                              bool timed = false);
  /// Submits the work recorded so far on this device (uploads, copies into
  /// the recording's buffers), then the recording, then `after` (copies out
  /// of its buffers), as one submit, and waits for it: one submit and one
  /// fence per run, whatever the number of dispatches. Replays are
  /// serialized by the device.
  /// `nanoseconds`, for a timed recording, receives each dispatch's GPU time.
  Status replay(Recording &recording, const std::vector<BufferCopy> &after = {},
                std::vector<double> *nanoseconds = nullptr);

  struct State;

private:
  friend class VulkanContext;
  explicit VulkanDevice(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

/// What CUDA's driver says of a candidate adapter's GPU (the CUDA device
/// with its UUID): compute capability as 10 * major + minor, and the
/// dynamic shared memory a CTA may opt in to; zeros where CUDA does not run
/// it. Asked once per adapter, on first use (starting CUDA's driver takes
/// about 0.2 s on the H200: only a kernel that could use it asks). A device
/// of arch 90 launches its kernels' PTX (Program.h, PtxCode) through CUDA.
struct CudaCapability {
  uint32_t arch = 0;
  uint32_t sharedBytes = 0;
};
CudaCapability cudaCapability(const AdapterInfo &adapter);

/// "VK_ERROR_OUT_OF_DEVICE_MEMORY" for a VkResult value.
std::string vkResultName(int result);

/// Whether SPIR-V `words` declare the CooperativeMatrixKHR capability: the
/// kernel runs only where AdapterInfo::cooperativeMatrixF16 holds.
bool spirvUsesCooperativeMatrix(const std::vector<uint32_t> &words);
/// Whether they declare BFloat16CooperativeMatrixKHR: the kernel runs only
/// where AdapterInfo::cooperativeMatrixBF16 holds.
bool spirvUsesBF16CooperativeMatrix(const std::vector<uint32_t> &words);

} // namespace kiln::rt

#endif // KILN_RUNTIME_VULKAN_H
