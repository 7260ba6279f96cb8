// 3-D parallelism under mpirun -np 8: GPT-2 on a dp x tp x pp grid trains to
// the losses and weights of a one-rank run on the same global batch.
//
// (dp 2, tp 2, pp 2) runs every pipeline schedule (interleaved 1F1B with 2
// chunks per stage) at every ZeRO stage, with and without sequence
// parallelism; the other 8-rank
// layouts the model splits over, (4,1,2), (1,4,2), (2,4,1), (1,2,4) and
// (2,1,4), run 1F1B (and ZB-H1 at pp 4) at ZeRO 0 and 3. For each: the
// per-step losses and the GatherParam weights after kSteps are within 1e-5
// relative of the reference; every rank reports the same loss; the tied
// embedding's two copies stay bitwise equal; for one layout and sequence
// parallelism setting, every ZeRO stage and every schedule with one chunk
// per stage give bitwise the same weights, and a rerun repeats bit for bit.
// Activation checkpointing at (2, 2, 2) changes no bit and keeps fewer
// activations on every rank.
//
// One launch runs the whole matrix in-process.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/state_view.h"
#include "engine/testing/tied_copies.h"
#include "engine/testing/global_batch.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "sharding/testing/thread_communicator.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/weights.h"
#include "engine/testing/shared_seed.h"

namespace zeroshard {
namespace {

constexpr int kSteps = 6;
constexpr int kRows = 8;  // sequences per step, the same for every layout
// Below the gradient norm of every step (the reference asserts it), so the
// weights depend on the norm: each element counted once over dp, tp and pp
// (a replicated parameter on one tp rank, the tied mirror on one stage).
constexpr double kGradClip = 0.25;
using Schedule = ParallelConfig::PipelineSchedule;

// 4 heads and 4 blocks: whole heads at tp 2 and 4, 6 units (3 per stage at
// pp 2, so 2 chunks per stage fit; at least one per stage at pp 4); seq_len
// 8 splits over tp 4 under sequence parallelism; vocabulary 67 is padded at
// every tp > 1 and pads every unit's shard at dp 2 and 4.
Gpt2Config TestModel(int tp) {
  Gpt2Config c;
  c.n_layer = 4;
  c.n_head = 4;
  c.n_embd = 16;
  c.vocab_size = 67;
  c.seq_len = 8;
  c.vocab_multiple = tp;
  return c;
}

int WorldSize() { return MpiWorldSize(); }

// One grid per shape for the whole binary.
ProcessGrid& Grid(int dp, int tp, int pp) { return CachedGrid({dp, tp, pp}); }

struct Case {
  int dp = 1, tp = 1, pp = 1, v = 1, stage = 0;
  bool sp = false;
  bool checkpointing = false;  // EVERY_UNIT
  Schedule schedule = ParallelConfig::ONE_F_ONE_B;
  // Micro-batches per step: pp of them, so every schedule accepts the step
  // (interleaving needs a multiple of pp, ZB-H1 at least pp).
  int m() const { return std::max(pp, 2); }
  std::string Layout() const { return absl::StrCat("(dp ", dp, ", tp ", tp, ", pp ", pp, ")"); }
  std::string Name() const {
    return absl::StrCat(Layout(), " ", ParallelConfig::PipelineSchedule_Name(schedule), v > 1 ? " v 2" : "",
                        " ZeRO ", stage, sp ? " sequence parallel" : "", checkpointing ? " checkpointed" : "");
  }
};

EngineConfig Config(const Case& c) {
  EngineConfig e;
  e.mutable_zero()->set_stage(c.stage);
  e.mutable_zero()->set_bucket_bytes(4096);
  e.set_gradient_accumulation_steps(c.m());
  e.mutable_parallel()->set_dp(c.dp);
  e.mutable_parallel()->set_tp(c.tp);
  e.mutable_parallel()->set_pp(c.pp);
  e.mutable_parallel()->set_sequence_parallel(c.sp);
  e.mutable_parallel()->set_virtual_stages(c.v);
  e.mutable_parallel()->set_pipeline_schedule(c.schedule);
  e.mutable_optimizer()->set_lr(1e-3);
  e.mutable_optimizer()->set_eps(1e-6);  // see engine_mpi_test.cc: noise-driven AdamW steps
  e.mutable_optimizer()->set_grad_clip(kGradClip);
  e.mutable_optimizer()->set_weight_decay(0.1);
  e.mutable_device()->set_threads_per_rank(1);
  if (c.checkpointing) e.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::EVERY_UNIT);
  e.set_seed(11);
  return e;
}

struct Outcome {
  Weights weights;
  std::vector<float> losses;
  bool loss_same_on_every_rank = true;
  bool tied_equal = true;  // the embedding's mirror equals its owner after every step
  int64_t activations_peak = 0;  // this rank's
};

std::vector<int32_t> SharedTokens(uint32_t* seed_out) {
  const int32_t seed = SharedTestSeed(Grid(WorldSize(), 1, 1).world());
  *seed_out = static_cast<uint32_t>(seed);
  const Gpt2Config m = TestModel(1);
  return RandomTokens(static_cast<uint32_t>(seed), kRows, m.seq_len, m.vocab_size);
}

Outcome Run3d(const Case& c, const std::vector<int32_t>& tokens) {
  Outcome run;
  ProcessGrid& grid = Grid(c.dp, c.tp, c.pp);
  auto engine = Engine::Create(Config(c), &grid, std::move(BuildGpt2(TestModel(c.tp))).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  std::vector<HostBatch> batches =
      MicroBatchesForRank(tokens, kRows, TestModel(c.tp).seq_len, c.dp, c.m(), grid.dp_rank());
  const std::vector<Batch> views = Views(batches);
  for (int s = 0; s < kSteps; ++s) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(views);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.losses.push_back(r->loss);
    std::vector<float> all(grid.world().size());
    EXPECT_TRUE(grid.world().AllGather(&r->loss, all.data(), 1, DType::kF32)->Wait().ok());
    for (float l : all) run.loss_same_on_every_rank = run.loss_same_on_every_rank && l == all[0];
    run.tied_equal = run.tied_equal && TiedCopiesEqual(**engine, grid);
  }
  run.activations_peak = (*engine)->memory().Usage(MemoryCategory::kActivations).peak;
  run.weights = GatherWeights(**engine);
  return run;
}

// The same global batch on one rank (a private one-rank group): one
// micro-batch of every sequence. The loss and gradients are means over the
// step's tokens, so how a layout groups them changes only float rounding.
Outcome RunReference(const std::vector<int32_t>& tokens) {
  Outcome run;
  std::vector<std::unique_ptr<Communicator>> self = CreateThreadGroup(1);
  EngineConfig config = Config(Case{});
  config.set_gradient_accumulation_steps(1);
  auto engine = Engine::CreateWithCommunicator(config, self[0].get(), std::move(BuildGpt2(TestModel(1))).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kRows, TestModel(1).seq_len, 1, 1, 0);
  const std::vector<Batch> views = Views(batches);
  for (int s = 0; s < kSteps; ++s) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(views);
    EXPECT_TRUE(r.ok()) << r.status();
    run.losses.push_back(r->loss);
    EXPECT_GT(r->grad_norm, kGradClip) << "step " << s + 1 << " is not clipped";
  }
  run.weights = GatherWeights(**engine);
  return run;
}

void ExpectMatchesReference(const Case& c, const Outcome& run, const Outcome& reference) {
  const double rel = RelativeL2(run.weights, reference.weights);
  EXPECT_LE(rel, 1e-5);
  ASSERT_EQ(run.losses.size(), reference.losses.size());
  double worst_loss = 0;
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_NEAR(run.losses[s], reference.losses[s], 1e-5 * reference.losses[s]) << "step " << s + 1;
    worst_loss = std::max(worst_loss, std::fabs(double{run.losses[s]} - reference.losses[s]) / reference.losses[s]);
  }
  EXPECT_TRUE(run.loss_same_on_every_rank);
  EXPECT_TRUE(run.tied_equal) << "the tied embedding's two copies diverged";
  if (Grid(WorldSize(), 1, 1).world().rank() == 0) {
    std::printf("%s: weights relative L2 to one rank %.3g, worst loss relative %.3g, loss %.6f -> %.6f\n",
                c.Name().c_str(), rel, worst_loss, run.losses.front(), run.losses.back());
  }
}

// Every case of one layout and sequence-parallelism setting against the
// reference and against each other: the first one-chunk case is the bitwise
// baseline (and is rerun); interleaving cuts other chunks, which regroups
// the norm's partial sums, so its cases have their own baseline.
void RunLayout(const Case& base, const std::vector<std::pair<Schedule, std::vector<int>>>& schedules,
               const std::vector<int32_t>& tokens, const Outcome& reference) {
  Outcome one_chunk, interleaved;
  for (const auto& [schedule, stages] : schedules) {
    for (int stage : stages) {
      Case c = base;
      c.schedule = schedule;
      c.v = schedule == ParallelConfig::INTERLEAVED_1F1B ? 2 : 1;
      c.stage = stage;
      SCOPED_TRACE(c.Name());
      const Outcome run = Run3d(c, tokens);
      ExpectMatchesReference(c, run, reference);
      Outcome& baseline = c.v > 1 ? interleaved : one_chunk;
      if (baseline.weights.empty()) {
        baseline = run;
        EXPECT_TRUE(BitwiseEqual(Run3d(c, tokens).weights, run.weights)) << "a rerun differs";
      } else {
        EXPECT_TRUE(BitwiseEqual(run.weights, baseline.weights)) << "differs from the layout's first case";
        EXPECT_EQ(run.losses, baseline.losses);
      }
    }
  }
}

TEST(ThreeDMpiTest, EveryLayoutScheduleStageAndSequenceParallelismMatchesOneRank) {
  if (WorldSize() != 8) GTEST_SKIP() << "the 3-D layouts need 8 ranks";
  uint32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(&seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const Outcome reference = RunReference(tokens);

  const std::vector<int> all_stages = {0, 1, 2, 3};
  const std::vector<int> ends = {0, 3};
  for (bool sp : {false, true}) {
    Case c;
    c.dp = c.tp = c.pp = 2;
    c.sp = sp;
    RunLayout(c,
              {{ParallelConfig::GPIPE, all_stages},
               {ParallelConfig::ONE_F_ONE_B, all_stages},
               {ParallelConfig::ZERO_BUBBLE_H1, all_stages},
               {ParallelConfig::INTERLEAVED_1F1B, all_stages}},
              tokens, reference);
  }
  struct Layout {
    int dp, tp, pp;
  };
  for (const Layout& l : std::vector<Layout>{{4, 1, 2}, {1, 4, 2}, {2, 4, 1}, {1, 2, 4}, {2, 1, 4}}) {
    Case c;
    c.dp = l.dp;
    c.tp = l.tp;
    c.pp = l.pp;
    c.sp = l.tp > 1;
    std::vector<std::pair<Schedule, std::vector<int>>> schedules = {{ParallelConfig::ONE_F_ONE_B, ends}};
    if (l.pp == 4) schedules.push_back({ParallelConfig::ZERO_BUBBLE_H1, {0}});
    RunLayout(c, schedules, tokens, reference);
  }
}

// Each stage recomputes its units' forwards, tp collectives included, from
// the inputs it kept.
TEST(ThreeDMpiTest, CheckpointingChangesNoBitAndKeepsFewerActivations) {
  if (WorldSize() != 8) GTEST_SKIP() << "the 3-D layouts need 8 ranks";
  uint32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(&seed);
  for (bool sp : {false, true}) {
    Case c;
    c.dp = c.tp = c.pp = 2;
    c.sp = sp;
    c.stage = 3;
    SCOPED_TRACE(absl::StrCat("token seed ", seed, " ", c.Name()));
    const Outcome kept = Run3d(c, tokens);
    c.checkpointing = true;
    const Outcome recomputed = Run3d(c, tokens);
    EXPECT_TRUE(BitwiseEqual(recomputed.weights, kept.weights));
    EXPECT_EQ(recomputed.losses, kept.losses);
    EXPECT_LT(recomputed.activations_peak, kept.activations_peak);
  }
}

}  // namespace
}  // namespace zeroshard
