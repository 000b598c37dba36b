//===- SpirvInterface.h - What a SPIR-V kernel assumes of its device -*- C++ -*-===//
//
// Read from the module's words, by the compiler (to record a kernel's
// assumptions in a .kiln file) and by the loader (to check that record and
// hold it against the device): one reader, so the two cannot disagree.
// Stateless; safe from any thread.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SPIRVINTERFACE_H
#define KILN_RUNTIME_SPIRVINTERFACE_H

#include "kiln/runtime/Status.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

struct SpirvInterface {
  /// OpCapability and OpExtension operands, in module order.
  std::vector<uint32_t> capabilities;
  std::vector<std::string> extensions;
  /// LocalSize of the entry point; {0, 0, 0} when the module sets none.
  std::array<uint32_t, 3> workgroupSize = {0, 0, 0};
  /// Bytes of its Workgroup-storage variables.
  uint64_t sharedBytes = 0;
  /// Per storage-buffer binding (descriptor set 0), the bytes its type
  /// declares: the buffer bound there must hold at least that many; 0 for
  /// a runtime-sized array.
  std::vector<uint64_t> bindingBytes;
  /// Subgroup operations, subgroup built-ins or cooperative matrices: its
  /// result depends on the subgroup size it was compiled for.
  bool usesSubgroups = false;
  /// Cooperative matrices (VK_KHR_cooperative_matrix).
  bool usesCooperativeMatrix = false;
  /// 16-bit floats in arithmetic (Float16); 16-bit values in storage
  /// buffers (StorageBuffer16BitAccess and its kin).
  bool usesFloat16 = false;
  bool uses16BitStorage = false;
  /// 64-, 16- and 8-bit integers (Int64, Int16, Int8); 8-bit values in
  /// storage buffers.
  bool usesInt64 = false;
  bool usesInt16 = false;
  bool usesInt8 = false;
  bool uses8BitStorage = false;
};

/// The interface of a module that checkSpirv accepts; InvalidArgument when
/// its declarations are inconsistent or not Kiln's form: not one compute
/// entry point with one LocalSize (LocalSizeId and the WorkgroupSize
/// built-in are refused), a binding in another set, a buffer of no fixed
/// size, an array length that is no constant.
StatusOr<SpirvInterface> readSpirvInterface(const std::vector<uint32_t> &words);

/// 64 bits of the SHA-256 of the words, the entry point and the required
/// subgroup size: what identifies a pipeline made from them.
uint64_t spirvHash(const std::vector<uint32_t> &words, const std::string &entryPoint,
                   uint32_t subgroupSize);

} // namespace kiln::rt

#endif
