//===- KernelToLinalgPass.cpp - the kiln-kernel-to-linalg pass ------------===//

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/Codegen/KernelToLinalg.h"
#include "kiln/Compiler/Target.h"
#include "kiln/Transforms/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNKERNELTOLINALG
#include "kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {
struct KernelToLinalgPass
    : public kiln::impl::KilnKernelToLinalgBase<KernelToLinalgPass> {
  using KilnKernelToLinalgBase::KilnKernelToLinalgBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<KernelOp> kernels;
    module.walk([&](KernelOp k) { kernels.push_back(k); });
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    // Each kernel is built for its nearest #kiln.target.
    auto gpuLimitsOf = [](KernelOp kernel) -> std::optional<DeviceLimits> {
      Target target = Target::fromAttr(getTarget(kernel));
      if (!target.isGpu())
        return std::nullopt;
      return target.limits;
    };
    std::optional<MatmulConfig> matmul;
    if (!matmulTiles.empty())
      matmul = MatmulConfig::fromSizes({matmulTiles.begin(), matmulTiles.end()});
    if (!matmulTiles.empty() && !matmul) {
      module.emitError("matmul-tiles takes 5 to 7 numbers from 1 to 65536: tileM, tileN, tileK, threadM, threadN[, splitK[, stages]]");
      return signalPassFailure();
    }
    std::optional<CpuMatmulConfig> cpuMatmul;
    if (!cpuMatmulBlock.empty())
      cpuMatmul = CpuMatmulConfig::fromSizes({cpuMatmulBlock.begin(), cpuMatmulBlock.end()});
    if (!cpuMatmulBlock.empty() && !cpuMatmul) {
      module.emitError("cpu-matmul-block takes 4 numbers from 1 to 65536: rows, lanes, vectors, panelColumns");
      return signalPassFailure();
    }
    // The options edit the default config of kernels that have none (a
    // shorthand for writing `config` on each); codegen reads the attribute.
    for (KernelOp kernel : kernels) {
      if (kernel.getConfigAttr())
        continue;
      std::optional<DeviceLimits> limits = gpuLimitsOf(kernel);
      KernelConfig config = defaultKernelConfig(kernel, limits ? &*limits : nullptr);
      if (matmul && config.form == KernelConfig::Form::Gemm)
        config.gemm = *matmul;
      if (cpuMatmul && config.form == KernelConfig::Form::CpuGemm)
        config.cpuGemm = *cpuMatmul;
      if (rowWorkgroupSize != 0 && config.form == KernelConfig::Form::Row) {
        config.row = RowKernelConfig();
        config.row.workgroupPerRow = rowWorkgroupSize > 0;
        config.row.workgroupSize = rowWorkgroupSize > 0 ? static_cast<int>(rowWorkgroupSize) : 1;
      }
      if (matmul || cpuMatmul || rowWorkgroupSize != 0)
        kernel.setConfigAttr(kernelConfigAttr(&getContext(), config));
    }
    for (auto [i, kernel] : llvm::enumerate(kernels)) {
      auto graph = kernel->getParentOfType<func::FuncOp>();
      std::string name =
          (graph ? graph.getName() + "_kernel" : Twine("kernel")).str() +
          std::to_string(i);
      std::optional<DeviceLimits> limits = gpuLimitsOf(kernel);
      FailureOr<func::FuncOp> fn = buildKernelFunction(
          kernel, builder, name,
          coalesce                               ? KernelLayout::Coalesced
          : vector4 && supportsVector4(kernel) ? KernelLayout::Vector4
                                                 : KernelLayout::Flat,
          limits ? &*limits : nullptr);
      if (failed(fn))
        return signalPassFailure();
      kernel->setAttr("kernel", FlatSymbolRefAttr::get(fn->getSymNameAttr()));
    }
  }
};
} // namespace
