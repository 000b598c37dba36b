//===- FileIO.h - whole files in and out, as a Status ------------*- C++ -*-===//
//
// Private to runtime/lib: the .kiln and .npy readers and writers share it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_FILEIO_H
#define KILN_RUNTIME_LIB_FILEIO_H

#include "kiln/runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::rt {

StatusOr<std::vector<uint8_t>> readFile(const std::string &path);
/// Writes a temporary file beside `path`, then renames it over `path`: a
/// reader (or a mapping of the old file) never sees a half-written one.
Status writeFile(const std::string &path, const std::vector<uint8_t> &bytes);
/// Every file or none: each written to a temporary beside it, and only
/// when all are written, each renamed into place.
Status writeFiles(const std::vector<std::pair<std::string, std::vector<uint8_t>>> &files);

/// A whole file mapped read-only; unmapped when the last owner lets go.
/// Files are replaced by rename (writeFile), never truncated in place, so a
/// mapping stays valid.
class MappedFile {
public:
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }

private:
  friend StatusOr<std::shared_ptr<const MappedFile>> mapFile(const std::string &path);
  MappedFile(const uint8_t *data, size_t size) : data_(data), size_(size) {}
  const uint8_t *data_;
  size_t size_;
};
StatusOr<std::shared_ptr<const MappedFile>> mapFile(const std::string &path);

} // namespace kiln::rt

#endif // KILN_RUNTIME_LIB_FILEIO_H
