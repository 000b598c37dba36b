// Test main: a private cache folder for Mesa, two logical devices per
// adapter (so cross-device graphs exist on one GPU), the Khronos validation
// layer on (and a final check that it reported nothing), and kernel results
// poisoned with NaN before each run.

#include "kiln/runtime/Vulkan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <thread>
#include <string>

namespace {
class ValidationEnvironment : public ::testing::Environment {
public:
  void TearDown() override {
    EXPECT_EQ(kiln::rt::VulkanContext::validationMessagesInProcess(), 0u)
        << "the Vulkan validation layer reported problems (see stderr)";
  }
};
} // namespace

int kilnTuningChild(const char *report); // TuningTest.cpp

int main(int argc, char **argv) {
  // A child process of the WarmStart tests: runs a block and reports.
  if (const char *report = std::getenv("KILN_TUNING_CHILD_REPORT"))
    return kilnTuningChild(report);
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("kiln-api-tests-" + std::to_string(::getpid())))
                        .string();
  std::filesystem::create_directories(dir + "/mesa");
  setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  setenv("MESA_SHADER_CACHE_DIR", (dir + "/mesa").c_str(), 1);
  setenv("KILN_VIRTUAL_DEVICES", "2", 0);
  setenv("KILN_VULKAN_VALIDATION", "1", 0);
  setenv("KILN_POISON_OUTPUTS", "1", 0); // unwritten results read as NaN
  unsetenv("KILN_DEVICE");
  unsetenv("KILN_TRANSFER_POLICY");
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new ValidationEnvironment);
  int result = RUN_ALL_TESTS();
  // Mesa may still be writing its shader cache from a thread of its own: a
  // file appearing during the removal must not turn a passing run into an
  // abort (it did, once in a CI run). Retry, and never throw.
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::error_code error;
    std::filesystem::remove_all(dir, error);
    if (!error)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return result;
}
