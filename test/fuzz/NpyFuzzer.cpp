// libFuzzer target: .npy parsing (magic, version 1-3 headers, the dict's
// descr / fortran_order / shape, sizes against the data) on arbitrary
// bytes. A file that parses round-trips through formatNpy.
//
// Built and run by scripts/fuzz.sh (clang-22, -fsanitize=fuzzer,address).

#include "kiln/runtime/Npy.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln::rt::StatusOr<kiln::rt::NpyArray> array = kiln::rt::parseNpy(data, size, "fuzz.npy");
  if (!array.isOk())
    return 0;
  std::vector<uint8_t> again = kiln::rt::formatNpy(*array);
  kiln::rt::StatusOr<kiln::rt::NpyArray> back =
      kiln::rt::parseNpy(again.data(), again.size(), "again.npy");
  if (!back.isOk() || back->data != array->data || back->type.shape != array->type.shape ||
      back->type.element != array->type.element)
    std::abort(); // what we write, we must read back
  return 0;
}
