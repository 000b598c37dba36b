//===- FileIO.cpp - whole files in and out, as a Status -------------------===//

#include "FileIO.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <iterator>

using namespace kiln::rt;

StatusOr<std::vector<uint8_t>> kiln::rt::readFile(const std::string &path) {
  // (Reading a folder through a stream throws instead of failing.)
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    return Status::invalidArgument(path + ": not a regular file (a folder?); give a file");
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::notFound(path + ": cannot open it for reading");
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(file)),
                              std::istreambuf_iterator<char>());
}

namespace {
std::string temporaryFor(const std::string &path) {
  return path + ".tmp" + std::to_string(::getpid());
}

/// Writes `bytes` to `path`'s temporary file.
Status writeTemporary(const std::string &path, const std::vector<uint8_t> &bytes) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    return Status::invalidArgument(path + ": is a folder; give a file name");
  std::string temporary = temporaryFor(path);
  std::ofstream file(temporary, std::ios::binary);
  if (!file)
    return Status::notFound(path + ": cannot open it for writing (" + std::strerror(errno) +
                            ")");
  file.write(reinterpret_cast<const char *>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) {
    std::remove(temporary.c_str());
    return Status::unavailable(path + ": writing failed (disk full?)");
  }
  return Status::ok();
}
} // namespace

Status kiln::rt::writeFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  return writeFiles({{path, bytes}});
}

Status kiln::rt::writeFiles(
    const std::vector<std::pair<std::string, std::vector<uint8_t>>> &files) {
  for (size_t i = 0; i < files.size(); ++i) {
    if (Status s = writeTemporary(files[i].first, files[i].second); !s.isOk()) {
      for (size_t j = 0; j < i; ++j)
        std::remove(temporaryFor(files[j].first).c_str());
      return s;
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string &path = files[i].first;
    if (std::rename(temporaryFor(path).c_str(), path.c_str()) != 0) {
      std::string why = std::strerror(errno);
      for (size_t j = i; j < files.size(); ++j)
        std::remove(temporaryFor(files[j].first).c_str());
      return Status::unavailable(path + ": cannot replace it (" + why + ")");
    }
  }
  return Status::ok();
}

MappedFile::~MappedFile() {
  if (data_ && size_)
    ::munmap(const_cast<uint8_t *>(data_), size_);
}

StatusOr<std::shared_ptr<const MappedFile>> kiln::rt::mapFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::notFound(path + ": cannot open it for reading");
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status::invalidArgument(path + ": not a regular file");
  }
  size_t size = static_cast<size_t>(info.st_size);
  const uint8_t *data = nullptr;
  if (size > 0) {
    void *mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      std::string why = std::strerror(errno);
      ::close(fd);
      return Status::unavailable(path + ": cannot map it (" + why + ")");
    }
    data = static_cast<const uint8_t *>(mapped);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(new MappedFile(data, size));
}
