//===- Compile.h - a recorded graph to a Program ----------------*- C++ -*-===//
//
// The one compile path: graph -> place -> fuse -> lower every kernel for its
// device -> rt::Program (runtime/include/kiln/runtime/Program.h). Realize
// runs the result; nothing here touches device memory.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_API_COMPILE_H
#define KILN_LIB_API_COMPILE_H

#include "GraphBuilder.h"
#include "Session.h"

#include "kiln/Codegen/KernelConfigAttr.h"
#include "kiln/Transforms/Placement.h"
#include "kiln/runtime/Program.h"

#include <functional>

namespace kiln {

class CpuObjectEmitter;
namespace rt {
struct AdapterInfo;
}

/// The transfer policy of a realization: RealizeOptions, then
/// KILN_TRANSFER_POLICY, then set_transfer_policy.
PlacementPolicy resolvePolicy(const RealizeOptions &realize);

/// Places every op (a conflict throws DeviceMismatchError) and, with
/// `fuse`, groups the graph into kernels of at most `maxBindings` buffers
/// (0: the fewest any Vulkan device here allows, maxKernelBindings).
void placeAndFuse(Session &session, GraphBuilder &graph, const RealizeOptions &realize,
                  bool fuse = true, int maxBindings = 0);
/// The fewest storage buffers a kernel may bind on this machine's Vulkan
/// devices; 0 when there are none.
int maxKernelBindings();

/// The Program of a placed and fused graph: every kernel compiled (from the
/// session's caches when it can), intermediates planned into shared
/// buffers. Its inputs are graph.inputs; its outputs the graph's results.
/// How kernels are made for an ahead-of-time target (the JIT: none set).
/// A weight a program stores packed for its CPU kernels: a convolution
/// filter in blocks of `block` output channels (CpuDirectConvConfig::
/// packedFilter), or a matmul's B in panels of `block` columns
/// (CpuMatmulConfig::packedB, `matrix` set).
struct PackedWeight {
  uint32_t input = 0;
  int64_t block = 0;
  std::optional<PackedMatrix> matrix;
};

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

/// `constantNodes`, when given, receives per Program constant the position
/// of its node in the graph's topological order (or kCompiledConstant).
std::shared_ptr<const rt::Program> compileProgram(Session &session, GraphBuilder &graph,
                                                  std::vector<uint32_t> *constantNodes = nullptr,
                                                  const ProgramTarget &target = {});

/// The same for a placed and fused graph function parsed from text: its
/// inputs are its kiln.input ops, by index.
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

#endif // KILN_LIB_API_COMPILE_H
