#include "comm/comm_stats.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(CommStatsTest, RingVolumesPerOp) {
  CommStats s;
  s.Record(CommOp::kAllGather, 4, 1000, false);
  s.Record(CommOp::kReduceScatter, 4, 1000, false);
  s.Record(CommOp::kAllReduce, 4, 1000, false);
  s.Record(CommOp::kBroadcast, 4, 64, true);
  s.Record(CommOp::kBroadcast, 4, 64, false);
  s.Record(CommOp::kSend, 4, 12, false);
  s.Record(CommOp::kRecv, 4, 20, false);
  s.Record(CommOp::kBarrier, 4, 0, false);
  EXPECT_EQ(s[CommOp::kAllGather].calls, 1);
  EXPECT_EQ(s[CommOp::kAllGather].bytes_sent, 3000);
  EXPECT_EQ(s[CommOp::kAllGather].bytes_received, 3000);
  EXPECT_EQ(s[CommOp::kReduceScatter].bytes_sent, 3000);
  EXPECT_EQ(s[CommOp::kAllReduce].bytes_sent, 1500);
  EXPECT_EQ(s[CommOp::kAllReduce].bytes_received, 1500);
  EXPECT_EQ(s[CommOp::kBroadcast].calls, 2);
  EXPECT_EQ(s[CommOp::kBroadcast].bytes_sent, 64);
  EXPECT_EQ(s[CommOp::kBroadcast].bytes_received, 64);
  EXPECT_EQ(s[CommOp::kSend].bytes_sent, 12);
  EXPECT_EQ(s[CommOp::kSend].bytes_received, 0);
  EXPECT_EQ(s[CommOp::kRecv].bytes_received, 20);
  EXPECT_EQ(s[CommOp::kBarrier].calls, 1);
  const OpCounters total = s.Total();
  EXPECT_EQ(total.calls, 8);
  EXPECT_EQ(total.bytes_sent, 3000 + 3000 + 1500 + 64 + 12);
  EXPECT_EQ(total.bytes_received, 3000 + 3000 + 1500 + 64 + 20);
}

// Every rank keeps its own block and exchanges the other n-1: (n-1)/n of
// the n-block input out, as much in.
TEST(CommStatsTest, AllToAllMovesAllButTheOwnBlock) {
  CommStats s;
  s.Record(CommOp::kAllToAll, 4, 1000, false);
  EXPECT_EQ(s[CommOp::kAllToAll].calls, 1);
  EXPECT_EQ(s[CommOp::kAllToAll].bytes_sent, 3000);
  EXPECT_EQ(s[CommOp::kAllToAll].bytes_received, 3000);
  s.Record(CommOp::kAllToAll, 3, 7 * 4, false);  // 7 f32 per block
  EXPECT_EQ(s[CommOp::kAllToAll].calls, 2);
  EXPECT_EQ(s[CommOp::kAllToAll].bytes_sent, 3000 + 2 * 28);
  EXPECT_EQ(s[CommOp::kAllToAll].bytes_received, 3000 + 2 * 28);
  s.Record(CommOp::kAllToAll, 1, 4096, false);  // a group of one
  s.Record(CommOp::kAllToAll, 4, 0, false);     // count 0
  EXPECT_EQ(s[CommOp::kAllToAll].calls, 4);
  EXPECT_EQ(s[CommOp::kAllToAll].bytes_sent, 3000 + 2 * 28);
  EXPECT_EQ(s.Total().bytes_received, 3000 + 2 * 28);
  // Counted in its own slot, not in another op's.
  EXPECT_EQ(s[CommOp::kAllGather].calls, 0);
  EXPECT_EQ(s[CommOp::kSplit].calls, 0);
  const CommStats d = s - CommStats();
  EXPECT_EQ(d[CommOp::kAllToAll].bytes_sent, 3000 + 2 * 28);
}

TEST(CommStatsTest, GroupOfOneMovesNothing) {
  CommStats s;
  s.Record(CommOp::kAllReduce, 1, 4096, false);
  s.Record(CommOp::kAllGather, 1, 4096, false);
  s.Record(CommOp::kBroadcast, 1, 4096, true);
  EXPECT_EQ(s.Total().calls, 3);
  EXPECT_EQ(s.Total().bytes_sent, 0);
  EXPECT_EQ(s.Total().bytes_received, 0);
}

TEST(CommStatsTest, DifferenceAndReset) {
  CommStats s;
  s.Record(CommOp::kAllReduce, 2, 100, false);
  const CommStats before = s;
  s.Record(CommOp::kAllReduce, 2, 100, false);
  s.Record(CommOp::kSend, 2, 8, false);
  const CommStats d = s - before;
  EXPECT_EQ(d[CommOp::kAllReduce].calls, 1);
  EXPECT_EQ(d[CommOp::kAllReduce].bytes_sent, 100);
  EXPECT_EQ(d[CommOp::kSend].bytes_sent, 8);
  EXPECT_EQ(d[CommOp::kAllGather].calls, 0);
  s.Reset();
  EXPECT_EQ(s.Total().calls, 0);
  EXPECT_EQ(s.Total().bytes_sent, 0);
}

TEST(CommStatsTest, OpNames) {
  EXPECT_STREQ(CommOpName(CommOp::kAllGather), "AllGather");
  EXPECT_STREQ(CommOpName(CommOp::kReduceScatter), "ReduceScatter");
  EXPECT_STREQ(CommOpName(CommOp::kAllReduce), "AllReduce");
  EXPECT_STREQ(CommOpName(CommOp::kBroadcast), "Broadcast");
  EXPECT_STREQ(CommOpName(CommOp::kSplit), "Split");
  EXPECT_STREQ(CommOpName(CommOp::kAllToAll), "AllToAll");
}

// AllToAll was appended: the earlier ops keep their numbers (they travel in
// debug-checks fingerprints).
TEST(CommStatsTest, OpNumberingIsStable) {
  EXPECT_EQ(static_cast<int>(CommOp::kAllGather), 0);
  EXPECT_EQ(static_cast<int>(CommOp::kSplit), 7);
  EXPECT_EQ(static_cast<int>(CommOp::kAllToAll), 8);
  EXPECT_EQ(kNumCommOps, 9);
  EXPECT_EQ(CommStats().per_op.size(), 9u);
}

}  // namespace
}  // namespace zeroshard
