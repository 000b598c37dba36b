//===- FileIO.cpp - whole files in and out, as a Status -------------------===//

#include "FileIO.h"

#include <fstream>
#include <iterator>

using namespace kiln::rt;

StatusOr<std::vector<uint8_t>> kiln::rt::readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::notFound(path + ": cannot open it for reading");
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(file)),
                              std::istreambuf_iterator<char>());
}

Status kiln::rt::writeFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream file(path, std::ios::binary);
  if (!file)
    return Status::notFound(path + ": cannot open it for writing");
  file.write(reinterpret_cast<const char *>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  if (!file)
    return Status::unavailable(path + ": writing failed (disk full?)");
  return Status::ok();
}
