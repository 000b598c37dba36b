//===- TestEnvironment.cpp - Process setup for runtime tests --------------===//
//
// Mesa writes its shader cache under ~/.cache; the tests point it (and
// XDG_CACHE_HOME) at a temporary folder, set before any context exists and
// removed at the end. KILN_* variables from the caller's shell are cleared
// so that they cannot change what the tests see.
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace {

class CacheDirEnvironment : public ::testing::Environment {
public:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "kiln-runtime-tests-XXXXXX")
            .string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr)
        << "cannot create a temporary folder";
    dir = pattern;
    setenv("XDG_CACHE_HOME", dir.c_str(), 1);
    setenv("MESA_SHADER_CACHE_DIR", (dir + "/mesa").c_str(), 1);
    unsetenv("KILN_VIRTUAL_DEVICES");
    unsetenv("KILN_VULKAN_VALIDATION");
  }

  void TearDown() override {
    std::error_code ignored;
    if (!dir.empty())
      std::filesystem::remove_all(dir, ignored);
  }

private:
  std::string dir;
};

[[maybe_unused]] ::testing::Environment *const cacheDirEnvironment =
    ::testing::AddGlobalTestEnvironment(new CacheDirEnvironment);

} // namespace
