#include "engine/shard_group.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

EngineConfig PerHost(int dp, int tp, int pp) {
  EngineConfig c;
  c.mutable_parallel()->set_dp(dp);
  c.mutable_parallel()->set_tp(tp);
  c.mutable_parallel()->set_pp(pp);
  c.mutable_zero()->set_shard_group(ZeroConfig::PER_HOST);
  return c;
}

const HostTopology kTwoByTwo = HostTopologyFromKeys({0, 0, 2, 2}, {"zs-h0", "zs-h0", "zs-h1", "zs-h1"});

TEST(ShardGroupTest, PerHostBecomesShardGroupSizeOfOneHost) {
  EngineConfig c = PerHost(4, 1, 1);
  ASSERT_TRUE(ResolveShardGroup(kTwoByTwo, &c).ok());
  EXPECT_EQ(c.zero().shard_group(), ZeroConfig::SIZE);
  EXPECT_EQ(c.zero().shard_group_size(), 2);
  // tp 2 inside each host: one dp rank per host, replicated across hosts.
  EngineConfig tp = PerHost(2, 2, 1);
  ASSERT_TRUE(ResolveShardGroup(kTwoByTwo, &tp).ok());
  EXPECT_EQ(tp.zero().shard_group_size(), 1);
}

TEST(ShardGroupTest, OneHostIsFlatSharding) {
  EngineConfig c = PerHost(4, 1, 1);
  ASSERT_TRUE(ResolveShardGroup(HostTopologyFromKeys({0, 0, 0, 0}, {"a", "a", "a", "a"}), &c).ok());
  EXPECT_FALSE(c.zero().has_shard_group_size());
  EXPECT_EQ(c.zero().shard_group_size(), 0);
}

TEST(ShardGroupTest, SizeIsLeftAlone) {
  EngineConfig c = PerHost(4, 1, 1);
  c.mutable_zero()->set_shard_group(ZeroConfig::SIZE);
  c.mutable_zero()->set_shard_group_size(4);
  ASSERT_TRUE(ResolveShardGroup(kTwoByTwo, &c).ok());
  EXPECT_EQ(c.zero().shard_group_size(), 4);
}

TEST(ShardGroupTest, RefusesUnevenHostsByName) {
  EngineConfig c = PerHost(4, 1, 1);
  const absl::Status s = ResolveShardGroup(HostTopologyFromKeys({0, 0, 0, 3}, {"zs-h0", "zs-h0", "zs-h0", "zs-h1"}), &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "engine.zero.shard_group: PER_HOST needs the same number of ranks on every host; ranks per host: host 0 "
            "(zs-h0) 3, host 1 (zs-h1) 1; use SIZE with engine.zero.shard_group_size");
}

TEST(ShardGroupTest, RefusesRoundRobinPlacementAndSplitTpGroups) {
  EngineConfig c = PerHost(4, 1, 1);
  absl::Status s = ResolveShardGroup(HostTopologyFromKeys({0, 1, 0, 1}, {"a", "b", "a", "b"}), &c);
  EXPECT_EQ(s.message(),
            "engine.zero.shard_group: PER_HOST needs world ranks placed in blocks of 2 per host; world rank 1 runs on "
            "host 1 (b), expected host 0; launch with mpirun --map-by slot");
  EngineConfig tp = PerHost(1, 4, 1);
  s = ResolveShardGroup(kTwoByTwo, &tp);
  EXPECT_EQ(s.message(),
            "engine.zero.shard_group: PER_HOST with 2 ranks per host needs them to hold whole tp groups (tp 4) of one "
            "pipeline stage (dp*tp = 4); expected ranks per host to be a multiple of tp and to divide dp*tp");
}

}  // namespace
}  // namespace zeroshard
