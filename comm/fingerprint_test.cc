#include "comm/fingerprint.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

CollectiveFingerprint Fp(int64_t seq, CommOp op, int64_t count, DType dtype, int root = -1,
                         ReduceOp rop = ReduceOp::kSum) {
  return CollectiveFingerprint{seq, op, count, dtype, root, rop};
}

TEST(FingerprintTest, EncodeDecodeRoundTrips) {
  const CollectiveFingerprint fp = Fp(118, CommOp::kBroadcast, 1 << 22, DType::kBF16, 3, ReduceOp::kMax);
  const auto words = fp.Encode();
  EXPECT_EQ(CollectiveFingerprint::Decode(words.data()), fp);
}

TEST(FingerprintTest, AllToAllAndI8RoundTrip) {
  const CollectiveFingerprint fp = Fp(3, CommOp::kAllToAll, 7, DType::kI8);
  const auto words = fp.Encode();
  const CollectiveFingerprint back = CollectiveFingerprint::Decode(words.data());
  EXPECT_EQ(back, fp);
  EXPECT_EQ(back.op, CommOp::kAllToAll);
  EXPECT_EQ(back.dtype, DType::kI8);
}

TEST(FingerprintTest, Describe) {
  EXPECT_EQ(DescribeCollective(Fp(1, CommOp::kAllReduce, 1024, DType::kF32)), "AllReduce(f32, 1024)");
  EXPECT_EQ(DescribeCollective(Fp(1, CommOp::kAllReduce, 8, DType::kBF16, -1, ReduceOp::kMax)),
            "AllReduce(bf16, 8, max)");
  EXPECT_EQ(DescribeCollective(Fp(1, CommOp::kBroadcast, 4, DType::kI32, 2)), "Broadcast(i32, 4, root 2)");
  EXPECT_EQ(DescribeCollective(Fp(1, CommOp::kBarrier, 0, DType::kF32)), "Barrier()");
  EXPECT_EQ(DescribeCollective(Fp(1, CommOp::kSplit, 0, DType::kF32)), "Split()");
  EXPECT_EQ(DescribeCollective(Fp(1, CommOp::kAllToAll, 7, DType::kI8)), "AllToAll(i8, 7)");
}

TEST(FingerprintTest, AllEqualIsNoMismatch) {
  std::vector<CollectiveFingerprint> fps(3, Fp(5, CommOp::kAllGather, 7, DType::kF16));
  EXPECT_FALSE(DescribeMismatch("world", fps).has_value());
}

TEST(FingerprintTest, MismatchNamesRanksAndOps) {
  std::vector<CollectiveFingerprint> fps(4, Fp(118, CommOp::kReduceScatter, 4096, DType::kF32));
  fps[1] = Fp(118, CommOp::kAllGather, 1024, DType::kF32);
  auto msg = DescribeMismatch("dp", fps);
  ASSERT_TRUE(msg.has_value());
  EXPECT_EQ(*msg,
            "collective #118 mismatch in group dp: ranks 0,2,3 called ReduceScatter(f32, 4096), rank 1 called "
            "AllGather(f32, 1024)");
}

// Same count and dtype: only the op tells them apart.
TEST(FingerprintTest, AllToAllAgainstAllGatherIsAMismatch) {
  std::vector<CollectiveFingerprint> fps(3, Fp(4, CommOp::kAllToAll, 16, DType::kBF16));
  fps[2] = Fp(4, CommOp::kAllGather, 16, DType::kBF16);
  EXPECT_EQ(*DescribeMismatch("tp", fps),
            "collective #4 mismatch in group tp: ranks 0,1 called AllToAll(bf16, 16), rank 2 called "
            "AllGather(bf16, 16)");
}

TEST(FingerprintTest, MismatchInSequenceRootAndReduceOp) {
  std::vector<CollectiveFingerprint> fps = {
      Fp(7, CommOp::kBroadcast, 4, DType::kI32, 0), Fp(6, CommOp::kBroadcast, 4, DType::kI32, 0),
      Fp(7, CommOp::kBroadcast, 4, DType::kI32, 1)};
  EXPECT_EQ(*DescribeMismatch("tp", fps),
            "collective #7 mismatch in group tp: rank 0 called Broadcast(i32, 4, root 0), rank 1 called #6 "
            "Broadcast(i32, 4, root 0), rank 2 called Broadcast(i32, 4, root 1)");
  std::vector<CollectiveFingerprint> ops = {Fp(2, CommOp::kAllReduce, 3, DType::kF32, -1, ReduceOp::kSum),
                                            Fp(2, CommOp::kAllReduce, 3, DType::kF32, -1, ReduceOp::kMax)};
  EXPECT_EQ(*DescribeMismatch("world", ops),
            "collective #2 mismatch in group world: rank 0 called AllReduce(f32, 3), rank 1 called "
            "AllReduce(f32, 3, max)");
}

TEST(FingerprintTest, JoinRanks) {
  EXPECT_EQ(JoinRanks({}), "");
  EXPECT_EQ(JoinRanks({2}), "2");
  EXPECT_EQ(JoinRanks({0, 2, 3}), "0,2,3");
}

}  // namespace
}  // namespace zeroshard
