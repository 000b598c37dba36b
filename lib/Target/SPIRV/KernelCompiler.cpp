//===- KernelCompiler.cpp - kiln.kernel to validated SPIR-V ---------------===//
//
// Each kernel is lowered on its own module, keyed by the text of its linalg
// function plus the device limits that shape the code: the same fused chain
// on the same shapes compiles once per process.
//
//===----------------------------------------------------------------------===//

#include "lib/Target/SPIRV/KernelCompiler.h"

#include "lib/Compiler/RuntimeDevices.h"
#include "lib/Compiler/KernelStore.h"
#include "lib/Compiler/Tuning.h"

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/Codegen/KernelToLinalg.h"
#include "kiln/Codegen/Pipelines.h"
#include "kiln/Codegen/SpirvKernel.h"
#include "kiln/Codegen/WgmmaGemm.h"
#include "kiln/Compiler/Target.h"
#include "kiln/Errors.h"
#include "kiln/runtime/Vulkan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringExtras.h"

#include "spirv-tools/libspirv.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>

using namespace mlir;
using namespace kiln;

std::string kiln::validateSPIRV(const std::vector<uint32_t> &words) {
  // Debian 12's SPIRV-Tools (2023.1) rejects every cooperative-matrix module
  // ("Invalid capability operand: 6022"): those are checked by running them
  // on a GPU that has the extension (bench/RESULTS.md), not here.
  if (rt::spirvUsesCooperativeMatrix(words))
    return "";
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_1);
  std::string messages;
  tools.SetMessageConsumer([&](spv_message_level_t, const char *,
                               const spv_position_t &, const char *message) {
    messages += std::string(message) + "\n";
  });
  if (!tools.Validate(words) && messages.empty())
    messages = "invalid SPIR-V";
  return messages;
}

KernelModule kiln::buildKernelModule(KernelOp kernel, KernelLayout layout,
                                     const DeviceLimits *gpu) {
  KernelModule result;
  result.module = ModuleOp::create(kernel.getLoc());
  OpBuilder builder = OpBuilder::atBlockEnd(result.module->getBody());
  std::string diagnostics;
  ScopedDiagnosticHandler handler(kernel.getContext(), [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });
  FailureOr<func::FuncOp> fn =
      buildKernelFunction(kernel, builder, "kiln_kernel", layout, gpu);
  if (failed(fn))
    throw CompileError("kernel lowering failed: " + diagnostics);
  result.fn = *fn;
  result.iterations = (*fn)->getAttrOfType<IntegerAttr>("kiln.iteration_size").getInt();
  result.outerIterations = (*fn)->getAttrOfType<IntegerAttr>("kiln.outer_size").getInt();
  llvm::raw_string_ostream os(result.text);
  result.fn.print(os);
  return result;
}

/// KILN_DUMP_SPIRV=<dir>: each compiled kernel as <hash>.spv plus a
/// manifest <hash>.kernel that bench/spirv_replay.cpp (runtime only) runs on
/// machines without MLIR (a GPU host with only the Vulkan loader); and its
/// kernel module (<hash>.mlir, with its #kiln.target) and pass pipeline
/// (<hash>.pipeline),
/// from which kiln-opt makes the same SPIR-V again.
static void dumpKernel(const CompilerOptions &options, const CompiledKernel &kernel,
                       const std::vector<uint64_t> &bindingBytes, const std::string &module,
                       const std::string &pipeline) {
  std::string base = options.dumpSpirvDir + "/" + llvm::utohexstr(kernel.hash);
  std::ofstream spv(base + ".spv", std::ios::binary);
  spv.write(reinterpret_cast<const char *>(kernel.spirv.data()),
            static_cast<std::streamsize>(kernel.spirv.size() * 4));
  std::ofstream manifest(base + ".kernel");
  manifest << "spirv " << llvm::utohexstr(kernel.hash) << ".spv\nentry " << kernel.entryPoint
           << "\ngroups " << kernel.groups[0] << " " << kernel.groups[1] << " "
           << kernel.groups[2] << "\nbindings";
  for (uint64_t bytes : bindingBytes)
    manifest << " " << bytes;
  manifest << "\n";
  // KILN_DUMP_LABEL="<name> <work> <unit>": what the replay reports a rate
  // of (a benchmark sets it around its first realize).
  if (!options.dumpLabel.empty())
    manifest << "label " << options.dumpLabel << "\n";
  std::ofstream(base + ".mlir") << module;
  std::ofstream(base + ".pipeline") << pipeline << "\n";
  if (!spv || !manifest)
    llvm::errs() << "kiln: KILN_DUMP_SPIRV: cannot write to " << options.dumpSpirvDir << "\n";
}

Target kiln::gpuTargetOf(const rt::AdapterInfo &adapter, const CompilerOptions &options) {
  std::string error;
  FailureOr<Target> target =
      describeTarget(TargetApi::vulkan, adapter, options.gpuTargetEdits, error);
  if (failed(target))
    throw Error("KILN_GPU_LIMITS: " + error);
  return *target;
}

namespace {
/// Drops the pipelines built from an evicted kernel on every Vulkan device.
void releasePipelines(uint64_t hash) {
  rt::StatusOr<rt::VulkanContext *> context = rt::VulkanContext::get();
  if (!context.isOk())
    return;
  for (rt::VulkanDevice *device : (*context)->createdDevices())
    check(device->releasePipeline(hash), "releasing an evicted kernel's pipeline");
}
} // namespace

void kiln::trimKernelCaches(Session &session) {
  uint64_t budget = session.options.kernelCacheBytes;
  while (session.kernels.bytes() + session.cpuKernels.bytes() > budget &&
         session.kernels.size() + session.cpuKernels.size() > 1) {
    if (session.kernels.oldestUse() < session.cpuKernels.oldestUse())
      session.kernels.evictOldest(
          [](CompiledKernel &evicted) { releasePipelines(evicted.hash); });
    else
      session.cpuKernels.evictOldest(nullptr);
  }
}

/// Puts `compiled` in the session's cache, charged the SPIR-V and the key
/// plus an estimate of a driver's pipeline per device (evicting drops those
/// pipelines too). A CPU implementation (lavapipe) holds the JIT's machine
/// code and LLVM state per pipeline: about 180 KiB each, measured
/// (kiln-bench-graphs, BM_ManyShapes).
static const CompiledKernel &keepKernel(Session &session, const std::string &key,
                                        CompiledKernel compiled,
                                        const rt::AdapterInfo &adapter) {
  uint64_t pipeline = adapter.type == rt::AdapterInfo::Type::Cpu ? (192 << 10) : (64 << 10);
  uint64_t bytes = compiled.spirv.size() * 4 + 2 * key.size() + pipeline;
  CompiledKernel &kept = session.kernels.insert(key, std::move(compiled), bytes);
  trimKernelCaches(session);
  return kept;
}

/// PTX on warpgroup MMA for `shape`, a plain f16 GEMM that takes the
/// cooperative-matrix form, where CUDA runs the GPU at sm_90 (WgmmaGemm.h);
/// null else. Cheap (text), so it is made again rather than kept in the store.
static std::shared_ptr<const rt::PtxCode>
wgmmaPtxFor(const std::optional<WgmmaGemmShape> &shape, const DeviceLimits &limits,
            uint64_t hash) {
  if (limits.ptxArch != 90 || !shape)
    return nullptr;
  std::optional<WgmmaGemmConfig> chosen = chooseWgmmaGemm(*shape, limits.ptxSharedBytes);
  if (!chosen)
    return nullptr;
  auto code = std::make_shared<rt::PtxCode>();
  code->hash = hash;
  code->entryPoint = "kiln_wgmma_gemm";
  code->source = emitWgmmaGemmPtx(*chosen, *shape, code->entryPoint);
  code->arch = 90;
  code->bindingOrder = {0, 1, 2}; // A and B (the kernel's operands), then C
  code->scalars = {static_cast<uint32_t>(shape->m), static_cast<uint32_t>(shape->n),
                   static_cast<uint32_t>(shape->k)};
  code->minBytes = {uint64_t(shape->m * shape->k * 2), uint64_t(shape->k * shape->n * 2),
                    uint64_t(shape->m * shape->n * (shape->f32Result ? 4 : 2))};
  code->grid = {static_cast<uint32_t>((shape->m / chosen->bm) * (shape->n / chosen->bn)), 1, 1};
  code->block = {static_cast<uint32_t>(chosen->threads()), 1, 1};
  code->sharedBytes = static_cast<uint32_t>(chosen->sharedBytes());
  code->config = "wgmma " + chosen->str();
  return code;
}

const CompiledKernel &kiln::compileKernel(Session &session, KernelOp kernel,
                                          const rt::AdapterInfo &adapter) {
  MLIRContext *ctx = kernel.getContext();
  Target target = gpuTargetOf(adapter, session.options);
  DeviceLimits &limits = target.limits;
  // SPIR-V indices are 32-bit here (checked first: configuring such a
  // kernel fails less clearly): refuse any tensor of the kernel that
  // would overflow them, inputs, results and values computed inside alike
  // (a sum over a computed 2^31-element tensor reads no such buffer, yet
  // indexes that far). Not the iteration count: M * N * K is no index.
  int64_t largest = 0;
  kernel.getBody().walk([&](Operation *op) {
    for (Type type : op->getResultTypes())
      if (auto tensor = dyn_cast<RankedTensorType>(type))
        largest = std::max(largest, tensor.getNumElements());
  });
  for (Type type : kernel.getBody().front().getArgumentTypes())
    largest = std::max(largest, cast<RankedTensorType>(type).getNumElements());
  if (largest >= (int64_t(1) << 31))
    throw CompileError("a kernel over a tensor of " + std::to_string(largest) +
                       " elements is beyond the 2^31 elements a Vulkan kernel indexes; "
                       "split the work or run it on the CPU device");
  KernelConfig config =
      configureKernel(session, kernel, &limits, deviceFingerprint(adapter, session.options));
  // Only a GEMM that could take PTX asks whether CUDA runs the GPU (which
  // starts CUDA's driver); KILN_GPU_LIMITS says it for another GPU.
  std::optional<WgmmaGemmShape> gemm;
  if (config.form == KernelConfig::Form::CoopGemm)
    gemm = matchWgmmaGemm(kernel);
  if (gemm && adapter.cudaCandidate && session.options.gpuTargetEdits.empty()) {
    rt::CudaCapability capability = rt::cudaCapability(adapter);
    limits.ptxArch = static_cast<int>(capability.arch);
    limits.ptxSharedBytes = capability.sharedBytes;
  }
  // The kernel as configured plus the limits codegen reads: the key in
  // this session, and (with the target and this compiler build) in the
  // cache's store, where a later process finds the code.
  std::string key = kernelText(kernel);
  {
    llvm::raw_string_ostream os(key);
    os << "\nsubgroup=" << limits.subgroupSize << " shared=" << limits.sharedMemoryBytes
       << " groups=" << limits.maxWorkgroupCount[0] << "," << limits.maxWorkgroupCount[1] << ","
       << limits.maxWorkgroupCount[2] << " invocations=" << limits.maxWorkgroupInvocations
       << " loops=" << limits.maxLoopIterations << " units=" << limits.computeUnits
       << " coop=" << limits.cooperativeMatrix << " coopbf16=" << limits.cooperativeMatrixBF16
       << " ptx=" << limits.ptxArch << "," << limits.ptxSharedBytes;
  }
  if (CompiledKernel *hit = session.kernels.find(key)) {
    ++session.stats.kernel_cache_hits;
    return *hit;
  }
  bool dumping = !session.options.dumpSpirvDir.empty();
  rt::Store *store = dumping ? nullptr : rt::Store::process();
  std::string storeKey =
      "spirv\n" + key + "\ndevice " + deviceFingerprint(adapter, session.options) + "\ncompiler " + compilerBuild();
  if (store)
    if (std::optional<std::vector<uint8_t>> bytes = store->findKernel(storeKey))
      if (std::optional<CompiledKernel> loaded = decodeKernel(*bytes)) {
        loaded->hash = std::hash<std::string>()(key);
        loaded->subgroupSize = static_cast<uint32_t>(limits.subgroupSize);
        loaded->ptx = wgmmaPtxFor(gemm, limits, loaded->hash);
        ++session.stats.kernels_loaded;
        return keepKernel(session, key, std::move(*loaded), adapter);
      }

  KernelModule km = buildKernelModule(kernel, gpuLayoutFor(config), &limits);
  OwningOpRef<ModuleOp> &module = km.module;
  // The module carries its target: the SPIR-V passes read it there, and a
  // dump of it is lowered again by kiln-opt alone.
  (*module)->setAttr(kTargetAttrName, target.toAttr(ctx));
  std::string moduleText;
  if (dumping)
    llvm::raw_string_ostream(moduleText) << **module;
  func::FuncOp *fn = &km.fn;
  int64_t iterations = km.outerIterations;
  std::string diagnostics;
  ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
    diagnostics += diag.str() + "\n";
    return success();
  });
  SPIRVPipelineOptions options;
  // A bf16 GEMM on cooperative matrices is built on f16 fragments of its bits.
  if (config.form == KernelConfig::Form::CoopGemm)
    kernel.getBody().walk([&](Operation *op) {
      if (isa<MatmulOp, Conv2dOp>(op) &&
          cast<RankedTensorType>(op->getOperand(0).getType()).getElementType().isBF16())
        options.bf16Matrices = true;
    });
  // A device that ends loops early (llvmpipe) must never drop work silently.
  if (limits.maxLoopIterations > 0) {
    int64_t loops = loopIterationsPerInvocation(*fn);
    if (loops > limits.maxLoopIterations)
      throw CompileError("a kernel needs " +
                         (loops == INT64_MAX ? std::string("unbounded")
                                             : std::to_string(loops)) +
                         " loop iterations per work item; " + adapter.name + " runs at most " +
                         std::to_string(limits.maxLoopIterations) +
                         " per invocation: reduce in two steps or run it on the CPU device");
  }
  // Loop-form kernels are tiled over one grid dimension; the kernel
  // builders size their own gpu.launch (row kernels, tiled GEMM).
  FailureOr<int> threads = loopKernelThreads(*fn, iterations, limits, config);
  if (failed(threads))
    throw CompileError("a kernel over " + std::to_string(iterations) + " elements with " +
                       config.str() + " needs more workgroups than " + adapter.name +
                       " allows; split the tensor");
  if (*threads > 0)
    options.threads = *threads;

  std::string error;
  std::string pipeline;
  FailureOr<SpirvKernel> lowered = lowerToSpirv(*module, *fn, options, error, &pipeline);
  if (failed(lowered))
    throw CompileError(error + ": " + diagnostics);
  CompiledKernel compiled;
  compiled.hash = std::hash<std::string>()(key);
  compiled.subgroupSize = static_cast<uint32_t>(limits.subgroupSize);
  compiled.spirv = std::move(lowered->words);
  compiled.entryPoint = lowered->entryPoint;
  compiled.bindingOrder = lowered->bindingOrder;
  compiled.numBindings = static_cast<uint32_t>(compiled.bindingOrder.size());
  for (int i = 0; i < 3; ++i)
    compiled.groups[i] = lowered->groups[i];
  if (std::string errors = validateSPIRV(compiled.spirv); !errors.empty())
    throw CompileError("generated SPIR-V failed validation (a Kiln bug): " +
                       errors);
  compiled.ptx = wgmmaPtxFor(gemm, limits, compiled.hash);
  ++session.stats.kernels_compiled;
  if (store) {
    std::vector<uint8_t> bytes = encodeKernel(compiled);
    store->putKernel(storeKey, "spirv", bytes.data(), bytes.size());
  }
  if (dumping) {
    std::vector<uint64_t> bindingBytes;
    for (uint32_t arg : compiled.bindingOrder) {
      auto memref = cast<MemRefType>(fn->getArgumentTypes()[arg]);
      Type element = memref.getElementType();
      int64_t bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth()
                                            : cast<VectorType>(element).getNumElements() *
                                                  cast<VectorType>(element).getElementTypeBitWidth();
      bindingBytes.push_back(memref.getNumElements() * std::max<int64_t>(1, bits / 8));
    }
    dumpKernel(session.options, compiled, bindingBytes, moduleText, pipeline);
  }
  return keepKernel(session, key, std::move(compiled), adapter);
}
