// libFuzzer target: the .kiln loader (FlatBuffers verifier, meaning checks,
// SPIR-V and MSL checks, the CPU code's ELF and hash checks) on arbitrary
// bytes. A file that parses must also describe itself. Any crash, leak or
// sanitizer report is a bug: malformed files must be errors.
//
// Built and run by scripts/fuzz.sh (clang-22, -fsanitize=fuzzer,address).

#include "kiln/runtime/Artifact.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln::rt::StatusOr<kiln::rt::Artifact> artifact =
      kiln::rt::parseArtifact(data, size, "fuzz.kiln");
  if (!artifact.isOk())
    return 0;
  for (const kiln::rt::TargetProgram &program : artifact->programs)
    (void)program.program->describe();
  (void)artifact->targets();
  return 0;
}
