#include "comm/host_topology.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(HostTopologyTest, HostsNumberedByLowestRank) {
  // Keys are each host's lowest world rank, as DetectHostTopology gathers.
  const HostTopology t = HostTopologyFromKeys({0, 0, 2, 2}, {"zs-h0", "zs-h0", "zs-h1", "zs-h1"});
  EXPECT_EQ(t.hosts(), 2);
  EXPECT_EQ(t.host_of_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(t.ranks_on_host, (std::vector<int>{2, 2}));
  EXPECT_EQ(t.host_names, (std::vector<std::string>{"zs-h0", "zs-h1"}));
  EXPECT_EQ(t.ranks_per_host(), 2);
  EXPECT_TRUE(t.placed_in_blocks());
  EXPECT_EQ(t.Describe(), "hosts 2 x 2 ranks");
  EXPECT_EQ(TpSpansHostsWarning(t, 2), "");
}

TEST(HostTopologyTest, UnevenAndRoundRobin) {
  const HostTopology uneven = HostTopologyFromKeys({0, 0, 0, 3}, {"a", "a", "a", "b"});
  EXPECT_EQ(uneven.ranks_per_host(), 0);
  EXPECT_FALSE(uneven.placed_in_blocks());
  EXPECT_EQ(uneven.Describe(), "hosts 2 (uneven: 3, 1 ranks)");
  const HostTopology rr = HostTopologyFromKeys({0, 1, 0, 1}, {"a", "b", "a", "b"});
  EXPECT_EQ(rr.ranks_per_host(), 2);
  EXPECT_FALSE(rr.placed_in_blocks());
  EXPECT_EQ(rr.host_of_rank, (std::vector<int>{0, 1, 0, 1}));
}

TEST(HostTopologyTest, WarnsWhenTpGroupSpansHosts) {
  const HostTopology t = HostTopologyFromKeys({0, 0, 0, 3, 3, 3}, {"a", "a", "a", "b", "b", "b"});
  EXPECT_EQ(TpSpansHostsWarning(t, 3), "");
  EXPECT_EQ(TpSpansHostsWarning(t, 1), "");
  EXPECT_EQ(TpSpansHostsWarning(t, 2),
            "tp group of world ranks 2..3 spans hosts 0 (a) and 1 (b): its collectives cross the network; place "
            "ranks in blocks of a multiple of tp per host (hosts 2 x 3 ranks)");
}

}  // namespace
}  // namespace zeroshard
