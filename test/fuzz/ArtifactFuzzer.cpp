// libFuzzer target: the .kiln loader (FlatBuffers verifier, meaning checks,
// SPIR-V and MSL checks, the CPU code's ELF and hash checks) on arbitrary
// bytes. A file that parses must also describe itself. Any crash, leak or
// sanitizer report is a bug: malformed files must be errors.
//
// Built and run by scripts/fuzz.sh (clang-22, -fsanitize=fuzzer,address).

#include "kiln/runtime/Artifact.h"

#include <cstddef>
#include <cstdint>

#include <vector>

namespace {
void parse(const uint8_t *data, size_t size) {
  kiln::rt::StatusOr<kiln::rt::Artifact> artifact =
      kiln::rt::parseArtifact(data, size, "fuzz.kiln");
  if (!artifact.isOk())
    return;
  for (const kiln::rt::TargetProgram &program : artifact->programs)
    (void)program.program->describe();
  (void)artifact->targets();
}
} // namespace

// The input as a whole file (the seal's own checks), then sealed: a crafted
// file, whose every check after the seal must hold. The corpus holds
// unsealed bodies for that reason.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  parse(data, size);
  std::vector<uint8_t> sealed(data, data + size);
  kiln::rt::sealArtifact(sealed);
  parse(sealed.data(), sealed.size());
  return 0;
}
