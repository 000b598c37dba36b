//===- SpirvInterface.cpp - Reading a kernel's assumptions from SPIR-V ----===//
//
// See SpirvInterface.h. One pass over the instructions collects the
// declarations; type sizes are computed afterwards, with a depth bound (a
// crafted module may declare types that refer to each other).
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/SpirvInterface.h"

#include "kiln/runtime/Sha256.h"

#include "SpirvCheck.h"

#include <cstring>
#include <map>
#include <optional>

namespace kiln::rt {
namespace {

enum Op : uint32_t {
  OpExtension = 10,
  OpEntryPoint = 15,
  OpExecutionMode = 16,
  OpCapability = 17,
  OpTypeBool = 20,
  OpTypeInt = 21,
  OpTypeFloat = 22,
  OpTypeVector = 23,
  OpTypeArray = 28,
  OpTypeRuntimeArray = 29,
  OpTypeStruct = 30,
  OpTypePointer = 32,
  OpConstant = 43,
  OpVariable = 59,
  OpDecorate = 71,
  OpMemberDecorate = 72,
  OpExecutionModeId = 331,
};
constexpr uint32_t kHeaderWords = 5;
constexpr uint32_t kLocalSize = 17, kLocalSizeId = 38, kExecutionModelGLCompute = 5;
constexpr uint32_t kBuiltInWorkgroupSize = 25;
constexpr uint32_t kDecorationBuiltIn = 11, kDecorationArrayStride = 6, kDecorationBinding = 33,
                   kDecorationDescriptorSet = 34, kDecorationOffset = 35;
constexpr uint32_t kStorageWorkgroup = 4, kStorageBuffer = 12, kStorageUniform = 2;
constexpr uint64_t kMaxBytes = uint64_t(1) << 48;

bool isSubgroupCapability(uint32_t c) {
  return c == 18 ||                  // Groups
         (c >= 61 && c <= 68) ||     // GroupNonUniform .. GroupNonUniformQuad
         c == 6026 ||                // GroupNonUniformRotateKHR
         c == 4423 || c == 4431 ||   // SubgroupBallotKHR, SubgroupVoteKHR
         c == 5297 ||                // GroupNonUniformPartitionedNV
         c == 5357 || c == 6022 ||   // CooperativeMatrixNV, CooperativeMatrixKHR
         (c >= 5430 && c <= 5440);   // NVIDIA's cooperative matrix 2 family
}

bool isSubgroupBuiltIn(uint32_t b) {
  return b == 36 || b == 38 || b == 40 || b == 41 || // SubgroupSize, NumSubgroups,
         (b >= 4416 && b <= 4420);                    // SubgroupId, ..LocalInvocationId, masks
}

struct Module {
  struct Type {
    uint32_t op = 0;
    std::vector<uint32_t> operands; // the words after the result id
  };
  std::map<uint32_t, Type> types;
  std::map<uint32_t, uint64_t> constants; // scalar integer constants
  std::map<uint32_t, uint32_t> arrayStride;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> memberOffset;
  std::map<uint32_t, uint32_t> binding, descriptorSet;
  struct Variable {
    uint32_t pointerType, storage;
  };
  std::map<uint32_t, Variable> variables;

  /// Sizes computed so far: each type once (a crafted module may nest
  /// structs of a hundred members each).
  mutable std::map<uint32_t, std::optional<uint64_t>> sizes;

  /// Bytes of type `id`, nullopt when unknown (runtime arrays, opaque types).
  std::optional<uint64_t> size(uint32_t id, int depth = 0) const {
    if (auto known = sizes.find(id); known != sizes.end())
      return known->second;
    std::optional<uint64_t> bytes = computeSize(id, depth);
    sizes[id] = bytes;
    return bytes;
  }

  std::optional<uint64_t> computeSize(uint32_t id, int depth) const {
    auto it = types.find(id);
    if (it == types.end() || depth > 16)
      return std::nullopt;
    const Type &t = it->second;
    auto operand = [&](size_t i) -> uint32_t { return i < t.operands.size() ? t.operands[i] : 0; };
    switch (t.op) {
    case OpTypeBool:
      return 4;
    case OpTypeInt:
    case OpTypeFloat:
      if (operand(0) == 0 || operand(0) % 8 || operand(0) > 64)
        return std::nullopt;
      return operand(0) / 8;
    case OpTypeVector: {
      std::optional<uint64_t> element = size(operand(0), depth + 1);
      if (!element || operand(1) > 16)
        return std::nullopt;
      return *element * operand(1);
    }
    case OpTypeArray: {
      auto length = constants.find(operand(1));
      if (length == constants.end() || length->second > kMaxBytes)
        return std::nullopt;
      std::optional<uint64_t> stride;
      if (auto s = arrayStride.find(id); s != arrayStride.end())
        stride = s->second;
      else
        stride = size(operand(0), depth + 1);
      if (!stride || *stride > kMaxBytes || (*stride && length->second > kMaxBytes / *stride))
        return std::nullopt;
      return length->second * *stride;
    }
    case OpTypeStruct: {
      uint64_t bytes = 0, packed = 0;
      for (uint32_t m = 0; m < t.operands.size(); ++m) {
        std::optional<uint64_t> member = size(t.operands[m], depth + 1);
        if (!member)
          return std::nullopt;
        auto offset = memberOffset.find({id, m});
        uint64_t start = offset != memberOffset.end() ? offset->second : packed;
        if (start > kMaxBytes || *member > kMaxBytes)
          return std::nullopt;
        packed = start + *member;
        bytes = std::max(bytes, packed);
      }
      return bytes;
    }
    default:
      return std::nullopt;
    }
  }
};

} // namespace

StatusOr<SpirvInterface> readSpirvInterface(const std::vector<uint32_t> &words) {
  auto invalid = [](const std::string &why) {
    return Status::invalidArgument("invalid SPIR-V module: " + why);
  };
  if (words.size() < kHeaderWords)
    return invalid("shorter than its header");
  SpirvInterface out;
  Module m;
  uint32_t entryPoints = 0, localSizes = 0, entryPoint = 0, localSizeOf = 0;
  for (size_t i = kHeaderWords; i < words.size();) {
    uint32_t count = words[i] >> 16, opcode = words[i] & 0xffff;
    if (count == 0 || i + count > words.size())
      return invalid("an instruction at word " + std::to_string(i) + " is not framed");
    const uint32_t *w = &words[i];
    switch (opcode) {
    case OpCapability:
      if (count >= 2) {
        out.capabilities.push_back(w[1]);
        out.usesSubgroups |= isSubgroupCapability(w[1]);
        out.usesCooperativeMatrix |= w[1] == 6022;
        out.usesFloat16 |= w[1] == 9;
        out.uses16BitStorage |= w[1] >= 4433 && w[1] <= 4436;
        out.usesInt64 |= w[1] == 11;
        out.usesInt16 |= w[1] == 22;
        out.usesInt8 |= w[1] == 39;
        out.uses8BitStorage |= w[1] >= 4448 && w[1] <= 4450;
      }
      break;
    case OpExtension: {
      std::string name;
      if (!readSpirvString(words, i + 1, i + count, name))
        return invalid("an OpExtension without a terminated name");
      out.extensions.push_back(name);
      break;
    }
    case OpEntryPoint:
      if (count >= 3 && w[1] == kExecutionModelGLCompute) {
        if (entryPoints++)
          return invalid("more than one compute entry point");
        entryPoint = w[2];
      }
      break;
    case OpExecutionMode:
      if (count >= 3 && w[2] == kLocalSize) {
        if (count < 6 || localSizes++)
          return invalid("more than one LocalSize, or one without three sizes");
        localSizeOf = w[1];
        out.workgroupSize = {w[3], w[4], w[5]};
      }
      break;
    case OpExecutionModeId:
      // LocalSizeId: sizes from constants the record could not be held to.
      if (count >= 3 && w[2] == kLocalSizeId)
        return invalid("a workgroup size given by LocalSizeId");
      break;
    case OpTypeBool:
    case OpTypeInt:
    case OpTypeFloat:
    case OpTypeVector:
    case OpTypeArray:
    case OpTypeRuntimeArray:
    case OpTypeStruct:
    case OpTypePointer:
      if (count >= 2)
        m.types[w[1]] = {opcode, std::vector<uint32_t>(w + 2, w + count)};
      break;
    case OpConstant:
      if (count >= 4) {
        uint64_t value = w[3];
        if (count >= 5)
          value |= uint64_t(w[4]) << 32;
        m.constants[w[2]] = value;
      }
      break;
    case OpVariable:
      if (count >= 4)
        m.variables[w[2]] = {w[1], w[3]};
      break;
    case OpDecorate:
      if (count >= 4) {
        if (w[2] == kDecorationBuiltIn && w[3] == kBuiltInWorkgroupSize)
          return invalid("a WorkgroupSize built-in, which overrides LocalSize");
        if (w[2] == kDecorationBuiltIn)
          out.usesSubgroups |= isSubgroupBuiltIn(w[3]);
        else if (w[2] == kDecorationArrayStride)
          m.arrayStride[w[1]] = w[3];
        else if (w[2] == kDecorationBinding)
          m.binding[w[1]] = w[3];
        else if (w[2] == kDecorationDescriptorSet)
          m.descriptorSet[w[1]] = w[3];
      }
      break;
    case OpMemberDecorate:
      if (count >= 5 && w[3] == kDecorationOffset)
        m.memberOffset[{w[1], w[2]}] = w[4];
      break;
    default:
      break;
    }
    i += count;
  }
  if (entryPoints != 1 || localSizes != 1 || localSizeOf != entryPoint)
    return invalid("not one compute entry point with its LocalSize");
  for (const auto &[id, variable] : m.variables) {
    auto pointer = m.types.find(variable.pointerType);
    if (pointer == m.types.end() || pointer->second.op != OpTypePointer ||
        pointer->second.operands.size() < 2)
      return invalid("variable %" + std::to_string(id) + " is not of a pointer type");
    uint32_t pointee = pointer->second.operands[1];
    if (variable.storage == kStorageWorkgroup) {
      std::optional<uint64_t> bytes = m.size(pointee);
      if (!bytes)
        return invalid("workgroup variable %" + std::to_string(id) + " has no fixed size");
      out.sharedBytes += *bytes;
      if (out.sharedBytes > kMaxBytes)
        return invalid("workgroup variables larger than 2^48 bytes");
      continue;
    }
    if (variable.storage != kStorageBuffer && variable.storage != kStorageUniform)
      continue;
    auto binding = m.binding.find(id);
    auto set = m.descriptorSet.find(id);
    if (binding == m.binding.end() || set == m.descriptorSet.end() || set->second != 0)
      return invalid("buffer %" + std::to_string(id) + " is not bound in descriptor set 0");
    if (binding->second >= 4096)
      return invalid("buffer binding " + std::to_string(binding->second));
    if (out.bindingBytes.size() <= binding->second)
      out.bindingBytes.resize(binding->second + 1, UINT64_MAX);
    if (out.bindingBytes[binding->second] != UINT64_MAX)
      return invalid("two buffers at binding " + std::to_string(binding->second));
    // Kiln's buffers are arrays of fixed size: a runtime-sized one would
    // declare nothing to hold the bound buffer against.
    std::optional<uint64_t> bytes = m.size(pointee);
    if (!bytes || *bytes == 0)
      return invalid("buffer %" + std::to_string(id) + " has no fixed size");
    out.bindingBytes[binding->second] = *bytes;
  }
  for (uint64_t &bytes : out.bindingBytes)
    if (bytes == UINT64_MAX)
      bytes = 0; // a binding the module does not use
  return out;
}

uint64_t spirvHash(const std::vector<uint32_t> &words, const std::string &entryPoint,
                   uint32_t subgroupSize) {
  std::vector<uint8_t> bytes(words.size() * 4 + entryPoint.size() + 5);
  std::memcpy(bytes.data(), words.data(), words.size() * 4);
  std::memcpy(bytes.data() + words.size() * 4, entryPoint.data(), entryPoint.size());
  for (int i = 0; i < 4; ++i)
    bytes[bytes.size() - 4 + i] = uint8_t(subgroupSize >> (8 * i));
  Sha256Digest digest = sha256(bytes.data(), bytes.size());
  uint64_t hash = 0;
  std::memcpy(&hash, digest.data(), sizeof hash);
  return hash;
}

} // namespace kiln::rt
