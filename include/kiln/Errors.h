//===- Errors.h - the typed errors of the Tensor API ------------*- C++ -*-===//

#ifndef KILN_ERRORS_H
#define KILN_ERRORS_H

#include <cstdint>
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

/// One API call (linear, add, where, ...) whose tensor arguments live on
/// different devices, in the user's terms: the call, its arguments under
/// their parameter names, as the user created them.
struct DeviceConflict {
  struct Operand {
    unsigned index = 0;         // position among the call's tensor arguments
    std::string name;           // its parameter name: "weight", "b"
    std::string type;           // as the user made it: "tensor<16x8xf32>"
    std::string device;         // resolved: "vulkan:1"; empty: uncommitted
    std::string written;        // the device as the user wrote it, when known
    SourceLocation committedAt; // where the tensor got its device
    SourceLocation createdAt;   // where the argument was made (== committedAt
                                // unless it was computed)
    std::string computedBy;     // the call that computed it ("relu"); empty
                                // for a tensor created with its device
  };
  std::string op;              // the API call: "linear", "mul"
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

/// Memory ran out on the host or on a device. Nothing is lost: the tensors
/// that exist stay valid, and the process can go on (free some, or split
/// the work, and try again).
class OutOfMemoryError : public Error {
public:
  OutOfMemoryError(std::string message, uint64_t bytes, std::string device,
                   uint64_t available)
      : Error(std::move(message)), bytes_(bytes), device_(std::move(device)),
        available_(available) {}
  /// The allocation that failed.
  uint64_t bytes() const { return bytes_; }
  /// "cpu:0", "vulkan:0".
  const std::string &device() const { return device_; }
  /// Memory the device had left, when it says (else 0).
  uint64_t available() const { return available_; }

private:
  uint64_t bytes_;
  std::string device_;
  uint64_t available_;
};

/// The compiler rejected a graph (an internal error or an unsupported op).
class CompileError : public Error {
public:
  using Error::Error;
};

} // namespace kiln

#endif // KILN_ERRORS_H
