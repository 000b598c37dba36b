//===- Registration.cpp - the one file that includes InitAll* -------------===//
//
// InitAllPasses.h is slow to compile (TOOLCHAIN.md): keep it in this file.
//
//===----------------------------------------------------------------------===//

#include "kiln/Codegen/Pipelines.h"
#include "kiln/Transforms/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Pass/PassRegistry.h"

void kiln::registerKilnPasses() {
  static bool once = [] {
    mlir::registerAllPasses();
    registerKilnTransformsPasses();
    mlir::PassPipelineRegistration<>(
        "kiln-graph-pipeline", "placement then fusion (default options)",
        [](mlir::OpPassManager &pm) {
          populateGraphPipeline(pm, GraphPipelineOptions());
        });
    mlir::PassPipelineRegistration<>(
        "kiln-linalg-to-spirv",
        "kernel functions to spirv.module, for the module's #kiln.target",
        [](mlir::OpPassManager &pm) {
          (void)populateLinalgToSPIRVPipeline(pm, SPIRVPipelineOptions());
        });
    mlir::PassPipelineRegistration<>(
        "kiln-linalg-to-llvm", "kernel functions to the LLVM dialect for the host CPU",
        [](mlir::OpPassManager &pm) { (void)populateLinalgToLLVMPipeline(pm); });
    return true;
  }();
  (void)once;
}

void kiln::registerKilnDialects(mlir::DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<KilnDialect>();
  mlir::registerAllToLLVMIRTranslations(registry);
}
