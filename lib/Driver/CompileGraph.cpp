//===- CompileGraph.cpp - a recorded graph placed, fused and compiled -----===//

#include "lib/Driver/CompileGraph.h"

#include "lib/Driver/Environment.h"
#include "lib/Driver/ProcessSession.h"
#include "lib/Frontend/ConflictReport.h"
#include "lib/Frontend/Devices.h"

#include "kiln/Codegen/Pipelines.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/runtime/Vulkan.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <iostream>

using namespace mlir;
using namespace kiln;

namespace {
std::string formatDiagnostic(Diagnostic &diag) {
  auto line = [](Location loc, DiagnosticSeverity severity, const std::string &msg) {
    SourceLocation src = sourceOf(loc);
    const char *kind = severity == DiagnosticSeverity::Error     ? "error"
                       : severity == DiagnosticSeverity::Warning ? "warning"
                       : severity == DiagnosticSeverity::Remark  ? "remark"
                                                                 : "note";
    return (src.file.empty() ? std::string() : src.str() + ": ") + kind + ": " + msg + "\n";
  };
  std::string text = line(diag.getLocation(), diag.getSeverity(), diag.str());
  for (Diagnostic &note : diag.getNotes())
    text += line(note.getLocation(), DiagnosticSeverity::Note, note.str());
  return text;
}

std::optional<TransferPolicy> programPolicy;

PlacementPolicy toPlacement(TransferPolicy policy) {
  switch (policy) {
  case TransferPolicy::error: return PlacementPolicy::Error;
  case TransferPolicy::log: return PlacementPolicy::Log;
  case TransferPolicy::allow: return PlacementPolicy::Allow;
  }
  return PlacementPolicy::Error;
}

} // namespace

PlacementPolicy kiln::resolvePolicy(const RealizeOptions &realize) {
  if (realize.transfer_policy)
    return toPlacement(*realize.transfer_policy);
  if (std::optional<PlacementPolicy> policy = environment::transferPolicy())
    return *policy;
  return programPolicy ? toPlacement(*programPolicy) : PlacementPolicy::Error;
}

/// The CPU has no such limit.
int kiln::maxKernelBindings() {
  static const int limit = [] {
    rt::StatusOr<rt::VulkanContext *> context = rt::VulkanContext::get();
    if (!context.isOk())
      return 0;
    uint32_t fewest = 0;
    for (const rt::AdapterInfo &adapter : (*context)->adapters())
      if (adapter.maxStorageBuffersPerStage &&
          (!fewest || adapter.maxStorageBuffersPerStage < fewest))
        fewest = adapter.maxStorageBuffersPerStage;
    return static_cast<int>(std::min<uint32_t>(fewest, 1u << 20));
  }();
  return limit;
}

void kiln::placeAndFuse(Session &session, GraphBuilder &graph, const RealizeOptions &realize,
                        bool fuse, int maxBindings) {
  MLIRContext *ctx = graph.ctx;
  PlacementOptions options;
  options.defaultDevice =
      deviceAttr(ctx, graph.retarget ? *graph.retarget : Device::default_device());
  options.policy = resolvePolicy(realize);

  std::string report;
  ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
    std::string text = formatDiagnostic(diag);
    if (diag.getSeverity() == DiagnosticSeverity::Remark) {
      if (options.policy == PlacementPolicy::Log)
        std::cerr << "kiln: " << text;
      return success();
    }
    report += text;
    return success();
  });
  if (failed(verify(*graph.module)))
    throw CompileError("internal error: the recorded graph does not verify:\n" + report);

  SmallVector<PlacementConflict> found;
  CommittedPlacements committed;
  if (failed(placeDevices(graph.func, options, &found, &committed)))
    throw conflictError(found, graph.values, committed);
  if (!fuse)
    return;
  PassManager pm(ctx, ModuleOp::getOperationName());
  FusionPipelineOptions fusion;
  fusion.maxBindings = maxBindings ? maxBindings : maxKernelBindings();
  populateFusionPipeline(pm, fusion);
  if (failed(pm.run(*graph.module)))
    throw CompileError("fusion failed:\n" + report);
}

void kiln::set_transfer_policy(TransferPolicy policy) {
  Session &s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  programPolicy = policy;
}

std::shared_ptr<const rt::Program> kiln::compileProgram(Session &session, GraphBuilder &graph,
                                                        std::vector<uint32_t> *constantNodes,
                                                        const ProgramTarget &target) {
  std::vector<rt::TensorType> inputs;
  for (Node *input : graph.inputs)
    inputs.push_back(programTypeOf(tensorType(graph.ctx, *input)));
  return buildProgram(session, graph.func, std::move(inputs), constantNodes, target);
}

