// Pipeline parallelism under mpirun: GPT-2 (8 units) split over pp stages
// with every schedule and ZeRO stage trains to the weights of an unsharded
// run on the same global batch and micro-batches (within 1e-6 relative);
// for one partition every ZeRO stage and every schedule gives bitwise the same
// weights, a rerun is bitwise repeatable, and the two copies of the tied
// embedding (first and last stage) stay bitwise equal after every step.
//
// One launch per world size (2, 3, 4) runs the whole matrix in-process.
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/state_view.h"
#include "engine/testing/tied_copies.h"
#include "engine/testing/function_observer.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "sharding/testing/thread_communicator.h"
#include "engine/testing/weights.h"
#include "engine/testing/shared_seed.h"

namespace zeroshard {
namespace {

constexpr int kSteps = 10;
constexpr uint64_t kSeed = 5;
using Schedule = ParallelConfig::PipelineSchedule;

// 6 blocks: 8 units, enough for 4 stages x 2 virtual stages.
Gpt2Config Model() { return TinyGpt2(6); }

int WorldSize() { return MpiWorldSize(); }

// One grid per shape for the whole binary.
ProcessGrid& Grid(int dp, int pp) { return CachedGrid({dp, 1, pp}); }

struct Case {
  int dp = 1, pp = 1, v = 1, m = 1, stage = 0;
  Schedule schedule = ParallelConfig::ONE_F_ONE_B;
  std::vector<int> partition;
  bool f16 = false;           // F16 compute, dynamic loss scale 2^10, hysteresis 1
  bool checkpointing = false; // EVERY_UNIT
  std::string Name() const {
    std::string s = absl::StrCat("dp ", dp, " pp ", pp, " v ", v, " m ", m, " ZeRO ", stage, " ",
                                 ParallelConfig::PipelineSchedule_Name(schedule));
    if (!partition.empty()) absl::StrAppend(&s, " partition ", absl::StrJoin(partition, ","));
    return s;
  }
  int Batch() const { return 2 * dp * m; }  // rows per step
};

EngineConfig Config(const Case& c) {
  EngineConfig e;
  e.mutable_zero()->set_stage(c.stage);
  e.mutable_zero()->set_bucket_bytes(4096);
  e.set_gradient_accumulation_steps(c.m);
  e.mutable_parallel()->set_dp(c.dp);
  e.mutable_parallel()->set_pp(c.pp);
  e.mutable_parallel()->set_virtual_stages(c.v);
  e.mutable_parallel()->set_pipeline_schedule(c.schedule);
  for (int u : c.partition) e.mutable_parallel()->add_pp_partition(u);
  if (c.f16) {
    e.mutable_precision()->set_compute_dtype(F16);
    e.mutable_precision()->mutable_loss_scale()->set_initial_scale(1024);
    e.mutable_precision()->mutable_loss_scale()->set_hysteresis(1);
  }
  if (c.checkpointing) e.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::EVERY_UNIT);
  e.mutable_optimizer()->set_lr(1e-3);
  // A large eps damps noise-driven AdamW steps (engine_mpi_test.cc): an
  // element whose gradient is rounding noise otherwise moves by up to lr. At
  // 1e-6 one token seed's h.4.attn.c_proj.bias alone took the whole-model
  // distance to 2.4e-6; at 1e-4 that seed gives 1.3e-7.
  e.mutable_optimizer()->set_eps(1e-4);
  e.mutable_device()->set_threads_per_rank(1);
  e.set_seed(kSeed);
  return e;
}

struct Outcome {
  Weights weights;
  std::vector<float> losses;
  std::vector<int> skipped;
  std::vector<double> scales;
  int64_t activations_peak = 0;  // this rank's
  bool tied_equal = true;  // the mirror and its owner agree bitwise after every step
};

// Tokens every rank agrees on (rank 0's draw, returned for the trace).
std::vector<int32_t> SharedTokens(int rows, uint32_t* seed_out) {
  const int32_t seed = SharedTestSeed(Grid(WorldSize(), 1).world());
  *seed_out = static_cast<uint32_t>(seed);
  return RandomTokens(static_cast<uint32_t>(seed), rows, Model().seq_len, Model().vocab_size);
}

Outcome RunPipeline(const Case& c, const std::vector<int32_t>& tokens, EngineObserver* observer = nullptr) {
  Outcome run;
  ProcessGrid& grid = Grid(c.dp, c.pp);
  std::vector<EngineObserver*> observers;
  if (observer != nullptr) observers.push_back(observer);
  auto engine = Engine::Create(Config(c), &grid, std::move(BuildGpt2(Model())).value(), observers);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, c.Batch(), Model().seq_len, c.dp, c.m, grid.dp_rank());
  const std::vector<Batch> views = Views(batches);
  for (int s = 0; s < kSteps; ++s) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(views);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.losses.push_back(r->loss);
    run.skipped.push_back(r->skipped ? 1 : 0);
    run.scales.push_back(r->loss_scale);
    run.tied_equal = run.tied_equal && TiedCopiesEqual(**engine, grid);
  }
  run.activations_peak = (*engine)->memory().Usage(MemoryCategory::kActivations).peak;
  for (const std::string& name : (*engine)->ParamNames()) {
    absl::StatusOr<std::vector<float>> w = (*engine)->GatherParam(name);
    EXPECT_TRUE(w.ok()) << w.status();
    if (w.ok()) run.weights[name] = std::move(*w);
  }
  return run;
}

// The same global batch and micro-batches on one rank, no pipeline: an
// engine over a private one-rank group, run on every rank alike.
Outcome RunReference(const Case& c, const std::vector<int32_t>& tokens) {
  Outcome run;
  std::vector<std::unique_ptr<Communicator>> self = CreateThreadGroup(1);
  Case flat;
  flat.m = c.m;
  auto engine = Engine::CreateWithCommunicator(Config(flat), self[0].get(), std::move(BuildGpt2(Model())).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, c.Batch(), Model().seq_len, 1, c.m, 0);
  const std::vector<Batch> views = Views(batches);
  for (int s = 0; s < kSteps; ++s) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(views);
    EXPECT_TRUE(r.ok()) << r.status();
    run.losses.push_back(r->loss);
  }
  for (const std::string& name : (*engine)->ParamNames()) run.weights[name] = *(*engine)->GatherParam(name);
  return run;
}

// Schedules a (pp, m) accepts, with their virtual stages.
std::vector<std::pair<Schedule, int>> Schedules(int pp, int m) {
  std::vector<std::pair<Schedule, int>> out = {{ParallelConfig::GPIPE, 1}, {ParallelConfig::ONE_F_ONE_B, 1}};
  if (m % pp == 0) out.push_back({ParallelConfig::INTERLEAVED_1F1B, 2});
  if (m >= pp) out.push_back({ParallelConfig::ZERO_BUBBLE_H1, 1});
  return out;
}

TEST(PipelineMpiTest, EverySchedulesAndStagesMatchTheUnpipelinedRun) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "pipeline parity needs at least 2 ranks";
  std::vector<std::pair<int, int>> shapes = {{1, n}};  // (dp, pp)
  if (n == 4) shapes.push_back({2, 2});
  for (const auto& [dp, pp] : shapes) {
    for (int m : {1, pp, 2 * pp, pp + 1}) {
      Case base;
      base.dp = dp;
      base.pp = pp;
      base.m = m;
      uint32_t seed = 0;
      const std::vector<int32_t> tokens = SharedTokens(base.Batch(), &seed);
      SCOPED_TRACE(absl::StrCat("token seed ", seed));
      const Outcome reference = RunReference(base, tokens);
      Outcome gpipe;
      for (const auto& [schedule, v] : Schedules(pp, m)) {
        std::vector<int> stages = {0, 3};
        if (schedule == ParallelConfig::ONE_F_ONE_B) stages = {0, 1, 2, 3};
        Outcome stage0;
        for (int stage : stages) {
          Case c = base;
          c.schedule = schedule;
          c.v = v;
          c.stage = stage;
          SCOPED_TRACE(c.Name());
          const Outcome run = RunPipeline(c, tokens);
          const double rel = RelativeL2(run.weights, reference.weights);
          std::string worst;
          const double worst_rel = WorstTensorRelativeL2(run.weights, reference.weights, &worst);
          EXPECT_LE(rel, 1e-6) << "worst tensor " << worst << " at " << worst_rel;
          ASSERT_EQ(run.losses.size(), reference.losses.size());
          for (int s = 0; s < kSteps; ++s) {
            EXPECT_NEAR(run.losses[s], reference.losses[s], 1e-6 * reference.losses[s]) << "step " << s + 1;
          }
          EXPECT_TRUE(run.tied_equal) << "the tied embedding's two copies diverged";
          if (stage == 0) {
            stage0 = run;
            if (schedule == ParallelConfig::GPIPE) {
              gpipe = run;
              EXPECT_TRUE(BitwiseEqual(RunPipeline(c, tokens).weights, run.weights)) << "a rerun differs";
            } else if (v == 1) {
              // Same partition: the same sums in the same order. Interleaving
              // cuts 2·pp chunks, which regroups the norm's partial sums.
              EXPECT_TRUE(BitwiseEqual(run.weights, gpipe.weights)) << "differs from GPipe's";
            }
          } else {
            EXPECT_TRUE(BitwiseEqual(run.weights, stage0.weights)) << "differs from ZeRO stage 0";
          }
          if (Grid(dp, pp).world().rank() == 0) {
            std::printf("%s: relative L2 to the unpipelined run %.3g, loss %.6f -> %.6f\n", c.Name().c_str(), rel,
                        run.losses.front(), run.losses.back());
          }
        }
      }
    }
  }
}

TEST(PipelineMpiTest, AnUnevenExplicitPartitionTrainsTheSame) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "needs at least 2 ranks";
  Case c;
  c.pp = n;
  c.m = n;
  // The first stage takes one unit, the last takes the rest minus the middle.
  c.partition.assign(n, 1);
  c.partition.back() = 8 - (n - 1);
  uint32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(c.Batch(), &seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed, " ", c.Name()));
  EXPECT_LE(RelativeL2(RunPipeline(c, tokens).weights, RunReference(c, tokens).weights), 1e-6);
}

TEST(PipelineMpiTest, ABadPartitionFailsCreateOnEveryRankNamingTheField) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "needs at least 2 ranks";
  Case c;
  c.pp = n;
  c.m = n;
  c.partition.assign(n, 1);  // sums to n, not 8
  auto engine = Engine::Create(Config(c), &Grid(1, n), std::move(BuildGpt2(Model())).value());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.status().message(),
            absl::StrCat("engine.parallel.pp_partition: sums to ", n, ", expected the model's 8 units"));
}

TEST(PipelineMpiTest, CheckpointingChangesNoBitAndKeepsFewerActivations) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "needs at least 2 ranks";
  for (int stage : {0, 3}) {
    Case c;
    c.pp = n;
    c.m = 2 * n;
    c.stage = stage;
    uint32_t seed = 0;
    const std::vector<int32_t> tokens = SharedTokens(c.Batch(), &seed);
    SCOPED_TRACE(absl::StrCat("token seed ", seed, " ", c.Name()));
    const Outcome kept = RunPipeline(c, tokens);
    c.checkpointing = true;
    const Outcome recomputed = RunPipeline(c, tokens);
    EXPECT_TRUE(BitwiseEqual(recomputed.weights, kept.weights));
    EXPECT_EQ(recomputed.losses, kept.losses);
    EXPECT_LT(recomputed.activations_peak, kept.activations_peak);
    std::printf("%s: rank %d peak activation bytes %lld checkpointed vs %lld kept\n", c.Name().c_str(),
                Grid(1, n).world().rank(), static_cast<long long>(recomputed.activations_peak),
                static_cast<long long>(kept.activations_peak));
  }
}

// An inf in one stage's gradient (the last unit, on the last stage's last
// dp rank) skips the step on every rank of every stage, leaves the weights
// bitwise as they were, and halves the scale everywhere.
TEST(PipelineMpiTest, F16InfOnOneStageSkipsTheStepOnEveryStage) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "needs at least 2 ranks";
  const int dp = n == 4 ? 2 : 1;
  Case c;
  c.dp = dp;
  c.pp = n / dp;
  c.m = c.pp;
  c.f16 = true;
  c.stage = 2;
  ProcessGrid& grid = Grid(c.dp, c.pp);
  const bool poisoner = grid.pp_rank() == c.pp - 1 && grid.dp_rank() == dp - 1;
  const int last_unit = 7;  // held by the last stage only
  const std::set<int64_t> poisoned = {2, 5};
  FunctionObserver poison;
  poison.reduced_gradient = [&](const GradientEvent& g) {
    if (poisoner && g.unit == last_unit && g.numel > 0 && poisoned.count(g.attempt) > 0) g.shard[g.numel / 2] = INFINITY;
  };
  uint32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(c.Batch(), &seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed, " ", c.Name()));
  const Outcome run = RunPipeline(c, tokens, &poison);
  ASSERT_EQ(run.skipped.size(), static_cast<size_t>(kSteps));
  std::vector<int> expected_skips(kSteps, 0);
  std::vector<double> expected_scales;
  double scale = 1024;
  for (int s = 0; s < kSteps; ++s) {
    expected_scales.push_back(scale);  // the scale the step ran with
    if (poisoned.count(s) > 0) {
      expected_skips[s] = 1;
      scale /= 2;
    }
  }
  EXPECT_EQ(run.skipped, expected_skips) << "pp rank " << grid.pp_rank() << " dp rank " << grid.dp_rank();
  EXPECT_EQ(run.scales, expected_scales);
  EXPECT_TRUE(run.tied_equal);
  // A skipped step changes nothing: its weights are the previous step's,
  // so the run's loss repeats on the step after each skip.
  for (int64_t s : poisoned) EXPECT_EQ(run.losses[s + 1], run.losses[s]) << "step " << s + 2;
}

// A stage configured with another schedule would deadlock in its first
// transfer; Create compares every rank's config over the world first.
TEST(PipelineMpiTest, AStageWithAnotherScheduleFailsCreateOnEveryRank) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "needs at least 2 ranks";
  Case c;
  c.pp = n;
  c.m = n;
  ProcessGrid& grid = Grid(1, n);
  if (grid.pp_rank() == n - 1) c.schedule = ParallelConfig::GPIPE;
  auto engine = Engine::Create(Config(c), &grid, std::move(BuildGpt2(Model())).value());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(engine.status().message(),
                               absl::StrCat("the engine config differs across the ", n, " world ranks")))
      << engine.status();
}

// Evaluation runs through the pipeline: every rank reports the loss of the
// unpipelined model on the same batch.
TEST(PipelineMpiTest, EvaluateThroughThePipelineMatchesOnEveryRank) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "needs at least 2 ranks";
  Case c;
  c.pp = n;
  c.m = n;
  c.stage = 3;
  uint32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(c.Batch(), &seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed, " ", c.Name()));
  std::vector<HostBatch> batch = MicroBatchesForRank(tokens, c.Batch(), Model().seq_len, 1, 1, 0);
  auto piped = Engine::Create(Config(c), &Grid(1, n), std::move(BuildGpt2(Model())).value());
  ASSERT_TRUE(piped.ok()) << piped.status();
  std::vector<std::unique_ptr<Communicator>> self = CreateThreadGroup(1);
  Case flat;
  flat.stage = 3;
  auto reference = Engine::CreateWithCommunicator(Config(flat), self[0].get(), std::move(BuildGpt2(Model())).value());
  ASSERT_TRUE(reference.ok()) << reference.status();
  absl::StatusOr<EvalResult> got = (*piped)->Evaluate(Views(batch)[0]);
  absl::StatusOr<EvalResult> want = (*reference)->Evaluate(Views(batch)[0]);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_NEAR(got->loss, want->loss, 1e-6 * want->loss);
  EXPECT_EQ(got->loss_weight, want->loss_weight);
  // Bitwise the same on every rank.
  std::vector<float> all(n);
  ASSERT_TRUE(Grid(1, n).world().AllGather(&got->loss, all.data(), 1, DType::kF32)->Wait().ok());
  for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], all[0]) << "rank " << r;
}

}  // namespace
}  // namespace zeroshard
