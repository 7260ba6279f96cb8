#include "engine/pipeline_plan.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine_options.h"
#include "engine/program_simulator.h"
#include "engine/step_plan.h"
#include "engine/step_program.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::vector<SimulatedRank> Ranks(const PipelinePlan& plan, int dp, bool zero3) {
  return PipelineSimulatedRanks(plan, dp, zero3);
}

std::vector<int> Computed(const StepPlan& stage) {
  std::vector<int> out;
  for (size_t u = 0; u < stage.units.size(); ++u) {
    if (stage.units[u].computed) out.push_back(static_cast<int>(u));
  }
  return out;
}

std::vector<int> Mirrors(const StepPlan& stage) {
  std::vector<int> out;
  for (size_t u = 0; u < stage.units.size(); ++u) {
    if (stage.units[u].mirror) out.push_back(static_cast<int>(u));
  }
  return out;
}

std::string Collectives(const std::vector<IssuedCollective>& issues) {
  std::string out;
  for (const IssuedCollective& c : issues) {
    absl::StrAppend(&out, c.group, " ", CommOpName(c.op), " ", c.bytes_per_rank, " ", c.what, "\n");
  }
  return out;
}

// What the optimizer phase's actions issue, in program order.
std::vector<IssuedCollective> OptimizerPhaseCollectives(const StepProgram& program) {
  std::vector<IssuedCollective> issues;
  for (const Action& a : program.actions) {
    if (IsOptimizerPhase(a.kind)) issues.insert(issues.end(), a.issues.begin(), a.issues.end());
  }
  return issues;
}

TEST(PipelinePlanTest, ToyModelOverTwoStagesWithATiedWeight) {
  ToyModelConfig toy;
  toy.n_layer = 2;
  const std::unique_ptr<Model> model = BuildToyModel(toy);
  EngineOptions options;
  options.zero = *ZeroPolicy::ForStage(3);
  options.accumulation_steps = 4;
  options.pipeline.stages = 2;
  absl::StatusOr<PipelinePlan> plan = PlanPipeline(*model, options, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->partitioned_by_cost);
  EXPECT_EQ(plan->chunk_begin, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(Computed(plan->stages[0]), (std::vector<int>{0, 1}));
  EXPECT_TRUE(Mirrors(plan->stages[0]).empty());
  EXPECT_EQ(Computed(plan->stages[1]), (std::vector<int>{2, 3}));
  EXPECT_EQ(Mirrors(plan->stages[1]), (std::vector<int>{0}));  // the head reads wte
  EXPECT_EQ(plan->tied_stages, (std::vector<int>{0, 1}));
  // The embedding's (67 + 8) x 16 parameters in shards of 608 f32 (padded)
  // over dp 2: the owner and the mirror sum their gradient shards, every
  // rank joins the norm's AllReduce, and the owner broadcasts the updated
  // shard into the mirror's.
  const std::string tied =
      "embed AllReduce 2432 tied grads embed\nworld AllReduce 20 norm, loss, overflow\n"
      "embed Broadcast 2432 tied params embed\n";
  EXPECT_EQ(Collectives(OptimizerPhaseCollectives(plan->stages[0].train)), tied);
  EXPECT_EQ(Collectives(OptimizerPhaseCollectives(plan->stages[1].train)), tied);
  // Stage 1's buckets hold the mirror's gradient next to its own units'.
  ASSERT_EQ(plan->stages[1].buckets.size(), 1u);
  EXPECT_EQ(plan->stages[1].buckets[0].units, (std::vector<int>{0, 2, 3}));
  const std::vector<SimulatedRank> ranks = Ranks(*plan, 2, true);
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks[3].groups.at("dp"), (std::vector<int>{2, 3}));
  EXPECT_EQ(ranks[3].groups.at("pp"), (std::vector<int>{1, 3}));
  EXPECT_EQ(ranks[3].groups.at("embed"), (std::vector<int>{1, 3}));
  EXPECT_EQ(ranks[3].units, (std::vector<int>{2, 3}));
  absl::StatusOr<Simulation> sim = SimulatePrograms(ranks);
  ASSERT_TRUE(sim.ok()) << sim.status();
}

TEST(PipelinePlanTest, ExplicitPartitionsAndErrors) {
  ToyModelConfig toy;
  toy.n_layer = 2;
  const std::unique_ptr<Model> model = BuildToyModel(toy);
  EngineOptions options;
  options.accumulation_steps = 2;
  options.pipeline.stages = 2;
  options.pipeline.partition = {1, 3};
  absl::StatusOr<PipelinePlan> plan = PlanPipeline(*model, options, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->partitioned_by_cost);
  EXPECT_EQ(plan->chunk_begin, (std::vector<int>{0, 1, 4}));
  ASSERT_TRUE(SimulatePrograms(Ranks(*plan, 1, false)).ok());
  options.pipeline.partition = {1, 2};
  EXPECT_EQ(PlanPipeline(*model, options, 1).status().message(),
            "engine.parallel.pp_partition: sums to 3, expected the model's 4 units");
  options.pipeline.partition.clear();
  options.pipeline.stages = 5;
  options.accumulation_steps = 5;
  EXPECT_EQ(PlanPipeline(*model, options, 1).status().message(),
            "engine.parallel.pp: pp x virtual_stages = 5 exceeds the model's 4 units");
  options.pipeline.stages = 2;
  options.pipeline.schedule = PipelineScheduleKind::kInterleaved1F1B;
  options.pipeline.virtual_stages = 2;
  EXPECT_EQ(PlanPipeline(*model, options, 1).status().message(),
            "engine.parallel.pipeline_schedule: INTERLEAVED_1F1B needs engine.gradient_accumulation_steps (5) to be "
            "a multiple of engine.parallel.pp (2)");
  options.accumulation_steps = 4;
  plan = PlanPipeline(*model, options, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->chunk_begin, (std::vector<int>{0, 1, 2, 3, 4}));
  // Chunk 3 (the head) on stage 1 mirrors the embedding of chunk 0.
  EXPECT_EQ(Mirrors(plan->stages[1]), (std::vector<int>{0}));
  ASSERT_TRUE(SimulatePrograms(Ranks(*plan, 1, false)).ok());
}

}  // namespace
}  // namespace zeroshard
