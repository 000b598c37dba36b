//===- Version.h - the tools' --version ------------------------*- C++ -*-===//

#ifndef KILN_TOOLS_COMMON_VERSION_H
#define KILN_TOOLS_COMMON_VERSION_H

#include "kiln/runtime/Version.h"

#include <cstdio>
#include <cstring>

namespace kiln::tools {
/// Prints "TOOL (Kiln) X.Y.Z" and returns true when `arg` is --version.
inline bool printedVersion(const char *arg, const char *tool) {
  if (std::strcmp(arg, "--version") != 0)
    return false;
  std::printf("%s (Kiln) %s\n", tool, KILN_VERSION);
  return true;
}
} // namespace kiln::tools

#endif // KILN_TOOLS_COMMON_VERSION_H
