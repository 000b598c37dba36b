//===- Tuning.h - tuned configs: keys and lookup ----------------*- C++ -*-===//
//
// KILN_AUTOTUNE=off|cached|on decides where a kernel's config comes from:
// `off` takes the device's default; `cached` (the default) takes a tuned
// config from the cache's store when one is there, else the default, so a
// first run is never slowed by tuning; `on` also tunes every miss first
// (the driver runs the tuner, lib/Tune/Tuner.h, before it compiles).
// Compiling only looks configs up. kiln-tune tunes a whole graph ahead of
// time.
//
// A record's key is the kernel without its config (its ops, shapes and
// dtypes), the device's fingerprint (vendor, device, driver version and
// pipelineCacheUUID; for the CPU its model and ISA features), Kiln's
// compiler version and the search space's version.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_COMPILER_TUNING_H
#define KILN_LIB_COMPILER_TUNING_H

#include "lib/Compiler/Session.h"

#include "dialects/Kiln/KilnDialect.h"
#include "kiln/Codegen/KernelConfig.h"
#include "kiln/runtime/Device.h"
#include "kiln/runtime/Store.h"
#include "kiln/runtime/Vulkan.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kiln {


/// Bumped whenever the candidate lists or the config forms change: records
/// of an older search space are misses.
constexpr int kSearchSpaceVersion = 5;
/// Kiln's compiler version, in every cache key.
const char *compilerVersion();

/// "vulkan vendor=4318 device=8997 driver=... cache=<uuid>", and the
/// target edits compiled for.
std::string deviceFingerprint(const rt::AdapterInfo &adapter, const CompilerOptions &options);
/// "cpu model=<name> features=+avx2,+fma,...", and the level compiled for.
std::string cpuFingerprint(const CompilerOptions &options);

/// The tuning key of `kernel` (its config left out) on a device.
std::string tuningKey(KernelOp kernel, const std::string &fingerprint);

/// 16 hex digits of a key (timing replays and kiln-tune name kernels so).
std::string tuningKeyHash(const std::string &key);

/// The store's tuned config of `kernel` on the device `fingerprint` names,
/// checked against the kernel's candidates; none for a miss or a stale
/// record.
std::optional<KernelConfig> tunedConfig(rt::Store &store, KernelOp kernel,
                                        const DeviceLimits *gpu, const std::string &key);

/// The configure step: the kernel's config as written, else its tuned
/// config from the store (options.autotune allowing), else the default.
/// Throws CompileError for a config the kernel or device cannot take.
KernelConfig configureKernel(Session &session, KernelOp kernel, const DeviceLimits *gpu,
                             const std::string &fingerprint);

} // namespace kiln

#endif // KILN_LIB_COMPILER_TUNING_H
