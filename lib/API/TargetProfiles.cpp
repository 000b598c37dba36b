//===- TargetProfiles.cpp - The table of named targets --------------------===//
//
// One table: every limit a profile states is here, with why.
//
//===----------------------------------------------------------------------===//

#include "TargetProfiles.h"

#include "kiln/Errors.h"

using namespace kiln;

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
  profiles.push_back({"vulkan", "generic",
                      "any Vulkan 1.1 GPU: no subgroup size assumed, 128 invocations, 16 KiB "
                      "shared memory, 8 storage buffers",
                      gpuLimits("generic Vulkan GPU", 1, 128, 16384, 8, 0), ""});
  // H100 and H200 (SXM): what their driver reports (TOOLCHAIN.md), with
  // f16 cooperative matrices on the tensor cores.
  TargetProfile hopper{"vulkan", "nvidia-hopper",
                       "NVIDIA H100/H200: subgroup 32, 1024 invocations, 48 KiB shared memory, "
                       "132 SMs, f16 cooperative matrices",
                       gpuLimits("NVIDIA Hopper (profile)", 32, 1024, 49152, 31, 132), ""};
  hopper.gpu.cooperativeMatrixF16 = true;
  hopper.gpu.shaderFloat16 = hopper.gpu.storageBuffer16BitAccess = hopper.gpu.shaderInt64 = true;
  profiles.push_back(hopper);
  // RDNA GPUs run 32 or 64 lanes (subgroup size control); 64 is what
  // their drivers report by default.
  profiles.push_back({"vulkan", "amd-rdna",
                      "AMD RDNA: subgroup 64, 1024 invocations, 64 KiB shared memory",
                      gpuLimits("AMD RDNA (profile)", 64, 1024, 65536, 31, 0), ""});
  // Apple GPUs through SPIRV-Cross's MSL: 32 lanes, 32 KiB threadgroup
  // memory, 31 buffer arguments.
  profiles.push_back({"metal", "apple", "Apple GPUs (MSL 2.1)",
                      gpuLimits("Apple GPU (Metal profile)", 32, 1024, 32768, 31, 0), ""});
  profiles.back().gpu.maxStorageBufferRange = uint64_t(1) << 32;
  profiles.back().gpu.maxWorkgroupSize[2] = 1024;
  profiles.push_back({"cpu", "x86-64-v2", "SSE4.2 and POPCNT (2009 on)", {}, "x86-64-v2"});
  profiles.push_back(
      {"cpu", "x86-64-v3", "AVX2, FMA, F16C (Intel since 2013, AMD since 2015)", {}, "x86-64-v3"});
  profiles.push_back({"cpu", "x86-64-v4", "AVX-512 F/BW/CD/DQ/VL", {}, "x86-64-v4"});
  profiles.push_back({"cpu", "host", "this machine's CPU, its model and every feature", {},
                      "host"});
  return profiles;
}
} // namespace

const std::vector<TargetProfile> &kiln::targetProfiles() {
  static const std::vector<TargetProfile> profiles = makeProfiles();
  return profiles;
}

const TargetProfile *kiln::findTargetProfile(const std::string &api, const std::string &name) {
  for (const TargetProfile &p : targetProfiles())
    if (p.api == api && p.name == name)
      return &p;
  return nullptr;
}

TargetSpec kiln::parseTargetSpec(const std::string &text) {
  size_t colon = text.find(':');
  TargetSpec spec{text.substr(0, colon), colon == std::string::npos ? "" : text.substr(colon + 1)};
  if (spec.api != "vulkan" && spec.api != "cpu" && spec.api != "metal")
    throw Error("unknown target '" + text + "': use vulkan, cpu or metal, optionally with a "
                "profile (vulkan:generic, cpu:x86-64-v3)");
  if (spec.profile.empty() || findTargetProfile(spec.api, spec.profile))
    return spec;
  std::string known;
  for (const TargetProfile &p : targetProfiles())
    if (p.api == spec.api)
      known += (known.empty() ? "" : ", ") + p.api + ":" + p.name;
  throw Error("unknown profile '" + spec.profile + "' of target " + spec.api +
              ": the profiles are " + known);
}
