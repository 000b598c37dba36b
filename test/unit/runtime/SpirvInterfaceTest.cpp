// The loader's reader of a SPIR-V kernel's interface on modules a crafted
// file could hold: nested types read in linear time, sizes that would
// overflow refused, and no second workgroup size to hide behind. Also the
// SHA-256 that seals a file, both of its paths, against known digests.

#include "kiln/runtime/Sha256.h"
#include "kiln/runtime/SpirvInterface.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>

using namespace kiln::rt;

namespace {
/// A compute module built word by word: header, Shader, the memory model,
/// entry point %1 "main" with its LocalSize; then what a test adds.
struct Module {
  std::vector<uint32_t> words = {0x07230203, 0x00010300, 0, 1000, 0};
  void op(uint32_t opcode, std::vector<uint32_t> operands) {
    words.push_back(uint32_t(operands.size() + 1) << 16 | opcode);
    words.insert(words.end(), operands.begin(), operands.end());
  }
  Module() {
    op(17, {1});                        // OpCapability Shader
    op(14, {0, 1});                     // OpMemoryModel Logical GLSL450
    op(15, {5, 1, 0x6e69616d, 0});      // OpEntryPoint GLCompute %1 "main"
    op(16, {1, 17, 64, 1, 1});          // OpExecutionMode %1 LocalSize 64 1 1
  }
};

TEST(SpirvInterface, ReadsWorkgroupSizeMemoryAndBuffers) {
  Module m;
  m.op(21, {10, 32, 0});          // %10 = i32
  m.op(43, {10, 11, 256});        // %11 = 256
  m.op(28, {12, 10, 11});         // %12 = [256 x i32]
  m.op(71, {12, 6, 4});           // ArrayStride 4
  m.op(30, {13, 12});             // %13 = struct { [256 x i32] }
  m.op(72, {13, 0, 35, 0});       // member 0 Offset 0
  m.op(32, {14, 12, 13});         // %14 = StorageBuffer pointer
  m.op(59, {14, 15, 12});         // %15 = buffer
  m.op(71, {15, 34, 0});          // DescriptorSet 0
  m.op(71, {15, 33, 0});          // Binding 0
  m.op(32, {16, 4, 12});          // %16 = Workgroup pointer to [256 x i32]
  m.op(59, {16, 17, 4});          // %17 = shared
  StatusOr<SpirvInterface> in = readSpirvInterface(m.words);
  ASSERT_TRUE(in.isOk()) << in.status().message();
  EXPECT_EQ(in->workgroupSize, (std::array<uint32_t, 3>{64, 1, 1}));
  EXPECT_EQ(in->sharedBytes, 1024u);
  EXPECT_EQ(in->bindingBytes, (std::vector<uint64_t>{1024}));
  EXPECT_FALSE(in->usesSubgroups);
}

TEST(SpirvInterface, NestedStructsAreReadInLinearTime) {
  // Five levels of structs of 100 members each: 10^10 member visits
  // without memoizing each type's size.
  Module m;
  m.op(21, {10, 32, 0});
  uint32_t inner = 10;
  for (uint32_t level = 0; level < 5; ++level) {
    uint32_t id = 100 + level;
    m.op(30, std::vector<uint32_t>(101, inner));
    m.words[m.words.size() - 101] = id; // the result id, then 100 members
    inner = id;
  }
  m.op(32, {200, 4, inner});
  m.op(59, {200, 201, 4});
  auto start = std::chrono::steady_clock::now();
  StatusOr<SpirvInterface> in = readSpirvInterface(m.words);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(in.isOk()) << in.status().message();
  EXPECT_EQ(in->sharedBytes, 4ull * 100 * 100 * 100 * 100 * 100);
  EXPECT_LT(seconds, 1.0);
}

TEST(SpirvInterface, SizesThatWouldOverflowAreRefused) {
  Module m;
  m.op(21, {10, 32, 0});
  m.op(21, {9, 64, 0});
  m.op(43, {9, 11, 0, 2}); // %11 = 2^33 (a 64-bit constant)
  m.op(28, {12, 10, 11});  // [2^33 x i32]
  m.op(71, {12, 6, 0x80000000u}); // stride 2^31: 2^64 bytes, 0 if it wrapped
  m.op(32, {14, 4, 12});
  m.op(59, {14, 15, 4});
  StatusOr<SpirvInterface> in = readSpirvInterface(m.words);
  ASSERT_FALSE(in.isOk());
  EXPECT_NE(in.status().message().find("no fixed size"), std::string::npos)
      << in.status().message();
}

TEST(SpirvInterface, OnlyOneWorkgroupSizeCounts) {
  Module twice;
  twice.op(16, {1, 17, 1024, 1024, 1}); // a second LocalSize
  EXPECT_FALSE(readSpirvInterface(twice.words).isOk());
  Module builtin;
  builtin.op(71, {50, 11, 25}); // BuiltIn WorkgroupSize overrides LocalSize
  EXPECT_FALSE(readSpirvInterface(builtin.words).isOk());
  Module byId;
  byId.op(331, {1, 38, 60, 61, 62}); // LocalSizeId
  EXPECT_FALSE(readSpirvInterface(byId.words).isOk());
}

TEST(SpirvInterface, SubgroupOperationsAreSeen) {
  Module m;
  m.op(17, {61}); // GroupNonUniform
  StatusOr<SpirvInterface> in = readSpirvInterface(m.words);
  ASSERT_TRUE(in.isOk());
  EXPECT_TRUE(in->usesSubgroups);
}

TEST(Sha256, KnownDigestsOnBothPaths) {
  const char *abc = "abc";
  EXPECT_EQ(toHex(sha256(reinterpret_cast<const uint8_t *>(abc), 3)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(toHex(sha256(nullptr, 0)),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; // 56 bytes
  EXPECT_EQ(toHex(sha256(reinterpret_cast<const uint8_t *>(two), std::strlen(two))),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // The CPU's SHA instructions, where it has them, agree with the portable
  // path at every length around the block and padding boundaries.
  std::mt19937 rng(5);
  std::vector<uint8_t> bytes(4096);
  for (uint8_t &b : bytes)
    b = uint8_t(rng());
  for (size_t n : {size_t(0), size_t(1), size_t(55), size_t(56), size_t(63), size_t(64),
                   size_t(65), size_t(119), size_t(120), size_t(128), size_t(4096)})
    EXPECT_EQ(sha256(bytes.data(), n), sha256Portable(bytes.data(), n)) << n << " bytes";
  std::cout << "SHA-256 on " << (sha256UsesCpuInstructions() ? "the CPU's SHA instructions"
                                                              : "the portable path")
            << "\n";
}
} // namespace
