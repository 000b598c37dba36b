//===- CompileGraph.h - a recorded graph placed, fused, compiled -*- C++ -*-===//
//
// The driver's half of the one compile path: a recorded graph (GraphBuilder)
// placed (a conflict throws DeviceMismatchError with the user's lines), fused
// within the devices' buffers, then compiled by the compiler
// (lib/Compiler/ProgramBuilder.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_DRIVER_COMPILEGRAPH_H
#define KILN_LIB_DRIVER_COMPILEGRAPH_H

#include "lib/Compiler/ProgramBuilder.h"
#include "lib/Frontend/GraphBuilder.h"

#include "kiln/Transforms/Placement.h"

namespace kiln {

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

/// The Program of a placed and fused recorded graph (buildProgram): its
/// inputs are graph.inputs; `constantNodes` receives per Program constant
/// the position of its node in the graph's topological order.
std::shared_ptr<const rt::Program> compileProgram(Session &session, GraphBuilder &graph,
                                                  std::vector<uint32_t> *constantNodes = nullptr,
                                                  const ProgramTarget &target = {});

} // namespace kiln

#endif // KILN_LIB_DRIVER_COMPILEGRAPH_H
