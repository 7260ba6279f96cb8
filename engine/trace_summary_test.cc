#include "engine/trace_summary.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Times in µs. Rank 0: steps of 10 and 30 ms; computation [0, 4000) and
// [3000, 6000) (union 6 ms); a gather [5000, 9000), 1 ms of it under
// computation; a reduce-scatter after it; a 2 ms wait. Rank 1: one step.
constexpr char kTrace[] = R"({"traceEvents":[
 {"ph":"M","name":"process_name","pid":0,"args":{"name":"rank 0"}},
 {"ph":"X","cat":"step","name":"step 1","pid":0,"tid":0,"ts":0,"dur":10000},
 {"ph":"X","cat":"step","name":"step 2","pid":0,"tid":0,"ts":10000,"dur":30000},
 {"ph":"X","cat":"forward","name":"forward h.0","pid":0,"tid":0,"ts":0,"dur":4000},
 {"ph":"X","cat":"backward","name":"backward h.0","pid":0,"tid":0,"ts":3000,"dur":3000},
 {"ph":"X","cat":"optimizer","name":"optimizer","pid":0,"tid":0,"ts":20000,"dur":5000},
 {"ph":"X","cat":"wait","name":"wait AllGather h.1","pid":0,"tid":0,"ts":7000,"dur":2000},
 {"ph":"X","cat":"gather","name":"AllGather h.1","pid":0,"tid":1,"ts":5000,"dur":4000},
 {"ph":"X","cat":"reduce_scatter","name":"ReduceScatter grads h.0","pid":0,"tid":1,"ts":12000,"dur":1000},
 {"ph":"X","cat":"allreduce","name":"AllReduce grad norm, loss, overflow","pid":0,"tid":1,"ts":2000,"dur":500},
 {"ph":"C","name":"memory","pid":0,"ts":1,"args":{"params":5}},
 {"ph":"X","cat":"step","name":"step 1","pid":1,"tid":0,"ts":0,"dur":8000}
],"displayTimeUnit":"ms"})";

TEST(TraceSummaryTest, SumsComputationHiddenCommunicationAndWaitsPerRank) {
  absl::StatusOr<std::vector<RankTraceSummary>> s = SummarizeTrace(kTrace, "t.json");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  const RankTraceSummary& r0 = (*s)[0];
  EXPECT_EQ(r0.rank, 0);
  EXPECT_EQ(r0.steps, 2);
  EXPECT_DOUBLE_EQ(r0.median_step_ms, 20.0);  // (10 + 30) / 2
  EXPECT_DOUBLE_EQ(r0.compute_ms, 6.0);       // the optimizer span is not "update": not computation
  EXPECT_DOUBLE_EQ(r0.blocked_ms, 2.0);
  EXPECT_EQ(r0.comm.at("gather").count, 1);
  EXPECT_DOUBLE_EQ(r0.comm.at("gather").ms, 4.0);
  EXPECT_DOUBLE_EQ(r0.comm.at("gather").hidden_ms, 1.0);  // [5000, 6000)
  EXPECT_DOUBLE_EQ(r0.comm.at("reduce_scatter").hidden_ms, 0.0);
  EXPECT_DOUBLE_EQ(r0.comm.at("allreduce").hidden_ms, 0.5);
  EXPECT_EQ((*s)[1].steps, 1);
  EXPECT_DOUBLE_EQ((*s)[1].median_step_ms, 8.0);
  EXPECT_EQ(FormatTraceSummary(*s),
            "| rank | steps | step ms (median) | compute ms | gathers: n, ms (hidden) | "
            "reduce-scatters: n, ms (hidden) | other collectives: n, ms (hidden) | blocked in waits ms |\n|---|---|---|---|---|---|---|---|\n"
            "| 0 | 2 | 20.0 | 6.0 | 1, 4.0 (25%) | 1, 1.0 (0%) | 1, 0.5 (100%) | 2.0 |\n"
            "| 1 | 1 | 8.0 | 0.0 | - | - | - | 0.0 |\n"
            "\nstraggler: slowest rank 0, 6.0 ms compute vs median 3.0 ms (more than 20% above the median)\n");
}

TEST(TraceSummaryTest, RejectsWhatIsNotOneOfOurTraces) {
  EXPECT_EQ(SummarizeTrace("{not json", "a.json").status().message(), "a.json: not valid JSON");
  EXPECT_EQ(SummarizeTrace("[1, 2]", "b.json").status().message(),
            "b.json: no \"traceEvents\" array; expected a trace written by engine.logging.trace_path");
  absl::Status bad = SummarizeTrace(R"({"traceEvents":[{"ph":"X","pid":0,"tid":0,"cat":"step","name":"s"}]})", "c.json")
                         .status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(bad.message(), "c.json: traceEvents[0] is an \"X\" event without numeric ts, dur, tid"))
      << bad.message();
}

}  // namespace
}  // namespace zeroshard
