// libFuzzer target: ONNX import (protobuf parsing, initializers, every
// converter's attribute and shape checks) on arbitrary bytes. Importing
// only records the graph: nothing is compiled or run. Every input must
// import or throw kiln::Error; anything else (another exception, a crash,
// a sanitizer report) is a bug.
//
// Built and run by scripts/fuzz.sh (clang-22, -fsanitize=fuzzer,address),
// the importer instrumented and linked against the build's libraries.

#include "kiln/Errors.h"
#include "kiln/Import.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    kiln::import_onnx_bytes(std::string(reinterpret_cast<const char *>(data), size), "fuzz.onnx");
  } catch (const kiln::Error &) {
    // a clear error: what malformed models must get
  }
  return 0;
}
