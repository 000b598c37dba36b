//===- SpirvKernel.cpp - a kernel module to SPIR-V, with its launch -------===//

#include "kiln/Codegen/SpirvKernel.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/SPIRV/Serialization.h"

using namespace mlir;
using namespace kiln;

KernelLayout kiln::gpuLayoutFor(const KernelConfig &config) {
  return config.form == KernelConfig::Form::Loop && config.loop.vectorWidth == 4
             ? KernelLayout::Vector4
             : KernelLayout::Flat;
}

FailureOr<int> kiln::loopKernelThreads(func::FuncOp fn, int64_t iterations,
                                       const DeviceLimits &limits, const KernelConfig &config) {
  bool ownLaunch = false;
  fn->walk([&](gpu::LaunchOp) { ownLaunch = true; });
  if (ownLaunch)
    return 0;
  int size = config.form == KernelConfig::Form::Loop
                 ? config.loop.workgroupSize
                 : LoopKernelConfig::defaultWorkgroupSize(limits, iterations);
  if (size <= 0 || (iterations + size - 1) / size > limits.maxWorkgroupCount[0])
    return failure();
  return size;
}

FailureOr<SpirvKernel> kiln::lowerToSpirv(ModuleOp module, func::FuncOp fn,
                                          const SPIRVPipelineOptions &options,
                                          std::string &error, std::string *pipeline) {
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  if (failed(populateLinalgToSPIRVPipeline(pm, options))) {
    error = "lowering a kernel to SPIR-V failed";
    return failure();
  }
  if (pipeline) {
    llvm::raw_string_ostream os(*pipeline);
    pm.printAsTextualPipeline(os);
  }
  if (failed(pm.run(module))) {
    error = "lowering a kernel to SPIR-V failed";
    return failure();
  }
  SpirvKernel kernel;
  spirv::ModuleOp spirvModule;
  module->walk([&](spirv::ModuleOp m) { spirvModule = m; });
  module->walk([&](spirv::EntryPointOp entry) { kernel.entryPoint = entry.getFn().str(); });
  bool unboundOperand = false;
  module->walk([&](gpu::LaunchFuncOp launch) {
    kernel.bindingOrder.clear();
    for (Value operand : launch.getKernelOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (!arg || arg.getOwner()->getParentOp() != fn) {
        unboundOperand = true;
        continue;
      }
      kernel.bindingOrder.push_back(arg.getArgNumber());
    }
    Value sizes[3] = {launch.getGridSizeX(), launch.getGridSizeY(), launch.getGridSizeZ()};
    for (int i = 0; i < 3; ++i)
      kernel.groups[i] = static_cast<uint32_t>(getConstantIntValue(sizes[i]).value_or(0));
  });
  if (unboundOperand) {
    error = "internal error: a kernel operand is not a buffer of the kernel";
    return failure();
  }
  SmallVector<uint32_t> words;
  if (!spirvModule || kernel.entryPoint.empty() || failed(spirv::serialize(spirvModule, words))) {
    error = "kernel produced no serializable spirv.module";
    return failure();
  }
  kernel.words.assign(words.begin(), words.end());
  return kernel;
}
