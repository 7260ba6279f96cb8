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

TEST(HostTopologyTest, InterHostBytesCountGroupsThatSpanHosts) {
  const HostTopology t = HostTopologyFromKeys({0, 0, 2, 2}, {"a", "a", "b", "b"});
  EXPECT_FALSE(SpansHosts(t, {0, 1}));
  EXPECT_FALSE(SpansHosts(t, {3}));
  EXPECT_TRUE(SpansHosts(t, {1, 3}));
  EXPECT_TRUE(SpansHosts(t, {0, 1, 2, 3}));
  EXPECT_TRUE(SpansHosts(t, {3, 7}));  // 7 is outside the table: a host of its own
  const std::map<std::string, int64_t> bytes = {{"dp_shard", 1000}, {"dp_replica", 30}, {"world", 4}, {"tp", 7}};
  const std::map<std::string, std::vector<int>> members = {
      {"dp_shard", {2, 3}}, {"dp_replica", {1, 3}}, {"world", {0, 1, 2, 3}}};
  // tp lists no members: counted, since there are two hosts.
  EXPECT_EQ(InterHostBytesSent(t, bytes, members), 30 + 4 + 7);
  const HostTopology one = HostTopologyFromKeys({0, 0, 0, 0}, {"a", "a", "a", "a"});
  EXPECT_EQ(InterHostBytesSent(one, bytes, members), 0);
}

}  // namespace
}  // namespace zeroshard
