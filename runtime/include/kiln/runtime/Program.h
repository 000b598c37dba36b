//===- Program.h - a compiled graph, as data ---------------------*- C++ -*-===//
//
// A Program is what the compiler makes of a graph and what a runtime runs:
// its input and output signature, the values and the buffer plan that
// reuses intermediates by liveness, the steps (an input placed on a device,
// a constant filled, a transfer, a kernel dispatch), the constants, and per
// kernel everything a device needs to run it (SPIR-V words, binding order
// and grid; CPU machine code). It holds no compiler state: the JIT builds
// one per graph and runs it; the same data is what a .kiln file stores.
//
// Ownership: a Program owns its constants and kernel code (a CPU kernel
// keeps the JIT engine that made it alive through `owner`). run() borrows
// the devices it is given and returns buffers the caller owns.
//
// Threading: a Program is immutable after it is built; run() may be called
// from several threads at once (each run has its own buffers; devices
// serialize their own calls).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PROGRAM_H
#define KILN_RUNTIME_PROGRAM_H

#include "kiln/runtime/Cpu.h"
#include "kiln/runtime/CpuLibrary.h"
#include "kiln/runtime/Device.h"
#include "kiln/runtime/Status.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::rt {

/// bf16: bfloat16, the upper half of an f32 (stored in .npy files as
/// uint16 bit patterns, '<u2').
enum class ElementType : uint8_t { f32, f16, i32, i1, bf16 };

/// Bytes per element as stored (i1 as one byte).
size_t elementBytes(ElementType type);
/// "f32", "f16", "i32", "bool", "bf16".
const char *elementTypeName(ElementType type);

/// A tensor as the program sees it.
struct TensorType {
  std::vector<int64_t> shape;
  ElementType element = ElementType::f32;
  uint64_t bytes() const;
  /// "[2, 3] f32".
  std::string str() const;
};

/// One kernel's code for a Vulkan device.
struct SpirvCode {
  uint64_t hash = 0;
  std::vector<uint32_t> words;
  std::string entryPoint;
  /// Binding i is the kernel's argument bindingOrder[i] (arguments are the
  /// dispatch step's operands, then its results).
  std::vector<uint32_t> bindingOrder;
  std::array<uint32_t, 3> groups = {1, 1, 1};
  /// The subgroup size its subgroup operations or cooperative matrices
  /// were compiled for; 0 where the result does not depend on it. A device
  /// runs it only with that size (pinned where it can choose, else refused).
  uint32_t subgroupSize = 0;
  /// Its workgroup size and workgroup memory, as its module declares them.
  std::array<uint32_t, 3> workgroupSize = {1, 1, 1};
  uint32_t sharedBytes = 0;
};

/// One kernel as Metal Shading Language (made from its SPIR-V by
/// SPIRV-Cross): a Metal runtime compiles `source`, binds the kernel's
/// argument bindingOrder[i] at [[buffer(i)]], and dispatches `groups`
/// threadgroups of `threadgroup` threads. No runtime here runs it (Metal
/// exists only on Apple systems).
struct MslCode {
  std::string source;
  std::string entryPoint;
  std::vector<uint32_t> bindingOrder;
  std::array<uint32_t, 3> threadgroup = {1, 1, 1};
  std::array<uint32_t, 3> groups = {1, 1, 1};
};

/// One kernel as PTX for a GPU CUDA's driver also runs (compute capability
/// `arch`, 90 for sm_90a), beside its SPIR-V: a Vulkan device on such a GPU
/// launches it through CUDA on its own buffers, others run the SPIR-V. The
/// driver compiles the PTX when the kernel is prepared.
struct PtxCode {
  uint64_t hash = 0;
  std::string source;
  std::string entryPoint;
  uint32_t arch = 0;
  /// Its parameters: a pointer to the kernel's argument bindingOrder[i]
  /// (operands, then results) for each i, then `scalars` as u32.
  std::vector<uint32_t> bindingOrder;
  std::vector<uint32_t> scalars;
  /// The bytes the kernel reads or writes through each pointer, at least:
  /// a dispatch with a smaller buffer is refused, not run out of bounds.
  std::vector<uint64_t> minBytes;
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  /// Dynamic shared memory per CTA.
  uint32_t sharedBytes = 0;
  /// How it was configured, for profiles: "wgmma 128x256x32 s6 wg2".
  std::string config;
};

/// One kernel's machine code for the CPU device.
struct CpuCode {
  CpuKernelFn fn = nullptr;
  /// Keeps `fn` alive (the JIT engine, or the CpuLibrary, that made it).
  std::shared_ptr<const void> owner;
  /// Its name in Program::cpuLibrary; empty for JIT code (which a .kiln file
  /// cannot hold).
  std::string symbol;
  /// The threads split the outer loop; each of its iterations computes
  /// innerIterations elements.
  int64_t outerIterations = 0;
  int64_t innerIterations = 1;
};

struct ProgramKernel {
  std::string name; // for messages: "kernel 3 (vulkan:0)"
  std::string summary; // its ops and result: "matmul+add+gelu -> [128, 2048] f32"
  /// For profiles (KernelCost): its form ("conv", "matmul", "reduction",
  /// "elementwise"), its ops by source line, the FLOPs it computes and the
  /// bytes it reads and writes at least.
  std::string kind;
  std::string sources;
  uint64_t flops = 0;
  uint64_t bytes = 0;
  /// Exactly one is set, the one for the device the kernel runs on.
  std::shared_ptr<const SpirvCode> spirv;
  std::shared_ptr<const CpuCode> cpu;
  std::shared_ptr<const MslCode> msl;
  /// Beside `spirv`, where the compiler targeted a GPU CUDA runs: what a
  /// Vulkan device there launches instead.
  std::shared_ptr<const PtxCode> ptx;
  /// Elements in its first result: a kernel with none is not dispatched.
  int64_t elements = 0;
};

struct ProgramStep {
  enum class Kind : uint8_t {
    input,    ///< signature input `index`, placed on `device`
    constant, ///< constants[index] repeated over the result
    transfer, ///< value operands[0] copied to `device`
    dispatch, ///< kernels[index] on `device`: operands, then results
  };
  Kind kind = Kind::dispatch;
  uint32_t device = 0; ///< index into Program::devices
  uint32_t index = 0;
  std::vector<uint32_t> operands;
  std::vector<uint32_t> results;
};

struct ProgramValue {
  TensorType type;
  uint32_t device = 0;
  /// The buffer-plan slot holding it; kNoSlot for inputs (the caller's
  /// buffers) and outputs (new buffers the caller gets).
  uint32_t slot = kNoSlot;
  static constexpr uint32_t kNoSlot = UINT32_MAX;
};

struct ProgramSlot {
  uint32_t device = 0;
  uint64_t bytes = 0;
};

struct Program {
  /// Device names the steps refer to by index: "vulkan:0", "cpu:0".
  std::vector<std::string> devices;
  std::vector<TensorType> inputs;
  std::vector<uint32_t> outputs; ///< values returned, in order
  std::vector<ProgramValue> values;
  std::vector<ProgramStep> steps;
  /// One element's bytes, repeated over the value (Kiln's constants are
  /// splats).
  std::vector<std::vector<uint8_t>> constants;
  std::vector<ProgramKernel> kernels;
  /// The shared object every ahead-of-time CPU kernel is a symbol of.
  std::shared_ptr<const CpuLibrary> cpuLibrary;
  /// Intermediates share these buffers (planBuffers()).
  std::vector<ProgramSlot> slots;
  /// The most bytes of intermediates alive at once, and what they would
  /// take without reuse.
  uint64_t peakBytes = 0, unplannedBytes = 0;

  /// Assigns slots to intermediates by liveness: a value's slot is free for
  /// a later value on the same device after its last use. Sets slots,
  /// peakBytes and unplannedBytes.
  void planBuffers();

  /// A readable listing (steps, values, slots): for tests and tools.
  std::string describe() const;
};

/// One input of a run: a buffer on some device, or host bytes (the exact
/// stored form: TensorType::bytes() of them).
struct ProgramInput {
  std::shared_ptr<Buffer> buffer;
  const void *host = nullptr;
  /// The same bytes already on other devices (a weight read on both
  /// devices of a split model): a step on one of them reads its copy
  /// instead of copying `buffer` there.
  std::vector<std::shared_ptr<Buffer>> elsewhere;
};

struct RunOptions {
  /// Fill every kernel result with 0xFF bytes (NaN) before the kernel runs,
  /// so an element a kernel forgets to write cannot pass a test by luck.
  bool poisonResults = false;
  /// Replaces Program::constants for this run (same count and sizes): a
  /// reused Program reads the values of the graph it runs for.
  const std::vector<std::vector<uint8_t>> *constants = nullptr;
  /// How buffers are allocated (the JIT's raises its typed errors); unset:
  /// Device::allocate, its failure returned as the run's status.
  std::function<StatusOr<std::shared_ptr<Buffer>>(Device &, size_t bytes, const char *what)>
      allocate;
  /// When set, each dispatch runs alone (its device flushed before and
  /// after) and its host-clock time is appended here, in program order:
  /// the profiler's interpreted mode (Profile.h).
  std::vector<double> *dispatchNanoseconds = nullptr;
};

struct RunCounters {
  uint64_t dispatches = 0;
  uint64_t transfers = 0;
  uint64_t bytesUploaded = 0;
  uint64_t bytesMoved = 0;
};

struct RunResult {
  std::vector<std::shared_ptr<Buffer>> outputs;
  /// Per input, the buffer it was uploaded to when it came as host bytes
  /// (on the first device that used it), else null: the JIT keeps it so a
  /// later graph does not upload it again.
  std::vector<std::shared_ptr<Buffer>> uploaded;
  RunCounters counters;
};

/// Runs `program` with `devices[i]` standing for program.devices[i]; waits
/// until the outputs are computed. Errors (a device out of memory, a bad
/// input) leave the inputs untouched.
StatusOr<RunResult> run(const Program &program, const std::vector<Device *> &devices,
                        const std::vector<ProgramInput> &inputs, const RunOptions &options = {});

/// A maximal run of consecutive steps on one device: where a program split
/// across devices (pipeline parallel) hands over from one to the next.
struct ProgramStage {
  uint32_t device = 0; ///< index into Program::devices
  size_t begin = 0, end = 0; ///< steps [begin, end)
};
std::vector<ProgramStage> programStages(const Program &program);

/// Runs `program` once per entry of `batches` (micro-batches), pipelined
/// across its stages: one thread per device, each running its stages batch
/// after batch and submitting each stage as it ends, so while a later
/// stage's device works on batch b an earlier one's works on batch b + 1.
/// A stage starts once the stage before it in its batch has run. Results
/// per batch, each as run() gives it; the first error stops every worker.
/// A program on one device gains nothing (its batches run in order).
StatusOr<std::vector<RunResult>>
runPipelined(const Program &program, const std::vector<Device *> &devices,
             const std::vector<std::vector<ProgramInput>> &batches,
             const RunOptions &options = {});

class VulkanDevice;
class Recording;

/// A Program bound to one Vulkan device and replayed: every value gets a
/// buffer of its own device memory for the life of the replay (the buffer
/// plan's slots shared as planned), constants are filled once, and all
/// dispatches are recorded once into one command buffer
/// (VulkanDevice::record). A run uploads or copies the inputs into place,
/// then replays the dispatches and copies the outputs into new buffers, in
/// one submit with one fence: its host cost does not grow with the number
/// of kernels.
///
/// Threading: runs are serialized (they share the buffers).
class ProgramReplay {
public:
  /// Null, without an error, when `program` cannot be replayed on `device`
  /// (steps on several devices, a kernel without SPIR-V, a kernel the
  /// device launches as PTX through CUDA). `fixed[i]`, when
  /// set, is program input i for every run (a weight already on `device`);
  /// run() ignores what it is passed for that input.
  /// `timed`: every dispatch is timed on the GPU (kernelNanoseconds()).
  /// `options.constants`, when set, are the values filled in once.
  static StatusOr<std::unique_ptr<ProgramReplay>>
  create(const Program &program, VulkanDevice &device,
         const std::vector<std::shared_ptr<Buffer>> &fixed, const RunOptions &options = {},
         bool timed = false);
  ~ProgramReplay();

  /// As rt::run; `options.allocate` allocates the outputs; poisonResults and
  /// constants are not supported (an error).
  StatusOr<RunResult> run(const std::vector<ProgramInput> &inputs, const RunOptions &options = {});

  /// For a timed replay: per dispatch step with work, in program order, its
  /// kernel index and GPU time in the last run.
  std::vector<std::pair<uint32_t, double>> kernelNanoseconds() const;

private:
  ProgramReplay(const Program &program, VulkanDevice &device)
      : program_(program), device_(device) {}
  const Program &program_;
  VulkanDevice &device_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<Buffer>> values_;      // per program value
  std::vector<std::shared_ptr<Buffer>> inputs_;      // per program input: where runs put it
  std::vector<bool> fixed_;                          // per program input
  std::vector<std::shared_ptr<Buffer>> owned_;       // slots, constants, inputs, results
  std::shared_ptr<Recording> recording_;
  uint64_t dispatches_ = 0;
  bool timed_ = false;
  std::vector<uint32_t> dispatchKernels_; // kernel index per recorded dispatch
  std::vector<double> nanoseconds_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_PROGRAM_H
