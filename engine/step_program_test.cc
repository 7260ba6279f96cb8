#include "engine/step_program.h"

#include <map>
#include <string>
#include <utility>

#include "comm/comm_stats.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

constexpr ActionKind kKinds[] = {
    ActionKind::kForward,   ActionKind::kBackward,   ActionKind::kBackwardInput, ActionKind::kBackwardWeight,
    ActionKind::kRecompute, ActionKind::kGather,     ActionKind::kWaitGather,    ActionKind::kRelease,
    ActionKind::kReduce,    ActionKind::kWaitReduce, ActionKind::kSendAct,       ActionKind::kRecvAct,
    ActionKind::kSendGrad,  ActionKind::kRecvGrad,   ActionKind::kBeginStep,     ActionKind::kTiedReduce,
    ActionKind::kNormPartial, ActionKind::kReduceNorm, ActionKind::kUpdate,      ActionKind::kPublish,
    ActionKind::kScalerUpdate, ActionKind::kLoad, ActionKind::kWaitLoad, ActionKind::kStore, ActionKind::kWaitStore,
    ActionKind::kTiedPublish,
};

Action Make(ActionKind kind, int mb, int unit, int bucket = -1, int peer = -1,
            std::vector<IssuedCollective> issues = {}) {
  Action a;
  a.kind = kind;
  a.micro_batch = mb;
  a.unit = unit;
  a.bucket = bucket;
  a.peer_stage = peer;
  a.issues = std::move(issues);
  return a;
}

StepProgram Named() {
  StepProgram p;
  p.micro_batches = 2;
  p.num_units = 3;
  p.num_buckets = 2;
  p.names.units = {"embed", "h.0", "head"};
  p.names.buckets = {"head", "embed..h.0"};
  return p;
}

TEST(ActionKindTest, NamesRoundTripAndAreDistinct) {
  static_assert(sizeof(kKinds) / sizeof(kKinds[0]) == kNumActionKinds, "every kind listed");
  const std::vector<std::string> expected = {
      "FORWARD", "BACKWARD",    "BACKWARD_INPUT", "BACKWARD_WEIGHT", "RECOMPUTE", "GATHER",    "WAIT_GATHER", "RELEASE",
      "REDUCE",  "WAIT_REDUCE", "SEND_ACT",       "RECV_ACT",        "SEND_GRAD", "RECV_GRAD", "BEGIN_STEP",
      "TIED_REDUCE", "NORM_PARTIAL", "REDUCE_NORM", "UPDATE", "PUBLISH", "SCALER_UPDATE",
      "LOAD", "WAIT_LOAD", "STORE", "WAIT_STORE", "TIED_PUBLISH"};
  for (int i = 0; i < kNumActionKinds; ++i) {
    EXPECT_EQ(ActionKindName(kKinds[i]), expected[i]);
    absl::StatusOr<ActionKind> parsed = ParseActionKind(expected[i]);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kKinds[i]);
  }
}

TEST(ActionKindTest, ParseRejectsUnknownNamesListingTheKinds) {
  for (const char* bad : {"forward", "", "FORWARD ", "BACKWARD_ALL"}) {
    absl::StatusOr<ActionKind> parsed = ParseActionKind(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              std::string("unknown action kind '") + bad +
                  "', expected one of FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, RECOMPUTE, GATHER, "
                  "WAIT_GATHER, RELEASE, REDUCE, WAIT_REDUCE, SEND_ACT, RECV_ACT, SEND_GRAD, RECV_GRAD, BEGIN_STEP, "
                  "TIED_REDUCE, NORM_PARTIAL, REDUCE_NORM, UPDATE, PUBLISH, SCALER_UPDATE, LOAD, WAIT_LOAD, STORE, "
                  "WAIT_STORE, TIED_PUBLISH");
  }
}

TEST(FormatActionTest, PrintsOnlyTheFieldsThatApply) {
  const StepProgram p = Named();
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kForward, 1, 2)), "FORWARD mb=1 unit=head");
  EXPECT_EQ(
      FormatAction(p, Make(ActionKind::kGather, -1, 0, -1, -1, {{"dp", CommOp::kAllGather, 12544, "params embed"}})),
      "GATHER unit=embed bytes=12544");
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kWaitGather, -1, 0)), "WAIT_GATHER unit=embed");
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kReduce, -1, -1, 1, -1,
                                 {{"dp", CommOp::kReduceScatter, 6272, "grads embed..h.0"}})),
            "REDUCE bucket=embed..h.0 bytes=6272");
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kReduce, -1, -1, 0)), "REDUCE bucket=head");  // nothing to reduce
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kSendAct, 0, -1, -1, 1, {{"pp", CommOp::kSend, 4096, "act"}})),
            "SEND_ACT mb=0 peer=1 bytes=4096");
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kRecvGrad, 1, -1, -1, 0)), "RECV_GRAD mb=1 peer=0");
  // Bytes are the sum over the action's collectives.
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kPublish, -1, -1, 1, -1,
                                 {{"dp", CommOp::kAllGather, 12, "params embed"},
                                  {"dp", CommOp::kAllGather, 100, "params h.0"}})),
            "PUBLISH bucket=embed..h.0 bytes=112");
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kScalerUpdate, -1, -1)), "SCALER_UPDATE");
  Action load = Make(ActionKind::kLoad, -1, 1);
  load.chunk = 3;
  load.slot = 1;
  EXPECT_EQ(FormatAction(p, load), "LOAD unit=h.0 chunk=3 slot=1");
  Action update = Make(ActionKind::kUpdate, -1, -1, 1);
  update.chunk = 3;
  update.slot = 1;
  EXPECT_EQ(FormatAction(p, update), "UPDATE bucket=embed..h.0 chunk=3 slot=1");
  Action other = update;
  other.slot = 0;
  EXPECT_FALSE(other == update);
}

TEST(FormatProgramTest, OffloadIoDoesNotSplitTheOptimizerHeading) {
  StepProgram p = Named();
  Action load = Make(ActionKind::kLoad, -1, 1), wait = Make(ActionKind::kWaitLoad, -1, 1);
  load.chunk = wait.chunk = 0;
  load.slot = wait.slot = 0;
  p.actions = {Make(ActionKind::kBackward, 0, 0), load, Make(ActionKind::kReduceNorm, -1, -1), wait,
               Make(ActionKind::kUpdate, -1, -1, 0)};
  EXPECT_EQ(FormatProgram(p),
            "BACKWARD mb=0 unit=embed\n"
            "LOAD unit=h.0 chunk=0 slot=0\n"
            "OPTIMIZER:\n"
            "REDUCE_NORM\n"
            "WAIT_LOAD unit=h.0 chunk=0 slot=0\n"
            "UPDATE bucket=head\n");
  EXPECT_TRUE(IsOffloadIo(ActionKind::kWaitStore));
  EXPECT_FALSE(IsOffloadIo(ActionKind::kUpdate));
}

TEST(FormatActionTest, UnnamedOrOutOfRangeIndicesPrintAsNumbers) {
  StepProgram p = Named();
  p.names.units[1] = "";
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kBackward, 0, 1)), "BACKWARD mb=0 unit=1");
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kRelease, -1, 7)), "RELEASE unit=7");
  EXPECT_EQ(FormatAction(p, Make(ActionKind::kWaitReduce, -1, -1, 5)), "WAIT_REDUCE bucket=5");
}

TEST(FormatProgramTest, OneLinePerActionAndTheOptimizerPhaseUnderAHeading) {
  StepProgram p = Named();
  p.actions = {Make(ActionKind::kBeginStep, -1, -1), Make(ActionKind::kForward, 0, 0),
               Make(ActionKind::kRecompute, 0, 0),   Make(ActionKind::kBackward, 0, 0),
               Make(ActionKind::kReduceNorm, -1, -1), Make(ActionKind::kUpdate, -1, -1, 0),
               Make(ActionKind::kScalerUpdate, -1, -1)};
  EXPECT_EQ(FormatProgram(p),
            "BEGIN_STEP\n"
            "FORWARD mb=0 unit=embed\n"
            "RECOMPUTE mb=0 unit=embed\n"
            "BACKWARD mb=0 unit=embed\n"
            "OPTIMIZER:\n"
            "REDUCE_NORM\n"
            "UPDATE bucket=head\n"
            "SCALER_UPDATE\n");
  EXPECT_TRUE(IsOptimizerPhase(ActionKind::kTiedReduce));
  EXPECT_TRUE(IsOptimizerPhase(ActionKind::kTiedPublish));
  EXPECT_FALSE(IsOptimizerPhase(ActionKind::kBeginStep));
  EXPECT_FALSE(IsOptimizerPhase(ActionKind::kWaitReduce));
  EXPECT_EQ(FormatProgram(StepProgram()), "");
}

TEST(CountCollectivesTest, MatchesCommStatsRecordPerGroupAndOp) {
  StepProgram p = Named();
  p.actions = {
      Make(ActionKind::kGather, -1, 0, -1, -1, {{"dp", CommOp::kAllGather, 1000, "params embed"}}),
      Make(ActionKind::kGather, -1, 1, -1, -1, {{"dp", CommOp::kAllGather, 24, "params h.0"}}),
      Make(ActionKind::kForward, 0, 0),
      Make(ActionKind::kReduce, -1, -1, 0, -1, {{"dp", CommOp::kReduceScatter, 300, "grads head"}}),
      Make(ActionKind::kSendAct, 0, -1, -1, 1, {{"pp", CommOp::kSend, 4096, "act"}}),
      // 2(n-1)/n of 10 bytes over 3 ranks rounds down: 13.
      Make(ActionKind::kReduceNorm, -1, -1, -1, -1,
           {{"dp", CommOp::kAllReduce, 10, "norm, loss, overflow"}, {"tp", CommOp::kAllReduce, 64, "tp sums"}}),
  };
  const std::map<std::string, int> sizes = {{"dp", 3}, {"pp", 2}, {"tp", 1}};
  CommStats dp, pp, tp;
  dp.Record(CommOp::kAllGather, 3, 1000, false);
  dp.Record(CommOp::kAllGather, 3, 24, false);
  dp.Record(CommOp::kReduceScatter, 3, 300, false);
  dp.Record(CommOp::kAllReduce, 3, 10, false);
  pp.Record(CommOp::kSend, 2, 4096, false);
  tp.Record(CommOp::kAllReduce, 1, 64, false);

  const CollectivesByGroup counted = CountCollectives(p, sizes);
  ASSERT_EQ(counted.size(), 5u);
  auto at = [&](const std::string& group, CommOp op) { return counted.at({group, op}); };
  EXPECT_EQ(at("dp", CommOp::kAllGather).calls, 2);
  EXPECT_EQ(at("dp", CommOp::kAllGather).bytes_sent, dp[CommOp::kAllGather].bytes_sent);
  EXPECT_EQ(at("dp", CommOp::kAllGather).bytes_sent, 2 * 1024);
  EXPECT_EQ(at("dp", CommOp::kReduceScatter).calls, 1);
  EXPECT_EQ(at("dp", CommOp::kReduceScatter).bytes_sent, dp[CommOp::kReduceScatter].bytes_sent);
  EXPECT_EQ(at("dp", CommOp::kReduceScatter).bytes_sent, 600);
  EXPECT_EQ(at("dp", CommOp::kAllReduce).calls, 1);
  EXPECT_EQ(at("dp", CommOp::kAllReduce).bytes_sent, dp[CommOp::kAllReduce].bytes_sent);
  EXPECT_EQ(at("dp", CommOp::kAllReduce).bytes_sent, 13);
  EXPECT_EQ(at("pp", CommOp::kSend).calls, 1);
  EXPECT_EQ(at("pp", CommOp::kSend).bytes_sent, pp[CommOp::kSend].bytes_sent);
  EXPECT_EQ(at("pp", CommOp::kSend).bytes_sent, 4096);
  EXPECT_EQ(at("tp", CommOp::kAllReduce).calls, 1);
  EXPECT_EQ(at("tp", CommOp::kAllReduce).bytes_sent, 0);  // a group of one moves nothing
}

TEST(CountCollectivesTest, AGroupMissingFromTheSizesCountsAsOneRank) {
  StepProgram p = Named();
  p.actions = {Make(ActionKind::kReduce, -1, -1, 0, -1, {{"dp", CommOp::kReduceScatter, 300, "grads head"}})};
  const CollectivesByGroup counted = CountCollectives(p, {});
  ASSERT_EQ(counted.size(), 1u);
  EXPECT_EQ(counted.at({"dp", CommOp::kReduceScatter}).calls, 1);
  EXPECT_EQ(counted.at({"dp", CommOp::kReduceScatter}).bytes_sent, 0);
  EXPECT_TRUE(CountCollectives(Named(), {{"dp", 4}}).empty());
}

}  // namespace
}  // namespace zeroshard
