//===- kiln-spirv-check.cpp - serialize and validate spirv.modules --------===//
//
// Reads MLIR (a file or stdin), serializes every spirv.module in it and runs
// the SPIRV-Tools validator for Vulkan 1.1 on the words. Prints one line per
// module and exits non-zero if any is invalid: lit pipes kiln-opt's output
// through it so every module a test generates is validated. With
// `--output FILE` the words of the (one) module are written there, for
// kiln-spirv-replay (bench/half/make_ceiling.py's kernels).
//
//===----------------------------------------------------------------------===//

#include "kiln/Codegen/Pipelines.h"

#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/SPIRV/Serialization.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "spirv-tools/libspirv.hpp"

using namespace mlir;

int main(int argc, char **argv) {
  llvm::cl::opt<std::string> input(llvm::cl::Positional, llvm::cl::init("-"),
                                   llvm::cl::desc("<input .mlir>"));
  llvm::cl::opt<std::string> output("output", llvm::cl::init(""),
                                    llvm::cl::desc("write the module's SPIR-V words to this file"));
  llvm::cl::ParseCommandLineOptions(argc, argv, "serialize and validate spirv.modules\n");

  DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  MLIRContext context(registry);
  std::string error;
  auto file = openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "kiln-spirv-check: " << error << "\n";
    return 2;
  }
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module)
    return 2;

  // --output names one file: with several modules nothing is written.
  if (!output.empty()) {
    int count = 0;
    module->walk([&](spirv::ModuleOp) { ++count; });
    if (count != 1) {
      llvm::errs() << "kiln-spirv-check: --output takes one spirv.module; the input has " << count
                   << "\n";
      return 1;
    }
  }
  int modules = 0, invalid = 0;
  module->walk([&](spirv::ModuleOp spirvModule) {
    ++modules;
    std::string name = spirvModule.getName() ? spirvModule.getName()->str() : "<anonymous>";
    SmallVector<uint32_t> words;
    if (failed(spirv::serialize(spirvModule, words))) {
      llvm::outs() << "spirv.module @" << name << ": serialization failed\n";
      ++invalid;
      return;
    }
    if (!output.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream out(output, ec, llvm::sys::fs::OF_None);
      if (ec) {
        llvm::errs() << "kiln-spirv-check: cannot write " << output << ": " << ec.message() << "\n";
        ++invalid;
        return;
      }
      out.write(reinterpret_cast<const char *>(words.data()), words.size() * sizeof(uint32_t));
    }
    // Debian 12's SPIRV-Tools (2023.1) rejects every cooperative-matrix
    // module ("Invalid capability operand: 6022"): said so, not validated.
    bool coop = false;
    spirvModule.walk([&](spirv::KHRCooperativeMatrixMulAddOp) { coop = true; });
    if (coop) {
      llvm::outs() << "spirv.module @" << name << ": serialized (" << words.size()
                   << " words), not validated: SPIRV-Tools 2023.1 does not know "
                      "cooperative matrices\n";
      return;
    }
    std::string messages;
    spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_1);
    tools.SetMessageConsumer([&](spv_message_level_t, const char *,
                                 const spv_position_t &, const char *message) {
      messages += std::string("  ") + message + "\n";
    });
    std::vector<uint32_t> binary(words.begin(), words.end());
    if (tools.Validate(binary)) {
      llvm::outs() << "spirv.module @" << name << ": valid (" << words.size() << " words)\n";
    } else {
      llvm::outs() << "spirv.module @" << name << ": INVALID\n" << messages;
      ++invalid;
    }
  });
  if (modules == 0) {
    llvm::outs() << "no spirv.module found\n";
    return 1;
  }
  return invalid ? 1 : 0;
}
