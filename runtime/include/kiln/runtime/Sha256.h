//===- Sha256.h - SHA-256 (FIPS 180-4) of a byte range ----------*- C++ -*-===//
//
// The digest that seals a .kiln file (Artifact.h). On x86-64 CPUs with the
// SHA extensions (AMD Zen, Intel since Ice Lake and Goldmont) the block
// function uses them, about 1.5-2 GB/s per core; elsewhere a portable one.
// Both give the same digest. Stateless; safe from any thread.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SHA256_H
#define KILN_RUNTIME_SHA256_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::rt {

using Sha256Digest = std::array<uint8_t, 32>;

/// The SHA-256 of [data, data + size).
Sha256Digest sha256(const uint8_t *data, size_t size);
/// As lowercase hex (64 characters).
std::string toHex(const Sha256Digest &digest);
/// Whether sha256 uses the CPU's SHA instructions here (for tests and
/// benchmarks: both paths must agree).
bool sha256UsesCpuInstructions();
/// The portable path alone, whatever the CPU.
Sha256Digest sha256Portable(const uint8_t *data, size_t size);

} // namespace kiln::rt

#endif
