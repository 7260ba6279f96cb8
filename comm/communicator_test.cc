#include "comm/communicator.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(EvenShardCountTest, Divides) {
  auto n = EvenShardCount(12, 3);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 4);
  EXPECT_EQ(*EvenShardCount(0, 4), 0);
}

TEST(EvenShardCountTest, UnevenCountIsRejectedWithPadding) {
  auto n = EvenShardCount(10, 3);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(n.status().message(), "element count 10 does not split evenly over 3 ranks; pad it to 12");
}

TEST(EvenShardCountTest, BadArguments) {
  EXPECT_EQ(EvenShardCount(-1, 2).status().message(), "element count -1 must be >= 0");
  EXPECT_EQ(EvenShardCount(4, 0).status().message(), "rank count 0 must be positive");
}

TEST(ReduceOpNameTest, Names) {
  EXPECT_STREQ(ReduceOpName(ReduceOp::kSum), "sum");
  EXPECT_STREQ(ReduceOpName(ReduceOp::kAvg), "avg");
  EXPECT_STREQ(ReduceOpName(ReduceOp::kMax), "max");
}

}  // namespace
}  // namespace zeroshard
