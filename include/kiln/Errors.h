//===- Errors.h - the typed errors of the Tensor API ------------*- C++ -*-===//

#ifndef KILN_ERRORS_H
#define KILN_ERRORS_H

#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

/// Any Kiln failure the caller can act on (bad input, missing device, a
/// runtime error). The message says what to do.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A device name that does not exist here, or a device that cannot be used.
class DeviceError : public Error {
public:
  using Error::Error;
};

struct SourceLocation {
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
  std::string str() const; // "file:line:col"
};

/// One op whose operands live on different devices.
struct DeviceConflict {
  struct Operand {
    unsigned index;
    std::string type;          // "tensor<4x3xf32>"
    std::string device;        // resolved: "vulkan:1"
    std::string written;       // as the user wrote it, when known
    SourceLocation committedAt; // where the tensor got its device
  };
  std::string op;              // "kiln.add"
  SourceLocation location;     // the user's line
  std::vector<Operand> operands;
  std::string fix;
};

/// The device-consistency check failed: every conflict of the graph, found
/// before any kernel was compiled. what() is the compiler-style report.
class DeviceMismatchError : public Error {
public:
  DeviceMismatchError(std::string message, std::vector<DeviceConflict> conflicts)
      : Error(std::move(message)), conflicts_(std::move(conflicts)) {}
  const std::vector<DeviceConflict> &conflicts() const { return conflicts_; }

private:
  std::vector<DeviceConflict> conflicts_;
};

/// The compiler rejected a graph (an internal error or an unsupported op).
class CompileError : public Error {
public:
  using Error::Error;
};

} // namespace kiln

#endif // KILN_ERRORS_H
