//===- VulkanTestUtil.h - Fixture for Vulkan runtime tests ------*- C++ -*-===//
//
// Each test gets a fresh context with the validation layer on; any
// validation message during the test or the context's teardown fails it.
// Without a Vulkan driver the test is skipped with the reason, not passed.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_RUNTIME_VULKANTESTUTIL_H
#define KILN_TEST_UNIT_RUNTIME_VULKANTESTUTIL_H

#include "kiln/runtime/Vulkan.h"

#include <gtest/gtest.h>

#include <memory>

namespace kiln::rt::test {

class VulkanTest : public ::testing::Test {
protected:
  virtual ContextOptions options() const {
    ContextOptions options;
    options.validation = true;
    return options;
  }

  void SetUp() override {
    messagesBefore = VulkanContext::validationMessagesInProcess();
    StatusOr<std::unique_ptr<VulkanContext>> created =
        VulkanContext::create(options());
    if (!created.isOk() && created.status().code() == Status::Code::Unavailable)
      GTEST_SKIP() << "Vulkan is not available: " << created.status().message();
    ASSERT_TRUE(created.isOk()) << created.status().toString();
    context = std::move(*created);
    StatusOr<VulkanDevice *> first = context->device(0);
    ASSERT_TRUE(first.isOk()) << first.status().toString();
    device = *first;
  }

  void TearDown() override {
    device = nullptr;
    context.reset();
    EXPECT_EQ(VulkanContext::validationMessagesInProcess() - messagesBefore, 0u)
        << "the Vulkan validation layer reported the messages printed above";
  }

  std::unique_ptr<VulkanContext> context;
  VulkanDevice *device = nullptr;
  uint64_t messagesBefore = 0;
};

/// ASSERT that a StatusOr is ok and bind its value.
#define KILN_ASSERT_OK_AND_ASSIGN(lhs, expr)                                   \
  auto lhs##OrError = (expr);                                                  \
  ASSERT_TRUE(lhs##OrError.isOk()) << lhs##OrError.status().toString();        \
  auto lhs = std::move(*lhs##OrError)

#define KILN_ASSERT_OK(expr)                                                   \
  do {                                                                         \
    ::kiln::rt::Status kilnStatus_ = (expr);                                   \
    ASSERT_TRUE(kilnStatus_.isOk()) << kilnStatus_.toString();                 \
  } while (false)

} // namespace kiln::rt::test

#endif // KILN_TEST_UNIT_RUNTIME_VULKANTESTUTIL_H
