//===- FileIO.h - whole files in and out, as a Status ------------*- C++ -*-===//
//
// Private to runtime/lib: the .kiln and .npy readers and writers share it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_FILEIO_H
#define KILN_RUNTIME_LIB_FILEIO_H

#include "kiln/runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

StatusOr<std::vector<uint8_t>> readFile(const std::string &path);
Status writeFile(const std::string &path, const std::vector<uint8_t> &bytes);

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_FILEIO_H
