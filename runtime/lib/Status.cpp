//===- Status.cpp - Error values of the Kiln runtime ----------------------===//
//
// Names of status codes; Status itself is a header-only value type.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Status.h"

namespace kiln::rt {

std::string_view codeName(Status::Code code) {
  switch (code) {
  case Status::Code::Ok:
    return "ok";
  case Status::Code::InvalidArgument:
    return "invalid argument";
  case Status::Code::NotFound:
    return "not found";
  case Status::Code::Unavailable:
    return "unavailable";
  case Status::Code::OutOfMemory:
    return "out of memory";
  case Status::Code::Internal:
    return "internal";
  }
  return "unknown";
}

std::string Status::toString() const {
  if (isOk())
    return "ok";
  return std::string(codeName(code_)) + ": " + message_;
}

} // namespace kiln::rt
