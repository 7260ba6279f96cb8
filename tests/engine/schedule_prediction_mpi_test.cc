// What `zeroshard schedule` predicts against what the engine does, under
// mpirun at dp = the world size: for a tiny GPT-2 over stages 0-3, prefetch
// 1 and 2, reshard_after_forward on and off, a persistence threshold, two
// micro-batches ACCUMULATE and DEFER and each activation-checkpointing
// policy, the engine's train program is the one PlanDataParallelStep builds,
// its peak gathered units and kept activations are the simulator's
// predictions for this rank, and the dp communicator counts exactly the
// program's collectives (calls and bytes sent, per op) in every TrainStep.
// The step's batch-signature agreement runs on the control communicator,
// so it is not among them.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/comm_stats.h"
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/program_simulator.h"
#include "engine/step_plan.h"
#include "engine/step_program.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "tests/data_parallel_world.h"

namespace zeroshard {
namespace {

constexpr int kMicroBatches = 2;
constexpr int kSteps = 2;
constexpr int kRowsPerMicroBatch = 2;
constexpr uint32_t kTokenSeed = 11;

// embed, h.0, h.1, h.2, head: enough units for prefetch 2 to differ from 1.
Gpt2Config TinyConfig() { return TinyGpt2(/*n_layer=*/3); }

struct Case {
  int stage = 0;
  int prefetch = 1;
  bool reshard_after_forward = true;
  // Elements: 1500 keeps embed (1200) and head (32) gathered, not the
  // blocks (3280 each).
  int64_t persistence_threshold = 0;
  ZeroConfig::ReduceMode reduce_mode = ZeroConfig::ACCUMULATE;
  ActivationCheckpointingConfig::Policy checkpointing = ActivationCheckpointingConfig::NONE;

  std::string Name() const {
    return absl::StrCat("stage ", stage, " prefetch ", prefetch, " reshard_after_forward ", reshard_after_forward,
                        " persistence_threshold ", persistence_threshold, " ",
                        ZeroConfig::ReduceMode_Name(reduce_mode), " checkpointing ",
                        ActivationCheckpointingConfig::Policy_Name(checkpointing));
  }
};

// Stage 3 over every gather option; the other stages ignore them.
std::vector<Case> Cases() {
  std::vector<Case> cases;
  const ActivationCheckpointingConfig::Policy policies[] = {
      ActivationCheckpointingConfig::NONE, ActivationCheckpointingConfig::EVERY_UNIT,
      ActivationCheckpointingConfig::EVERY_KTH, ActivationCheckpointingConfig::NAMED};
  for (int stage = 0; stage <= 3; ++stage) {
    for (int prefetch : {1, 2}) {
      for (bool reshard : {true, false}) {
        for (int64_t threshold : {int64_t{0}, int64_t{1500}}) {
          if (stage != 3 && (prefetch != 1 || !reshard || threshold != 0)) continue;
          for (ZeroConfig::ReduceMode mode : {ZeroConfig::ACCUMULATE, ZeroConfig::DEFER}) {
            for (ActivationCheckpointingConfig::Policy policy : policies) {
              cases.push_back({stage, prefetch, reshard, threshold, mode, policy});
            }
          }
        }
      }
    }
  }
  return cases;
}

EngineConfig MakeConfig(const Case& c, int dp) {
  EngineConfig config;
  ZeroConfig* z = config.mutable_zero();
  z->set_stage(c.stage);
  z->set_prefetch(c.prefetch);
  z->set_reshard_after_forward(c.reshard_after_forward);
  z->set_persistence_threshold(c.persistence_threshold);
  z->set_reduce_mode(c.reduce_mode);
  // 16 KiB: the blocks (13 KB of f32 each) reduce alone, embed and head
  // share a bucket.
  z->set_bucket_bytes(16384);
  config.set_gradient_accumulation_steps(kMicroBatches);
  ActivationCheckpointingConfig* ac = config.mutable_activation_checkpointing();
  ac->set_policy(c.checkpointing);
  ac->set_k(2);
  if (c.checkpointing == ActivationCheckpointingConfig::NAMED) {
    ac->add_units("h.0");
    ac->add_units("head");
  }
  config.mutable_parallel()->set_dp(dp);
  config.mutable_optimizer()->set_lr(1e-3);
  config.mutable_device()->set_threads_per_rank(1);
  config.set_seed(5);
  return config;
}

std::string Describe(const CollectivesByGroup& c) {
  std::vector<std::string> parts;
  for (const auto& [key, t] : c) {
    parts.push_back(absl::StrCat(key.first, " ", CommOpName(key.second), ": ", t.calls, " calls, ", t.bytes_sent,
                                 " bytes"));
  }
  return absl::StrJoin(parts, "; ");
}

TEST(SchedulePredictionMpiTest, EngineRunsWhatTheScheduleAndSimulatorPredict) {
  ProcessGrid& grid = DataParallelWorld();
  const int dp = grid.dp().size();
  const int me = grid.dp_rank();
  const int global_batch = dp * kMicroBatches * kRowsPerMicroBatch;
  const Gpt2Config tiny = TinyConfig();
  const std::vector<int32_t> tokens = RandomTokens(kTokenSeed, global_batch, tiny.seq_len, tiny.vocab_size);
  const std::vector<HostBatch> batches =
      MicroBatchesForRank(tokens, global_batch, tiny.seq_len, dp, kMicroBatches, me);
  const std::vector<Batch> views = Views(batches);
  std::vector<int> members;
  for (int r = 0; r < dp; ++r) members.push_back(r);

  for (const Case& c : Cases()) {
    SCOPED_TRACE(absl::StrCat("dp ", dp, " rank ", me, ": ", c.Name()));
    const EngineConfig config = MakeConfig(c, dp);

    // What `zeroshard schedule` prints: the plan from the options alone.
    absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config);
    ASSERT_TRUE(options.ok()) << options.status();
    absl::StatusOr<std::unique_ptr<Model>> planned_model = BuildGpt2(tiny);
    ASSERT_TRUE(planned_model.ok()) << planned_model.status();
    absl::StatusOr<StepPlan> plan = PlanDataParallelStep(**planned_model, *options, dp);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const StepProgram& program = plan->train;
    std::vector<SimulatedRank> ranks(dp);
    for (SimulatedRank& r : ranks) {
      r.program = program;
      r.groups = {{"dp", members}};
      r.gathers_params = c.stage == 3;
    }
    absl::StatusOr<Simulation> sim = SimulatePrograms(ranks);
    ASSERT_TRUE(sim.ok()) << sim.status() << "\n" << FormatProgram(program);
    const RankPrediction& predicted = sim->ranks[me];
    const CollectivesByGroup expected = CountCollectives(program, {{"dp", dp}});
    for (const auto& [key, totals] : expected) {
      EXPECT_EQ(key.first, "dp") << "the data-parallel program communicates on group '" << key.first << "'";
    }

    absl::StatusOr<std::unique_ptr<Model>> model = BuildGpt2(tiny);
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(config, &grid, std::move(model).value());
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE((*engine)->train_program().actions == program.actions)
        << "the engine's program differs from PlanDataParallelStep's:\n--- engine ---\n"
        << FormatProgram((*engine)->train_program()) << "--- planned ---\n"
        << FormatProgram(program);

    for (int step = 1; step <= kSteps; ++step) {
      SCOPED_TRACE(absl::StrCat("TrainStep ", step));
      const CommStats before = (*engine)->comm_stats();
      absl::StatusOr<StepResult> result = (*engine)->TrainStep(views);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_FALSE(result->skipped) << "f32 steps are never skipped";
      const CommStats ran = (*engine)->comm_stats() - before;
      CollectivesByGroup measured;
      for (int op = 0; op < kNumCommOps; ++op) {
        const OpCounters& counters = ran[static_cast<CommOp>(op)];
        if (counters.calls == 0 && counters.bytes_sent == 0) continue;
        measured[{"dp", static_cast<CommOp>(op)}] = {counters.calls, counters.bytes_sent};
      }
      EXPECT_EQ(Describe(measured), Describe(expected)) << "dp communicator (measured) vs program (expected)";
    }
    const EngineStats stats = (*engine)->stats();
    EXPECT_EQ(stats.step, kSteps);
    if (c.stage != 3) {
      EXPECT_EQ(predicted.peak_gathered_units, 0) << "only stage 3 gathers parameters";
    }
    EXPECT_EQ(stats.peak_gathered_units, c.stage == 3 ? predicted.peak_gathered_units : 0);
    EXPECT_EQ(stats.peak_kept_activations, predicted.peak_kept_activations);
    if (me == 0) {
      std::printf("dp %d %s: peak gathered %d, kept %d; %s\n", dp, c.Name().c_str(), stats.peak_gathered_units,
                  stats.peak_kept_activations, Describe(expected).c_str());
    }
  }
}

}  // namespace
}  // namespace zeroshard
