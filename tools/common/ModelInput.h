//===- ModelInput.h - what kiln-compile and kiln-tune read -------*- C++ -*-===//
//
// Both tools take a kiln graph (.mlir) or an ONNX model, with
// --input-shape NAME=1x3x224x224 fixing an ONNX input's symbolic
// dimensions. Header-only: each tool is one file.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_COMMON_MODELINPUT_H
#define KILN_TOOLS_COMMON_MODELINPUT_H

#include "kiln/Tensor.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace kiln::tools {

inline bool isOnnx(const std::string &path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

/// Parses NAME=DxDx... into `shapes`; the reason it is not one otherwise.
inline std::optional<std::string> parseInputShape(const std::string &value,
                                                  std::map<std::string, Shape> &shapes) {
  size_t eq = value.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
    return "--input-shape " + value + ": expected NAME=1x3x224x224";
  Shape shape;
  std::stringstream dims(value.substr(eq + 1));
  for (std::string d; std::getline(dims, d, 'x');) {
    char *end = nullptr;
    long long v = std::strtoll(d.c_str(), &end, 10);
    if (d.empty() || *end || v < 1 || v > (1ll << 40))
      return "--input-shape " + value + ": '" + d + "' is not a dimension";
    shape.push_back(v);
  }
  shapes[value.substr(0, eq)] = shape;
  return std::nullopt;
}

} // namespace kiln::tools

#endif // KILN_TOOLS_COMMON_MODELINPUT_H
