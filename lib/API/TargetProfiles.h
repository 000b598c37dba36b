//===- TargetProfiles.h - Named devices to compile for ----------*- C++ -*-===//
//
// A target is an api ("vulkan", "cpu", "metal") and, optionally, a named
// profile of the device to compile for when it is not the one at hand:
// `--target vulkan:nvidia-hopper,cpu:x86-64-v3`. Each program of a .kiln
// records its profile; a file with several is one model with variants, and
// the runtime runs the most specific one the device meets (Artifact.h).
// The table is read-only; safe from any thread.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_API_TARGETPROFILES_H
#define KILN_LIB_API_TARGETPROFILES_H

#include "kiln/runtime/Vulkan.h"

#include <string>
#include <vector>

namespace kiln {

struct TargetProfile {
  std::string api;  ///< "vulkan", "cpu", "metal"
  std::string name; ///< "generic", "nvidia-hopper", "x86-64-v3"
  /// What it stands for and why its limits are what they are.
  std::string about;
  /// A GPU profile's limits and features, as a device would report them.
  rt::AdapterInfo gpu;
  /// A CPU profile's instruction set (CpuObjectEmitter's names).
  std::string cpuIsa;
};

/// A parsed --target entry: an api and a profile ("" for the device at
/// hand).
struct TargetSpec {
  std::string api;
  std::string profile;
  /// "vulkan:nvidia-hopper", or "vulkan".
  std::string str() const { return profile.empty() ? api : api + ":" + profile; }
};

/// Every profile, in the order `--help` lists them.
const std::vector<TargetProfile> &targetProfiles();
/// The profile `name` of `api`, or null.
const TargetProfile *findTargetProfile(const std::string &api, const std::string &name);
/// "vulkan:nvidia-hopper" parsed, the profile checked. Throws Error naming
/// the apis and profiles there are.
TargetSpec parseTargetSpec(const std::string &text);

} // namespace kiln

#endif
