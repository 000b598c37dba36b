//===- Target.cpp - targets, their profiles and their one builder ---------===//
//
// One table: every limit a profile states is here, with why. Nothing else
// in the compiler writes a limit's value down.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler/Target.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace kiln;

std::optional<TargetApi> kiln::parseTargetApi(llvm::StringRef name) {
  return symbolizeTargetApi(name);
}

llvm::StringRef kiln::targetApiName(TargetApi api) { return stringifyTargetApi(api); }

std::string Target::str() const {
  std::string api = targetApiName(this->api).str();
  return profile.empty() ? api : api + ":" + profile;
}

TargetAttr Target::toAttr(MLIRContext *ctx) const {
  TargetFeatures features = TargetFeatures::none;
  if (float16)
    features = features | TargetFeatures::f16;
  if (int64)
    features = features | TargetFeatures::int64;
  if (limits.cooperativeMatrix)
    features = features | TargetFeatures::coop_f16;
  if (limits.cooperativeMatrixBF16)
    features = features | TargetFeatures::coop_bf16;
  return TargetAttr::get(ctx, api, profile, limits.subgroupSize, limits.maxWorkgroupInvocations,
                         limits.sharedMemoryBytes, maxBindings, limits.maxLoopIterations,
                         limits.computeUnits, limits.maxWorkgroupCount[0],
                         limits.maxWorkgroupCount[1], limits.maxWorkgroupCount[2], features,
                         limits.ptxArch, limits.ptxSharedBytes, cpuIsa);
}

Target Target::fromAttr(TargetAttr attr) {
  Target target;
  if (!attr) {
    target.cpuIsa = "host";
    return target;
  }
  target.api = attr.getApi();
  target.profile = attr.getProfile().str();
  DeviceLimits &l = target.limits;
  l.subgroupSize = static_cast<int>(attr.getSubgroup());
  l.maxWorkgroupInvocations = static_cast<int>(attr.getWorkgroup());
  l.sharedMemoryBytes = attr.getShared();
  l.maxLoopIterations = attr.getLoops();
  l.computeUnits = static_cast<int>(attr.getUnits());
  l.maxWorkgroupCount[0] = attr.getGroupsX();
  l.maxWorkgroupCount[1] = attr.getGroupsY();
  l.maxWorkgroupCount[2] = attr.getGroupsZ();
  l.cooperativeMatrix = attr.has(TargetFeatures::coop_f16);
  l.cooperativeMatrixBF16 = attr.has(TargetFeatures::coop_bf16);
  l.ptxArch = static_cast<int>(attr.getPtx());
  l.ptxSharedBytes = attr.getPtxShared();
  target.maxBindings = static_cast<int>(attr.getBindings());
  target.float16 = attr.has(TargetFeatures::f16);
  target.int64 = attr.has(TargetFeatures::int64);
  target.cpuIsa = attr.getCpu().empty() && !attr.isGpu() ? "host" : attr.getCpu().str();
  return target;
}

namespace {
rt::AdapterInfo gpuLimits(const char *name, uint32_t subgroup, uint32_t invocations,
                          uint32_t shared, uint32_t bindings, uint32_t units) {
  rt::AdapterInfo info;
  info.name = name;
  info.subgroupSize = subgroup;
  info.maxWorkgroupInvocations = invocations;
  info.maxSharedMemoryBytes = shared;
  for (int i = 0; i < 3; ++i) {
    info.maxWorkgroupCount[i] = 65535;
    info.maxWorkgroupSize[i] = i == 2 ? 64 : invocations;
  }
  info.maxStorageBufferRange = uint64_t(1) << 31;
  info.maxStorageBuffersPerStage = bindings;
  info.computeUnits = units;
  return info;
}

std::vector<TargetProfile> makeProfiles() {
  std::vector<TargetProfile> profiles;
  // Vulkan 1.1's required minimums, and no subgroup size assumed: row
  // reductions go through workgroup memory alone. Runs on every Vulkan
  // GPU, Intel's, Arm's and lavapipe included; slower than a profile that
  // knows the device.
  profiles.push_back({TargetApi::vulkan, "generic",
                      "any Vulkan 1.1 GPU: no subgroup size assumed, 128 invocations, 16 KiB "
                      "shared memory, 8 storage buffers",
                      gpuLimits("generic Vulkan GPU", 1, 128, 16384, 8, 0), ""});
  // H100 and H200 (SXM): what their driver reports (TOOLCHAIN.md), with
  // f16 cooperative matrices on the tensor cores.
  TargetProfile hopper{TargetApi::vulkan, "nvidia-hopper",
                       "NVIDIA H100/H200: subgroup 32, 1024 invocations, 48 KiB shared memory, "
                       "132 SMs, f16 cooperative matrices",
                       gpuLimits("NVIDIA Hopper (profile)", 32, 1024, 49152, 31, 132), ""};
  hopper.gpu.cooperativeMatrixF16 = true;
  hopper.gpu.shaderFloat16 = hopper.gpu.storageBuffer16BitAccess = hopper.gpu.shaderInt64 = true;
  profiles.push_back(hopper);
  // RDNA GPUs run 32 or 64 lanes (subgroup size control); 64 is what
  // their drivers report by default.
  profiles.push_back({TargetApi::vulkan, "amd-rdna",
                      "AMD RDNA: subgroup 64, 1024 invocations, 64 KiB shared memory",
                      gpuLimits("AMD RDNA (profile)", 64, 1024, 65536, 31, 0), ""});
  // Mesa's lavapipe on an AVX2 CPU (CI's Vulkan device): 8 lanes, and
  // llvmpipe ends every loop of an invocation after 65535 iterations in
  // all (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS), silently.
  TargetProfile lavapipe{TargetApi::vulkan, "lavapipe",
                         "Mesa's lavapipe on AVX2: subgroup 8, 1024 invocations, 32 KiB shared "
                         "memory, 65535 loop iterations per invocation",
                         gpuLimits("llvmpipe (profile)", 8, 1024, 32768, 31, 0), ""};
  lavapipe.gpu.maxLoopIterations = 65535;
  lavapipe.gpu.shaderFloat16 = lavapipe.gpu.storageBuffer16BitAccess = true;
  lavapipe.gpu.shaderInt64 = true;
  profiles.push_back(lavapipe);
  // Apple GPUs through SPIRV-Cross's MSL: 32 lanes, 32 KiB threadgroup
  // memory, 31 buffer arguments.
  profiles.push_back({TargetApi::metal, "apple", "Apple GPUs (MSL 2.1)",
                      gpuLimits("Apple GPU (Metal profile)", 32, 1024, 32768, 31, 0), ""});
  profiles.back().gpu.maxStorageBufferRange = uint64_t(1) << 32;
  profiles.back().gpu.maxWorkgroupSize[2] = 1024;
  profiles.push_back({TargetApi::cpu, "x86-64-v2", "SSE4.2 and POPCNT (2009 on)", {}, "x86-64-v2"});
  profiles.push_back({TargetApi::cpu, "x86-64-v3",
                      "AVX2, FMA, F16C (Intel since 2013, AMD since 2015)", {}, "x86-64-v3"});
  profiles.push_back({TargetApi::cpu, "x86-64-v4", "AVX-512 F/BW/CD/DQ/VL", {}, "x86-64-v4"});
  profiles.push_back({TargetApi::cpu, "host", "this machine's CPU, its model and every feature",
                      {}, "host"});
  return profiles;
}

/// A report's limits as codegen reads them.
Target fromReport(TargetApi api, const rt::AdapterInfo &report) {
  Target target;
  target.api = api;
  DeviceLimits &l = target.limits;
  l.subgroupSize = static_cast<int>(report.subgroupSize);
  l.maxWorkgroupInvocations = static_cast<int>(report.maxWorkgroupInvocations);
  for (int i = 0; i < 3; ++i)
    l.maxWorkgroupCount[i] = report.maxWorkgroupCount[i];
  l.sharedMemoryBytes = report.maxSharedMemoryBytes;
  l.maxLoopIterations = static_cast<int64_t>(report.maxLoopIterations);
  l.computeUnits = static_cast<int>(report.computeUnits);
  l.cooperativeMatrix = report.cooperativeMatrixF16;
  l.cooperativeMatrixBF16 = report.cooperativeMatrixBF16;
  target.maxBindings = static_cast<int>(report.maxStorageBuffersPerStage);
  target.float16 = report.shaderFloat16 && report.storageBuffer16BitAccess;
  target.int64 = report.shaderInt64;
  return target;
}
} // namespace

const std::vector<TargetProfile> &kiln::targetProfiles() {
  static const std::vector<TargetProfile> profiles = makeProfiles();
  return profiles;
}

const TargetProfile *kiln::findTargetProfile(TargetApi api, llvm::StringRef name) {
  for (const TargetProfile &p : targetProfiles())
    if (p.api == api && p.name == name)
      return &p;
  return nullptr;
}

std::string kiln::profileNames(std::optional<TargetApi> api) {
  std::string names;
  for (const TargetProfile &p : targetProfiles())
    if (!api || p.api == *api)
      names += (names.empty() ? "" : ", ") + targetApiName(p.api).str() + ":" + p.name;
  return names;
}

FailureOr<Target> kiln::describeTarget(TargetApi api, const rt::AdapterInfo &report,
                                       llvm::StringRef edits, std::string &error) {
  Target target = fromReport(api, report);
  if (edits.empty())
    return target;
  // Another GPU than the reporting one: its loop limit is the reporter's
  // driver's, and it runs no PTX unless the edits say ptx=90.
  target.limits.maxLoopIterations = 0;
  target.limits.ptxArch = 0;
  target.limits.ptxSharedBytes = 0;
  for (llvm::StringRef item : llvm::split(edits, ',')) {
    item = item.trim();
    auto [key, value] = item.split('=');
    if (!item.contains('=')) {
      // A profile's name: its report replaces the one so far.
      auto [apiName, name] = item.contains(':') ? item.split(':')
                                                 : std::make_pair(targetApiName(api), item);
      std::optional<TargetApi> profileApi = parseTargetApi(apiName);
      const TargetProfile *profile =
          profileApi ? findTargetProfile(*profileApi, name) : nullptr;
      if (!profile || *profileApi != api) {
        error = "'" + item.str() + "' is neither key=value nor a profile of " +
                targetApiName(api).str() + " (" + profileNames(api) + ")";
        return failure();
      }
      target = fromReport(api, profile->gpu);
      target.profile = profile->name;
      target.cpuIsa = profile->cpuIsa;
      continue;
    }
    if ((key == "coop" || key == "coopbf16" || key == "f16" || key == "int64") &&
        (value == "0" || value == "1")) {
      bool on = value == "1";
      (key == "coop"       ? target.limits.cooperativeMatrix
       : key == "coopbf16" ? target.limits.cooperativeMatrixBF16
       : key == "f16"      ? target.float16
                           : target.int64) = on;
      continue;
    }
    // ptx=90: the H200's CUDA side, with the 227 KB a CTA opts in to
    // there unless ptxshared= says otherwise.
    if (key == "ptx" && (value == "0" || value == "90")) {
      target.limits.ptxArch = value == "90" ? 90 : 0;
      if (target.limits.ptxArch && !target.limits.ptxSharedBytes)
        target.limits.ptxSharedBytes = 232448;
      continue;
    }
    int64_t v = 0;
    // loops=0 lifts a profile's loop limit.
    if (value.trim().getAsInteger(10, v) || v < 0 || (v == 0 && key != "loops")) {
      error = "'" + item.str() + "' is not key=positive-integer";
      return failure();
    }
    DeviceLimits &l = target.limits;
    if (key == "subgroup")
      l.subgroupSize = static_cast<int>(v);
    else if (key == "invocations")
      l.maxWorkgroupInvocations = static_cast<int>(v);
    else if (key == "shared")
      l.sharedMemoryBytes = v;
    else if (key == "groups")
      l.maxWorkgroupCount[0] = v;
    else if (key == "loops")
      l.maxLoopIterations = v;
    else if (key == "units")
      l.computeUnits = static_cast<int>(v);
    else if (key == "bindings")
      target.maxBindings = static_cast<int>(v);
    else if (key == "ptxshared")
      l.ptxSharedBytes = v;
    else {
      error = "unknown key '" + key.str() +
              "' (a profile such as vulkan:nvidia-hopper, then subgroup, invocations, shared, "
              "groups, loops, units, bindings, coop=0|1, coopbf16=0|1, f16=0|1, int64=0|1, "
              "ptx=0|90, ptxshared)";
      return failure();
    }
  }
  return target;
}

FailureOr<Target> kiln::parseTarget(llvm::StringRef text, std::string &error) {
  auto [head, rest] = text.split(',');
  auto [apiName, profileName] = head.split(':');
  std::optional<TargetApi> api = parseTargetApi(apiName.trim());
  if (!api) {
    error = "unknown target '" + head.str() + "': use vulkan, cpu, metal or cuda, optionally "
            "with a profile (" + profileNames() + ")";
    return failure();
  }
  if (*api == TargetApi::cpu) {
    const TargetProfile *profile =
        findTargetProfile(*api, profileName.empty() ? "host" : profileName);
    if (!profile || !rest.empty()) {
      error = "unknown profile '" + text.drop_front(apiName.size() + 1).str() +
              "' of target cpu: the profiles are " + profileNames(*api);
      return failure();
    }
    // "cpu" alone names no profile (the caller's default); "cpu:host" does.
    Target target;
    target.profile = profileName.empty() ? "" : profile->name;
    target.cpuIsa = profile->cpuIsa;
    return target;
  }
  if (profileName.empty()) {
    // The device at hand: its limits are its report's, when it is opened.
    if (!rest.empty()) {
      error = "'" + text.str() + "': edit a profile (" + profileNames(*api) + "), not " +
              apiName.str() + " alone";
      return failure();
    }
    Target target;
    target.api = *api;
    return target;
  }
  if (!findTargetProfile(*api, profileName)) {
    error = "unknown profile '" + profileName.str() + "' of target " + apiName.str() +
            ": the profiles are " + profileNames(*api);
    return failure();
  }
  return describeTarget(*api, rt::AdapterInfo(), text, error);
}
