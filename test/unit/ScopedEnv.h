//===- ScopedEnv.h - an environment variable set for one scope ---*- C++ -*-===//
//
// Shared by the unit test binaries: sets (or, with null, unsets) a variable
// and restores its old value when the scope ends.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_SCOPEDENV_H
#define KILN_TEST_UNIT_SCOPEDENV_H

#include <cstdlib>
#include <optional>
#include <string>

namespace kiln::test {

class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *old = std::getenv(name))
      previous = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (previous)
      setenv(name, previous->c_str(), 1);
    else
      unsetenv(name);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name;
  std::optional<std::string> previous;
};

} // namespace kiln::test

#endif // KILN_TEST_UNIT_SCOPEDENV_H
