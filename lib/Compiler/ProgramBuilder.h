//===- ProgramBuilder.h - a placed, fused graph to a Program ----*- C++ -*-===//
//
// The compiler's half of the one compile path (the driver places and fuses,
// lib/Driver/CompileGraph.h): every kernel lowered for the device placement
// gave it -> rt::Program (runtime/include/kiln/runtime/Program.h). Realize
// runs the result; nothing here touches device memory.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_PROGRAMBUILDER_H
#define KILN_LIB_COMPILER_PROGRAMBUILDER_H

#include "lib/Compiler/Session.h"

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/runtime/Program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <functional>

namespace kiln {

class CpuObjectEmitter;
namespace rt {
struct AdapterInfo;
}

/// A weight a program stores packed for its CPU kernels: a convolution
/// filter in blocks of `block` output channels (CpuDirectConvConfig::
/// packedFilter), or a matmul's B in panels of `block` columns
/// (CpuMatmulConfig::packedB, `matrix` set).
struct PackedWeight {
  uint32_t input = 0;
  int64_t block = 0;
  std::optional<PackedMatrix> matrix;
};

/// How kernels are made for an ahead-of-time target (the JIT: none set).
struct ProgramTarget {
  /// CPU kernels become objects linked into Program::cpuLibrary (what a
  /// .kiln file stores), else the JIT's code.
  CpuObjectEmitter *cpuObjects = nullptr;
  /// GPU kernels are sized for these limits rather than the Vulkan device
  /// they were placed on (the metal target's metalProfile()).
  const rt::AdapterInfo *gpuProfile = nullptr;
  /// Which Program inputs are weights (compile()); a CPU convolution whose
  /// filter is one, or a matmul whose B is one, and its only use, may take
  /// it packed, and `packedWeights` receives each weight the caller must
  /// store packed.
  std::function<bool(uint32_t input)> isWeight;
  std::vector<PackedWeight> *packedWeights = nullptr;
};

/// A Program constant a pass made: its value is the compiled one.
constexpr uint32_t kCompiledConstant = ~uint32_t(0);

/// The Program of a placed and fused graph function: every kernel compiled
/// for its placement (from the session's caches when it can), intermediates
/// planned into shared buffers. `inputs` are the types of its kiln.input
/// ops by index; its outputs the function's results. `constantNodes`, when
/// given, receives per Program constant the `kiln.node` it came from (or
/// kCompiledConstant).
std::shared_ptr<const rt::Program> buildProgram(Session &session, mlir::func::FuncOp func,
                                                std::vector<rt::TensorType> inputs,
                                                std::vector<uint32_t> *constantNodes,
                                                const ProgramTarget &target);

/// The same for a function parsed from text: its inputs are its kiln.input
/// ops, by index.
std::shared_ptr<const rt::Program> compileProgram(Session &session, mlir::func::FuncOp func,
                                                  const ProgramTarget &target = {});
std::vector<rt::TensorType> inputTypesOf(mlir::func::FuncOp func);
/// Drops the PTX of GEMMs among SPIR-V kernels on their device where it
/// saves less than the hand-overs between CUDA and Vulkan cost (a program
/// of PTX kernels alone keeps all of it).
void keepPtxThatPays(rt::Program &program);
/// A compiled kernel as a Program's code for its device.
std::shared_ptr<rt::SpirvCode> spirvCodeOf(const CompiledKernel &compiled);
std::shared_ptr<rt::CpuCode> cpuCodeOf(const CompiledCpuKernel &compiled);
rt::TensorType programTypeOf(mlir::Type type);

} // namespace kiln

#endif // KILN_LIB_COMPILER_PROGRAMBUILDER_H
