//===- Status.h - Error values of the Kiln runtime --------------*- C++ -*-===//
//
// The runtime reports every failure as a Status or StatusOr<T> instead of
// throwing or aborting, so that a host application (or kiln-run) decides what
// to do. Messages are lower case, without a final period, and say what to do
// next where there is something to do. Both types are plain values: copy and
// move them freely between threads.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_STATUS_H
#define KILN_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::rt {

class [[nodiscard]] Status {
public:
  enum class Code {
    Ok,
    InvalidArgument,
    NotFound,
    Unavailable,
    OutOfMemory,
    Internal
  };

  static Status ok() { return Status(); }
  static Status invalidArgument(std::string msg) {
    return Status(Code::InvalidArgument, std::move(msg));
  }
  static Status notFound(std::string msg) {
    return Status(Code::NotFound, std::move(msg));
  }
  static Status unavailable(std::string msg) {
    return Status(Code::Unavailable, std::move(msg));
  }
  static Status outOfMemory(std::string msg) {
    return Status(Code::OutOfMemory, std::move(msg));
  }
  static Status internal(std::string msg) {
    return Status(Code::Internal, std::move(msg));
  }

  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}

  bool isOk() const { return code_ == Code::Ok; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return code_; }
  const std::string &message() const { return message_; }
  /// "not found: <message>", or "ok".
  std::string toString() const;

private:
  Status() = default;

  Code code_ = Code::Ok;
  std::string message_;
};

/// "ok", "invalid argument", "not found", "unavailable", "out of memory",
/// "internal".
std::string_view codeName(Status::Code code);

/// Either a value or a (non-ok) Status.
template <class T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  /// `status` must not be ok; an ok status is a bug in the caller and becomes
  /// an Internal error in release builds rather than an empty value.
  StatusOr(Status status) : status_(std::move(status)) {
    assert(!status_.isOk() && "StatusOr constructed from an ok Status");
    if (status_.isOk())
      status_ = Status::internal("StatusOr constructed from an ok status");
  }

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }

  // Reading the value of an error is a bug: asserted, not reported.
  T &value() & {
    assert(isOk() && "value() of an error StatusOr");
    return *value_;
  }
  const T &value() const & {
    assert(isOk() && "value() of an error StatusOr");
    return *value_;
  }
  T &&value() && {
    assert(isOk() && "value() of an error StatusOr");
    return std::move(*value_);
  }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T &&operator*() && { return std::move(*this).value(); }

private:
  Status status_ = Status::ok();
  std::optional<T> value_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_STATUS_H
