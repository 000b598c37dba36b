//===- StatusTest.cpp - Status and StatusOr -------------------------------===//

#include "kiln/runtime/Status.h"

#include <gtest/gtest.h>

#include <memory>

namespace kiln::rt {
namespace {

TEST(StatusTest, OkAndErrors) {
  Status ok = Status::ok();
  EXPECT_TRUE(ok.isOk());
  EXPECT_TRUE(bool(ok));
  EXPECT_EQ(ok.code(), Status::Code::Ok);
  EXPECT_EQ(ok.toString(), "ok");

  Status missing(Status::Code::NotFound, "no such device");
  EXPECT_FALSE(missing.isOk());
  EXPECT_FALSE(bool(missing));
  EXPECT_EQ(missing.message(), "no such device");
  EXPECT_EQ(missing.toString(), "not found: no such device");
  EXPECT_EQ(Status::outOfMemory("x").code(), Status::Code::OutOfMemory);
}

TEST(StatusTest, StatusOrHoldsAValueOrAnError) {
  StatusOr<int> value(42);
  ASSERT_TRUE(value.isOk());
  EXPECT_TRUE(value.status().isOk());
  EXPECT_EQ(*value, 42);
  EXPECT_EQ(value.value(), 42);

  StatusOr<int> error(Status::invalidArgument("bad"));
  EXPECT_FALSE(error.isOk());
  EXPECT_EQ(error.status().code(), Status::Code::InvalidArgument);

  // Move-only values move out.
  StatusOr<std::unique_ptr<int>> owned(std::make_unique<int>(7));
  std::unique_ptr<int> taken = std::move(owned).value();
  EXPECT_EQ(*taken, 7);

  struct Point {
    int x;
  };
  StatusOr<Point> point(Point{3});
  EXPECT_EQ(point->x, 3);
}

} // namespace
} // namespace kiln::rt
