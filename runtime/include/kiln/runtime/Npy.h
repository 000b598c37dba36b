//===- Npy.h - NumPy .npy files, read and written ----------------*- C++ -*-===//
//
// kiln-run's inputs and outputs. Little-endian f32 ('<f4'), f16 ('<f2'),
// i32 ('<i4') and bool ('|b1'), C order, format versions 1.0 to 3.0. Anything
// else (another dtype, big-endian, Fortran order, a header or size that
// does not add up) is an error that names what was found and what is
// accepted; nothing is read past the bytes given.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_NPY_H
#define KILN_RUNTIME_NPY_H

#include "kiln/runtime/Program.h"
#include "kiln/runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

struct NpyArray {
  TensorType type;
  std::vector<uint8_t> data; ///< type.bytes() bytes, as stored
};

/// Parses a whole .npy file held in memory; `what` names it in errors.
StatusOr<NpyArray> parseNpy(const uint8_t *bytes, size_t size, const std::string &what);
StatusOr<NpyArray> readNpy(const std::string &path);

/// The file's bytes (format 1.0, or 2.0 when the header needs it).
std::vector<uint8_t> formatNpy(const NpyArray &array);
Status writeNpy(const std::string &path, const NpyArray &array);
/// Every file or none: each written beside its path first, then all renamed
/// into place, so a failure (a folder, an unwritable path) leaves no result.
Status writeNpyFiles(const std::vector<std::pair<std::string, NpyArray>> &files);

} // namespace kiln::rt

#endif // KILN_RUNTIME_NPY_H
