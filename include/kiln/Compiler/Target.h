//===- Target.h - what code is compiled for ---------------------*- C++ -*-===//
//
// A target is a typed value: an API (TargetApi), optionally a named profile
// of a device that is not the one at hand, and the limits and features
// codegen reads (DeviceLimits). describeTarget() is the one function that
// makes one, from a live device's report or a profile's; the table of
// profiles below is the one place limit values are written down. The
// compiler puts it on a kernel's module as #kiln.target, and passes read it
// from there (getTarget). Everything here is read-only: safe from any
// thread.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_TARGET_H
#define KILN_COMPILER_TARGET_H

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Codegen/KernelConfig.h"
#include "kiln/runtime/Vulkan.h"

#include <string>
#include <vector>

namespace kiln {

struct Target {
  TargetApi api = TargetApi::cpu;
  /// "nvidia-hopper", "x86-64-v3"; empty for the device at hand.
  std::string profile;
  /// A GPU target's limits and features (zero: no such limit).
  DeviceLimits limits;
  /// Storage buffers one kernel may bind, 0 for no limit.
  int maxBindings = 0;
  bool float16 = false, int64 = false;
  /// A CPU target's x86-64 level ("x86-64-v3", "host").
  std::string cpuIsa;

  bool isGpu() const { return api != TargetApi::cpu; }
  /// "vulkan:nvidia-hopper", or "vulkan".
  std::string str() const;
  TargetAttr toAttr(mlir::MLIRContext *ctx) const;
  /// The target an attribute describes; the host CPU for a null one.
  static Target fromAttr(TargetAttr attr);
};

struct TargetProfile {
  TargetApi api;
  std::string name;
  /// What it stands for and why its limits are what they are.
  std::string about;
  /// A GPU profile's limits and features, as a device would report them.
  rt::AdapterInfo gpu;
  /// A CPU profile's x86-64 level (CpuObjectEmitter's names).
  std::string cpuIsa;
};

/// "vulkan", "cpu", "metal", "cuda": the one parser of API names.
std::optional<TargetApi> parseTargetApi(llvm::StringRef name);
llvm::StringRef targetApiName(TargetApi api);

/// Every profile, in the order `--help` lists them.
const std::vector<TargetProfile> &targetProfiles();
/// The profile `name` of `api`, or null.
const TargetProfile *findTargetProfile(TargetApi api, llvm::StringRef name);
/// "vulkan, cpu:x86-64-v3, ...": the profiles of `api` (all for none), for
/// errors and help.
std::string profileNames(std::optional<TargetApi> api = std::nullopt);

/// The one builder of a target: a device's report (a live device's, or a
/// profile's `gpu`) on `api`, then `edits`, KILN_GPU_LIMITS' grammar: a
/// profile's name ("vulkan:nvidia-hopper") that replaces the report, then
/// key=value items ("subgroup=64,units=114,coop=1,ptx=90"). Edits make a
/// target for another GPU than the one reporting: its loop limit and PTX
/// are dropped unless they say them. Fails with `error` set on bad text.
mlir::FailureOr<Target> describeTarget(TargetApi api, const rt::AdapterInfo &report,
                                       llvm::StringRef edits, std::string &error);
/// A target from text alone: "vulkan:nvidia-hopper,units=114",
/// "vulkan:lavapipe", "cpu:x86-64-v3", "cpu" (kiln-attach-target).
mlir::FailureOr<Target> parseTarget(llvm::StringRef text, std::string &error);

} // namespace kiln

#endif // KILN_COMPILER_TARGET_H
