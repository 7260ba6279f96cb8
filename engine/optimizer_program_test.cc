#include "engine/optimizer_program.h"

#include <string>

#include "engine/step_program.h"
#include "gtest/gtest.h"
#include "sharding/zero_policy.h"

namespace zeroshard {
namespace {

// Units a (tied, owned here: a 10-element shard of 20), b (empty shard),
// c (6); buckets {c}, {a, b}; one metric.
OptimizerPhaseInput Input(int stage) {
  OptimizerPhaseInput in;
  in.units = {{"a", 10, true}, {"b", 0, false}, {"c", 6, false}};
  in.units[0].padded_numel = 20;
  in.buckets = {{2}, {0, 1}};
  in.zero = *ZeroPolicy::ForStage(stage);
  in.compute_dtype_bytes = 2;
  in.norm_group = "world";
  in.metrics = 1;
  return in;
}

std::string Text(const OptimizerPhaseInput& in) {
  StepProgram p;
  p.num_units = 3;
  p.num_buckets = 2;
  p.names.units = {"a", "b", "c"};
  p.names.buckets = {"c", "a..b"};
  Action forward;
  forward.kind = ActionKind::kForward;
  forward.micro_batch = 0;
  forward.unit = 0;
  p.actions.push_back(forward);
  AddStepPrologueAndOptimizerPhase(in, &p);
  return FormatProgram(p);
}

// One 4096-byte granule of each streamed f32 buffer is the least that
// streams; chunks are whole granules.
TEST(OptimizerProgramTest, StreamMinimumAndChunkElements) {
  EXPECT_EQ(kStreamGranuleElements, 1024);
  EXPECT_EQ(MinStreamBufferBytes(12), 12288);  // AdamW state and the master
  EXPECT_EQ(MinStreamBufferBytes(8), 8192);    // AdamW state alone
  EXPECT_EQ(StreamChunkElements(12288, 12), 1024);
  EXPECT_EQ(StreamChunkElements(12287, 12), 0);
  EXPECT_EQ(StreamChunkElements(8192, 8), 1024);
  EXPECT_EQ(StreamChunkElements(int64_t{64} << 20, 12), 5592064);  // 5461 granules
  EXPECT_EQ(StreamChunkElements(4096, 0), 0);
}

TEST(OptimizerProgramTest, PrologueThenThePhaseWithEveryCollectiveItIssues) {
  // Stage 0: every rank updates the whole buffer, so UPDATE all-gathers the
  // reduced f32 shards; PUBLISH moves nothing.
  EXPECT_EQ(Text(Input(0)), R"(BEGIN_STEP
FORWARD mb=0 unit=a
OPTIMIZER:
TIED_REDUCE unit=a bytes=40
NORM_PARTIAL bucket=c
NORM_PARTIAL bucket=a..b
REDUCE_NORM bytes=28
UPDATE bucket=a..b bytes=40
PUBLISH bucket=a..b
UPDATE bucket=c bytes=24
PUBLISH bucket=c
TIED_PUBLISH unit=a bytes=40
SCALER_UPDATE
)");
  // Stages 1-2 publish by all-gathering the compute dtype; stage 3 neither.
  for (int stage : {1, 2}) {
    EXPECT_EQ(Text(Input(stage)), R"(BEGIN_STEP
FORWARD mb=0 unit=a
OPTIMIZER:
TIED_REDUCE unit=a bytes=40
NORM_PARTIAL bucket=c
NORM_PARTIAL bucket=a..b
REDUCE_NORM bytes=28
UPDATE bucket=a..b
PUBLISH bucket=a..b bytes=20
UPDATE bucket=c
PUBLISH bucket=c bytes=12
TIED_PUBLISH unit=a bytes=20
SCALER_UPDATE
)") << stage;
  }
  StepProgram p;
  AddStepPrologueAndOptimizerPhase(Input(3), &p);
  ASSERT_EQ(p.actions.size(), 11u);
  EXPECT_EQ(p.actions[0].kind, ActionKind::kBeginStep);
  EXPECT_EQ(p.actions[1].issues, std::vector<IssuedCollective>({{"embed", CommOp::kAllReduce, 40, "tied grads a"}}));
  EXPECT_EQ(p.actions[4].issues, std::vector<IssuedCollective>({{"world", CommOp::kAllReduce, 28, "norm, loss, overflow"}}));
  for (size_t i = 5; i < 9; ++i) EXPECT_TRUE(p.actions[i].issues.empty()) << i;
  EXPECT_EQ(p.actions[9].kind, ActionKind::kTiedPublish);
  EXPECT_EQ(p.actions[9].issues, std::vector<IssuedCollective>({{"embed", CommOp::kBroadcast, 20, "tied params a"}}));
  EXPECT_EQ(p.actions.back().kind, ActionKind::kScalerUpdate);
}

// The mirror end receives the owner's parameters over "embed": its shard
// (the whole buffer at stage 0), then stages 1-2 all-gather it over dp.
TEST(OptimizerProgramTest, TheMirrorReceivesTheTiedParametersAndCompletesThemOverDp) {
  for (int stage = 0; stage <= 3; ++stage) {
    OptimizerPhaseInput in = Input(stage);
    in.units[0].mirror = true;
    StepProgram p;
    AddStepPrologueAndOptimizerPhase(in, &p);
    ASSERT_GE(p.actions.size(), 2u);
    const Action& publish = p.actions[p.actions.size() - 2];
    ASSERT_EQ(publish.kind, ActionKind::kTiedPublish) << stage;
    EXPECT_EQ(publish.unit, 0);
    std::vector<IssuedCollective> expected = {{"embed", CommOp::kBroadcast, stage == 0 ? 40 : 20, "tied params a"}};
    if (stage == 1 || stage == 2) expected.push_back({"dp", CommOp::kAllGather, 20, "params a"});
    EXPECT_EQ(publish.issues, expected) << stage;
  }
}

TEST(OptimizerProgramTest, AnUntiedModelHasNoTiedReduceOrPublish) {
  OptimizerPhaseInput in = Input(2);
  in.units[0].tied = false;
  StepProgram p;
  AddStepPrologueAndOptimizerPhase(in, &p);
  for (const Action& a : p.actions) {
    EXPECT_NE(a.kind, ActionKind::kTiedReduce);
    EXPECT_NE(a.kind, ActionKind::kTiedPublish);
  }
  EXPECT_EQ(ReduceNormBytes(0), 20);
}

}  // namespace
}  // namespace zeroshard
