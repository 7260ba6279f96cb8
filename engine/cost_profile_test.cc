#include "engine/cost_profile.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/file_io.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::string Span(int pid, int tid, const std::string& cat, const std::string& name, double ts, double dur,
                 const std::string& args = "{}") {
  return absl::StrCat(R"({"ph":"X","pid":)", pid, R"(,"tid":)", tid, R"(,"cat":")", cat, R"(","name":")", name,
                      R"(","ts":)", ts, R"(,"dur":)", dur, R"(,"args":)", args, "}");
}

// Two ranks of a dp 2 run: unit h.0 fused, unit h.1 split; a dp link of
// 10 us latency and 1 GB/s (an all-gather of B bytes in all over 2 ranks
// costs 10 us + B / 2 ns).
std::string Trace() {
  std::string events;
  auto add = [&](const std::string& e) { absl::StrAppend(&events, events.empty() ? "" : ",", e); };
  for (int r = 0; r < 2; ++r) {
    add(Span(r, 0, "step", "step 1", 0, 9000, R"({"step":1,"micro_batch_elements":256})"));
    add(Span(r, 0, "step", "step 2", 9000, r == 0 ? 10000 : 12000, R"({"step":2,"micro_batch_elements":256})"));
    add(Span(r, 0, "forward", "forward h.0", 0, 100 + 100 * r));
    add(Span(r, 0, "forward", "forward h.0", 500, 150));
    add(Span(r, 0, "forward", "forward h.1", 1000, 300));
    add(Span(r, 0, "backward", "backward h.1", 2000, 400));
    add(Span(r, 0, "backward", "backward weight h.1", 2500, 500));
    add(Span(r, 0, "backward", "backward h.0", 3000, 800));
    add(Span(r, 0, "recompute", "recompute h.0", 2900, 90));
    add(Span(r, 0, "optimizer", "update", 4000, 1000, R"({"bucket":0,"elements":500})"));
    add(Span(r, 0, "optimizer", "update", 5000, 1000, R"({"bucket":1,"elements":1500})"));
    add(Span(r, 1, "gather", "AllGather h.0", 0, 1010, R"({"bytes":2000000,"queued_us":0})"));
    add(Span(r, 1, "reduce_scatter", "ReduceScatter grads h.0", 3000, 2010, R"({"bytes":4000000,"queued_us":0})"));
    add(Span(r, 1, "gather", "AllGather int8 h.1", 0, 5, R"({"bytes":2000000,"queued_us":0})"));
    add(Span(r, 1, "allreduce", "AllReduce grad norm", 6000, 70, R"({"bytes":28,"queued_us":0})"));
  }
  return absl::StrCat(R"({"traceEvents":[)", events,
                      R"(],"otherData":{"zero_stage":3,"dp":2,"shard_group_size":2,"tp":1,)",
                      R"("compute_dtype":"f32","traced_steps":2}})");
}

TEST(CostProfileTest, MediansPerUnitOptimizerRateAndAFittedLink) {
  absl::StatusOr<CostProfile> p = CostProfileFromTrace(Trace(), "t.json");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->source(), "t.json");
  EXPECT_EQ(p->traced_ranks(), 2);
  EXPECT_EQ(p->traced_steps(), 2);
  EXPECT_EQ(p->zero_stage(), 3);
  EXPECT_EQ(p->dp(), 2);
  EXPECT_EQ(p->compute_dtype(), "f32");
  EXPECT_EQ(p->micro_batch_elements(), 256);
  ASSERT_EQ(p->units_size(), 2);
  const UnitCost* h0 = FindUnitCost(*p, "h.0");
  const UnitCost* h1 = FindUnitCost(*p, "h.1");
  ASSERT_NE(h0, nullptr);
  ASSERT_NE(h1, nullptr);
  // h.0's forwards: 100, 150 (rank 0), 200, 150 (rank 1): median 150 us.
  EXPECT_DOUBLE_EQ(h0->forward_seconds(), 150e-6);
  EXPECT_DOUBLE_EQ(h0->backward_input_seconds(), 800e-6);
  EXPECT_FALSE(h0->split_measured());
  EXPECT_DOUBLE_EQ(h0->recompute_seconds(), 90e-6);
  EXPECT_TRUE(h1->split_measured());
  EXPECT_DOUBLE_EQ(h1->backward_input_seconds(), 400e-6);
  EXPECT_DOUBLE_EQ(h1->backward_weight_seconds(), 500e-6);
  EXPECT_DOUBLE_EQ(h1->recompute_seconds(), h1->forward_seconds());  // never recomputed
  // 4000 us of updates over 4000 elements.
  EXPECT_DOUBLE_EQ(p->optimizer_seconds_per_element(), 1e-6);
  // The int8 gather and the scalar all-reduce stay out of the fit.
  ASSERT_EQ(p->links_size(), 1);
  const LinkCost* dp = FindLinkCost(*p, "dp");
  ASSERT_NE(dp, nullptr);
  EXPECT_EQ(dp->samples(), 4);
  EXPECT_NEAR(dp->latency_seconds(), 10e-6, 1e-9);
  EXPECT_NEAR(dp->bytes_per_second(), 1e9, 1e3);
  // Rank 1's median step (10.5 ms) is the slower.
  EXPECT_DOUBLE_EQ(p->measured_step_seconds(), 10.5e-3);
}

TEST(CostProfileTest, OverlappedSpansCountAtTheSharedCoreRate) {
  // 2 ranks of 1 compute thread on 2 cores: alone a thread has a core,
  // with both comm threads running each gets half of one.
  std::string events;
  for (int r = 0; r < 2; ++r) {
    absl::StrAppend(&events, r == 0 ? "" : ",", Span(r, 0, "forward", "forward h.0", 0, 1000), ",",
                    Span(r, 0, "backward", "backward h.0", 2000, 400), ",",
                    Span(r, 0, "optimizer", "update", 3000, 100, R"({"bucket":0,"elements":100})"), ",",
                    Span(r, 1, "gather", "AllGather h.0", 500, 1000, R"({"bytes":1000,"queued_us":0})"), ",",
                    // A pipeline receive blocked on the comm thread: no contention.
                    Span(r, 1, "wait", "Recv header", 2000, 400, R"({"bytes":64,"queued_us":0})"));
  }
  const std::string trace = absl::StrCat(R"({"traceEvents":[)", events,
                                         R"(],"otherData":{"dp":2,"shard_group_size":2,"host_cores":2,)",
                                         R"("ranks_on_host":2,"threads_per_rank":1}})");
  absl::StatusOr<CostProfile> p = CostProfileFromTrace(trace, "shared.json");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->host_cores(), 2);
  EXPECT_EQ(p->ranks_on_host(), 2);
  EXPECT_EQ(p->threads_per_rank(), 1);
  // Half of the forward ran beside the gather: 500 + 500 / 2 us.
  EXPECT_DOUBLE_EQ(FindUnitCost(*p, "h.0")->forward_seconds(), 750e-6);
  EXPECT_DOUBLE_EQ(FindUnitCost(*p, "h.0")->backward_input_seconds(), 400e-6);
  EXPECT_DOUBLE_EQ(p->optimizer_seconds_per_element(), 1e-6);
  // The gather likewise: 500 / 2 beside the forward, 500 alone; one size,
  // so all of it is bandwidth (500 wire bytes).
  EXPECT_NEAR(FindLinkCost(*p, "dp")->bytes_per_second(), 500 / 750e-6, 1e-3);
  EXPECT_EQ(FindLinkCost(*p, "dp")->latency_seconds(), 0);
  EXPECT_DOUBLE_EQ((CoreShare{2, 2, 1}.Rate(true)), 0.5);
  EXPECT_DOUBLE_EQ((CoreShare{2, 2, 1}.Rate(false)), 1.0);
  EXPECT_DOUBLE_EQ((CoreShare{2, 4, 1}.Rate(false)), 0.5);
  EXPECT_DOUBLE_EQ((CoreShare{0, 4, 1}.Rate(true)), 1.0);
}

TEST(CostProfileTest, RingCostsPerCollective) {
  LinkCost link;
  link.set_latency_seconds(1e-5);
  link.set_bytes_per_second(1e9);
  // 4 ranks, 1e6 bytes each: 3 steps of 10 us + 1 ms.
  EXPECT_NEAR(CollectiveSeconds("AllGather", 1000000, 4, link), 3 * (1e-5 + 1e-3), 1e-12);
  EXPECT_NEAR(CollectiveSeconds("ReduceScatter", 1000000, 4, link), 3 * (1e-5 + 1e-3), 1e-12);
  // A 4e6-byte all-reduce: reduce-scatter then all-gather of 1e6-byte pieces.
  EXPECT_NEAR(CollectiveSeconds("AllReduce", 4000000, 4, link), 6 * (1e-5 + 1e-3), 1e-12);
  EXPECT_NEAR(CollectiveSeconds("Send", 1000000, 2, link), 1e-5 + 1e-3, 1e-12);
  EXPECT_EQ(CollectiveSeconds("AllReduce", 4000000, 1, link), 0);
}

TEST(CostProfileTest, TracesThatCannotProfileAreRefusedNamingTheFile) {
  EXPECT_EQ(CostProfileFromTrace("{", "bad.json").status().message(), "bad.json: not valid JSON");
  const std::string no_units = R"({"traceEvents":[)" +
                               Span(0, 0, "optimizer", "update", 0, 10, R"({"bucket":0,"elements":5})") + "]}";
  absl::Status s = CostProfileFromTrace(no_units, "eval.json").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("eval.json: no unit has both"), std::string::npos) << s;
  const std::string no_elements = R"({"traceEvents":[)" + Span(0, 0, "forward", "forward h.0", 0, 10) + "," +
                                  Span(0, 0, "backward", "backward h.0", 10, 10) + "," +
                                  Span(0, 0, "optimizer", "update", 20, 10, R"({"bucket":0})") + "]}";
  s = CostProfileFromTrace(no_elements, "old.json").status();
  EXPECT_NE(s.message().find("old.json: no optimizer \"update\" span carries \"elements\""), std::string::npos) << s;
}

TEST(CostProfileTest, WrittenProfilesReadBackAndBadOnesAreRefused) {
  absl::StatusOr<CostProfile> p = CostProfileFromTrace(Trace(), "t.json");
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string path = JoinPath(testing::TempDir(), "profile.pbtxt");
  ASSERT_TRUE(WriteCostProfile(*p, path).ok());
  EXPECT_FALSE(PathExists(path + ".tmp"));
  absl::StatusOr<CostProfile> back = ReadCostProfile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), p->SerializeAsString());

  const std::string negative = JoinPath(testing::TempDir(), "negative.pbtxt");
  ASSERT_TRUE(WriteFileDurably(negative, {"units { name: \"h.0\" forward_seconds: -1 }"}).ok());
  EXPECT_EQ(ReadCostProfile(negative).status().message(),
            absl::StrCat(negative, ": units 'h.0' forward_seconds is -1; expected >= 0"));
  const std::string garbage = JoinPath(testing::TempDir(), "garbage.pbtxt");
  ASSERT_TRUE(WriteFileDurably(garbage, {"units {"}).ok());
  EXPECT_NE(ReadCostProfile(garbage).status().message().find("not a cost profile in text format"),
            std::string::npos);
}

}  // namespace
}  // namespace zeroshard
