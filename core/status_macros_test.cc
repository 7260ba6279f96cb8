#include "core/status_macros.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status Check(int x) { return x < 0 ? absl::OutOfRangeError("negative") : absl::OkStatus(); }

absl::StatusOr<int> Quarter(int x) {
  RETURN_IF_ERROR(Check(x));
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusMacrosTest, PropagatesFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(-4).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);  // 6 -> 3 is odd.
  EXPECT_EQ(Quarter(6).status().message(), "odd");
}

}  // namespace
}  // namespace zeroshard
