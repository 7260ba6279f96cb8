#include "engine/step_time_model.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/engine_options.h"
#include "engine/pipeline_plan.h"
#include "engine/pipeline_schedule.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

UnitCost Unit(const std::string& name, double forward, double backward) {
  UnitCost u;
  u.set_name(name);
  u.set_forward_seconds(forward);
  u.set_backward_input_seconds(backward);
  u.set_recompute_seconds(forward);
  return u;
}

Action Compute(ActionKind kind, int unit) {
  Action a;
  a.kind = kind;
  a.unit = unit;
  a.micro_batch = 0;
  return a;
}

Action Bucket(ActionKind kind, int bucket, int64_t reduce_bytes = 0) {
  Action a;
  a.kind = kind;
  a.bucket = bucket;
  if (reduce_bytes > 0) a.issues.push_back({"dp", CommOp::kReduceScatter, reduce_bytes, "grads"});
  return a;
}

// Units a (F 1, B 2) and b (F 3, B 4) in buckets {b} and {a}, 32 elements
// of master shard each (64 over dp 2); a reduce-scatter of 128 bytes a rank
// takes 1 s on a 128 B/s link; an update 0.01 s per element.
struct TwoUnits {
  StepPlan plan;
  EngineOptions options;
  CostProfile profile;

  explicit TwoUnits(double b_backward = 4) {
    options.zero = *ZeroPolicy::ForStage(2);
    for (const char* name : {"a", "b"}) {
      plan.layouts.push_back(*FlatParamLayout::Create(name, static_cast<int>(plan.layouts.size()),
                                                      {{std::string(name) + ".w", {64}}}, 2));
      plan.units.emplace_back();
      plan.train.names.units.push_back(name);
    }
    plan.buckets = {{{1}, 32, "b"}, {{0}, 32, "a"}};
    *profile.add_units() = Unit("a", 1, 2);
    *profile.add_units() = Unit("b", 3, b_backward);
    profile.set_optimizer_seconds_per_element(0.01);
    profile.set_source("p.pbtxt");
    LinkCost* dp = profile.add_links();
    dp->set_group("dp");
    dp->set_bytes_per_second(128);
  }
};

// Forward a, b; backward b, reduce {b}; backward a, reduce {a}; wait both;
// update both.
std::vector<Action> ReduceEachBucketAfterItsBackward() {
  return {Compute(ActionKind::kForward, 0),   Compute(ActionKind::kForward, 1), Compute(ActionKind::kBackward, 1),
          Bucket(ActionKind::kReduce, 0, 128), Compute(ActionKind::kBackward, 0), Bucket(ActionKind::kReduce, 1, 128),
          Bucket(ActionKind::kWaitReduce, 0), Bucket(ActionKind::kWaitReduce, 1), Bucket(ActionKind::kUpdate, 0),
          Bucket(ActionKind::kUpdate, 1)};
}

TEST(StepTimeModelTest, AReductionBehindBackwardIsHiddenTheLastIsExposed) {
  TwoUnits t;
  t.plan.train.actions = ReduceEachBucketAfterItsBackward();
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(t.plan, t.options, {{"dp", 2}}, 1.0, t.profile);
  ASSERT_TRUE(p.ok()) << p.status();
  // F a [0,1], F b [1,4], B b [4,8]; its reduce [8,9] under B a [8,10];
  // a's reduce [10,11] waited; two updates of 32 elements, 0.32 s each.
  EXPECT_DOUBLE_EQ(p->compute_seconds, 10);
  EXPECT_DOUBLE_EQ(p->comm_seconds, 2);
  EXPECT_DOUBLE_EQ(p->exposed_seconds, 1);
  EXPECT_DOUBLE_EQ(p->optimizer_seconds, 0.64);
  EXPECT_DOUBLE_EQ(p->step_seconds, 11.64);
  EXPECT_TRUE(p->notes.empty());
}

TEST(StepTimeModelTest, ComputeAndCommShareCoresWhileBothRun) {
  TwoUnits t;
  t.plan.train.actions = ReduceEachBucketAfterItsBackward();
  // 2 ranks of 1 thread on 2 cores: b's reduction (1 s of work) beside a's
  // backward (2 s) both run at half speed for 2 s, so the backward ends at
  // 11, not 10; a's reduction [11, 12] is waited; the updates follow.
  absl::StatusOr<StepTimePrediction> p =
      PredictStepTime(t.plan, t.options, {{"dp", 2}}, 1.0, t.profile, CoreShare{2, 2, 1});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_seconds, 12.64);
  EXPECT_DOUBLE_EQ(p->exposed_seconds, 1);
  EXPECT_DOUBLE_EQ(p->compute_seconds, 10);
}

TEST(StepTimeModelTest, QueuedCollectivesSerializeOnTheCommLane) {
  // b's backward takes no time: both reductions queue back to back.
  TwoUnits t(/*b_backward=*/0);
  t.plan.train.actions = {Compute(ActionKind::kForward, 0),   Compute(ActionKind::kForward, 1),
                          Compute(ActionKind::kBackward, 1),  Bucket(ActionKind::kReduce, 0, 256),
                          Bucket(ActionKind::kReduce, 1, 256), Bucket(ActionKind::kWaitReduce, 0),
                          Bucket(ActionKind::kWaitReduce, 1)};
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(t.plan, t.options, {{"dp", 2}}, 1.0, t.profile);
  ASSERT_TRUE(p.ok()) << p.status();
  // Forwards end at 4; reductions [4,6] and [6,8].
  EXPECT_DOUBLE_EQ(p->step_seconds, 8);
  EXPECT_DOUBLE_EQ(p->exposed_seconds, 4);
}

TEST(StepTimeModelTest, SplitBackwardHalvesAFusedProfileAndComputeScales) {
  TwoUnits t;
  t.plan.train.actions = {Compute(ActionKind::kForward, 1), Compute(ActionKind::kBackwardInput, 1),
                          Compute(ActionKind::kBackwardWeight, 1)};
  absl::StatusOr<StepTimePrediction> p = PredictStepTime(t.plan, t.options, {{"dp", 1}}, 0.5, t.profile);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_seconds, 0.5 * (3 + 2 + 2));
  // A one-rank group costs nothing, link or not.
  t.plan.train.actions.push_back(Bucket(ActionKind::kReduce, 0, 1 << 20));
  EXPECT_DOUBLE_EQ(PredictStepTime(t.plan, t.options, {{"dp", 1}}, 0.5, t.profile)->step_seconds, 3.5);
}

TEST(StepTimeModelTest, ScaleFollowsTheMicroBatchAndTensorParallelism) {
  CostProfile profile;
  profile.set_micro_batch_elements(256);
  profile.set_tp(1);
  EXPECT_DOUBLE_EQ(ComputeScale(profile, 512, 1), 2.0);
  EXPECT_DOUBLE_EQ(ComputeScale(profile, 512, 4), 0.5);
  EXPECT_DOUBLE_EQ(ComputeScale(profile, 0, 1), 1.0);
}

TEST(StepTimeModelTest, AUnitTheProfileLacksIsNamed) {
  TwoUnits t;
  t.profile.mutable_units()->RemoveLast();
  t.plan.train.actions = {Compute(ActionKind::kForward, 1)};
  absl::Status s = PredictStepTime(t.plan, t.options, {{"dp", 1}}, 1.0, t.profile).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "cost profile p.pbtxt has no unit 'b'; profile a run of the same model");
}

TEST(StepTimeModelTest, PipelineStepIsTheScheduleWithProfiledChunkCosts) {
  ToyModelConfig toy;
  toy.n_layer = 2;  // embed, blk.0 | blk.1, head
  const std::unique_ptr<Model> model = BuildToyModel(toy);
  EngineOptions options;
  options.zero = *ZeroPolicy::ForStage(0);
  options.accumulation_steps = 4;
  options.pipeline.stages = 2;
  options.pipeline.schedule = PipelineScheduleKind::kOneFOneB;
  absl::StatusOr<PipelinePlan> plan = PlanPipeline(*model, options, /*dp_size=*/1, {2, toy.seq_len});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->chunk_begin, (std::vector<int>{0, 2, 4}));
  CostProfile profile;
  profile.set_source("p");
  for (const char* name : {"embed", "blk.0", "blk.1", "head"}) *profile.add_units() = Unit(name, 1, 2);
  absl::StatusOr<StepTimePrediction> p = PredictPipelineStepTime(*plan, options, 1, 1.0, profile);
  ASSERT_TRUE(p.ok()) << p.status();
  // Chunks of F 2, BW 4 and free transfers: 1F1B over m 4, pp 2 takes
  // (m + pp - 1) (F + BW) = 30 with a bubble of (pp - 1) / (m + pp - 1).
  EXPECT_DOUBLE_EQ(p->step_seconds, 30);
  EXPECT_DOUBLE_EQ(p->bubble_fraction, 0.2);
  EXPECT_DOUBLE_EQ(p->compute_seconds, 24);
  EXPECT_FALSE(p->notes.empty());  // transfers not priced without a link
}

}  // namespace
}  // namespace zeroshard
