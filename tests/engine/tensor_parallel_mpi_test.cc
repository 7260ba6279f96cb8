// Tensor parallelism under mpirun: GPT-2 (n_head 12, so tp 2, 3 and 4 all
// hold whole heads) on a dp x tp grid, with and without sequence
// parallelism, trains to the losses and weights of a one-rank run on the
// same global batch within 1e-5 relative after 10 steps; for one layout
// every ZeRO stage gives bitwise the same weights and a rerun repeats bit
// for bit; every rank of a tp group reports the same loss.
//
// Then, per step and rank: the tp group's collectives and bytes equal the
// formulas of docs/parallelism.md exactly; model-state bytes are the ZeRO
// formulas over each tp rank's slices (split parameters / tp, replicated
// ones whole, the padded vocabulary); sequence parallelism divides the
// saved LayerNorm, residual and between-unit activations by tp.
//
// One launch per world size (2, 3, 4) runs the whole matrix in-process.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/testing/function_observer.h"
#include "engine/step_program.h"
#include "engine/testing/global_batch.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "models/gpt2/gpt2.h"
#include "nn/param_spec.h"
#include "sharding/flat_param_layout.h"
#include "sharding/testing/thread_communicator.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/weights.h"
#include "engine/testing/shared_seed.h"

namespace zeroshard {
namespace {

constexpr int kSteps = 10;

// Whole heads at tp 2, 3 and 4; seq_len 12 splits over each; vocab 67 is a
// multiple of none (the vocabulary is padded).
Gpt2Config TestModel(int tp) {
  Gpt2Config c;
  c.n_layer = 2;
  c.n_head = 12;
  c.n_embd = 48;
  c.vocab_size = 67;
  c.seq_len = 12;
  c.vocab_multiple = tp;
  return c;
}

int WorldSize() { return MpiWorldSize(); }

ProcessGrid& Grid(int dp, int tp) { return CachedGrid({dp, tp, 1}); }

struct Case {
  int dp = 1, tp = 1, stage = 0, m = 2;
  bool sp = false;
  bool keep_gathered = false;  // engine.parallel.keep_gathered_ln_outputs
  int steps = kSteps;
  DTypeProto compute = F32;  // F16 runs with a static loss scale of 1024
  ActivationCheckpointingConfig::Policy policy = ActivationCheckpointingConfig::NONE;
  std::string Name() const {
    return absl::StrCat("dp ", dp, " tp ", tp, " ZeRO ", stage, sp ? " sequence parallel" : "",
                        keep_gathered ? " keeping gathered LN outputs" : "",
                        compute == F32 ? "" : absl::StrCat(" ", DTypeProto_Name(compute)),
                        policy == ActivationCheckpointingConfig::NONE
                            ? ""
                            : absl::StrCat(" checkpointing ", ActivationCheckpointingConfig::Policy_Name(policy)));
  }
  int Batch() const { return 2 * dp * m; }
};

EngineConfig Config(const Case& c) {
  EngineConfig e;
  e.mutable_zero()->set_stage(c.stage);
  e.mutable_zero()->set_bucket_bytes(8192);
  e.set_gradient_accumulation_steps(c.m);
  e.mutable_parallel()->set_dp(c.dp);
  e.mutable_parallel()->set_tp(c.tp);
  e.mutable_parallel()->set_sequence_parallel(c.sp);
  e.mutable_parallel()->set_keep_gathered_ln_outputs(c.keep_gathered);
  e.mutable_optimizer()->set_lr(1e-3);
  e.mutable_optimizer()->set_eps(1e-6);
  e.mutable_device()->set_threads_per_rank(1);
  e.mutable_precision()->set_compute_dtype(c.compute);
  if (c.compute == F16) {
    e.mutable_precision()->mutable_loss_scale()->set_type(LossScaleConfig::STATIC);
    e.mutable_precision()->mutable_loss_scale()->set_initial_scale(1024);
  }
  e.mutable_activation_checkpointing()->set_policy(c.policy);
  e.set_seed(9);
  return e;
}

struct Outcome {
  Weights weights;
  std::vector<float> losses;
  bool loss_same_on_every_rank = true;
};

std::vector<int32_t> SharedTokens(int rows, const Gpt2Config& m, uint32_t* seed_out) {
  const int32_t seed = SharedTestSeed(Grid(WorldSize(), 1).world());
  *seed_out = static_cast<uint32_t>(seed);
  return RandomTokens(static_cast<uint32_t>(seed), rows, m.seq_len, m.vocab_size);
}

Outcome RunTensorParallel(const Case& c, const std::vector<int32_t>& tokens) {
  Outcome run;
  ProcessGrid& grid = Grid(c.dp, c.tp);
  auto engine = Engine::Create(Config(c), &grid, std::move(BuildGpt2(TestModel(c.tp))).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  std::vector<HostBatch> batches =
      MicroBatchesForRank(tokens, c.Batch(), TestModel(c.tp).seq_len, c.dp, c.m, grid.dp_rank());
  const std::vector<Batch> views = Views(batches);
  for (int s = 0; s < c.steps; ++s) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(views);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.losses.push_back(r->loss);
    std::vector<float> all(grid.world().size());
    EXPECT_TRUE(grid.world().AllGather(&r->loss, all.data(), 1, DType::kF32)->Wait().ok());
    for (float l : all) run.loss_same_on_every_rank = run.loss_same_on_every_rank && l == all[0];
  }
  run.weights = GatherWeights(**engine);
  return run;
}

// The same global batch on one rank (a private one-rank group), every dp
// replica's micro-batches in turn.
Outcome RunReference(const Case& c, const std::vector<int32_t>& tokens) {
  Outcome run;
  std::vector<std::unique_ptr<Communicator>> self = CreateThreadGroup(1);
  Case flat;
  flat.m = c.m * c.dp;
  auto engine =
      Engine::CreateWithCommunicator(Config(flat), self[0].get(), std::move(BuildGpt2(TestModel(1))).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, c.Batch(), TestModel(1).seq_len, 1, flat.m, 0);
  const std::vector<Batch> views = Views(batches);
  for (int s = 0; s < kSteps; ++s) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(views);
    EXPECT_TRUE(r.ok()) << r.status();
    run.losses.push_back(r->loss);
  }
  run.weights = GatherWeights(**engine);
  return run;
}

TEST(TensorParallelMpiTest, EveryLayoutStageAndSequenceParallelismMatchesOneRank) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "tensor parallelism needs at least 2 ranks";
  std::vector<std::pair<int, int>> shapes = {{1, n}};  // (dp, tp)
  if (n == 4) shapes.push_back({2, 2});
  for (const auto& [dp, tp] : shapes) {
    Case base;
    base.dp = dp;
    base.tp = tp;
    uint32_t seed = 0;
    const std::vector<int32_t> tokens = SharedTokens(base.Batch(), TestModel(1), &seed);
    SCOPED_TRACE(absl::StrCat("token seed ", seed));
    const Outcome reference = RunReference(base, tokens);
    for (bool sp : {false, true}) {
      std::vector<int> stages = {0, 3};
      if (dp == 2) stages = {0, 1, 2, 3};
      Outcome first;
      for (int stage : stages) {
        Case c = base;
        c.sp = sp;
        c.stage = stage;
        SCOPED_TRACE(c.Name());
        const Outcome run = RunTensorParallel(c, tokens);
        const double rel = RelativeL2(run.weights, reference.weights);
        EXPECT_LE(rel, 1e-5);
        ASSERT_EQ(run.losses.size(), reference.losses.size());
        for (int s = 0; s < kSteps; ++s) {
          EXPECT_NEAR(run.losses[s], reference.losses[s], 1e-5 * reference.losses[s]) << "step " << s + 1;
        }
        EXPECT_TRUE(run.loss_same_on_every_rank);
        if (stage == 0) {
          first = run;
          EXPECT_TRUE(BitwiseEqual(RunTensorParallel(c, tokens).weights, run.weights)) << "a rerun differs";
        } else {
          EXPECT_TRUE(BitwiseEqual(run.weights, first.weights)) << "differs from ZeRO stage 0";
        }
        if (Grid(dp, tp).world().rank() == 0) {
          std::printf("%s: relative L2 to one rank %.3g, loss %.6f -> %.6f\n", c.Name().c_str(), rel,
                      run.losses.front(), run.losses.back());
        }
      }
    }
  }
}

// The tp group's collectives over one step, from the per-call tables of
// docs/parallelism.md: f32 (e = 4), L blocks, N = B·T rows per micro-batch,
// bytes sent in comm/comm_stats.h's ring convention.
struct TpTraffic {
  int tp = 1;
  std::map<CommOp, OpCounters> ops;
  void Add(CommOp op, int64_t count) {
    OpCounters& c = ops[op];
    ++c.calls;
    const int64_t bytes = 4 * count;
    c.bytes_sent += op == CommOp::kAllReduce ? 2 * (tp - 1) * bytes / tp : (tp - 1) * bytes;
  }
};

// keep_gathered: the backward's ln_1/ln_2 output gathers are not issued.
TpTraffic ExpectedTpTraffic(int tp, bool sp, int m, int L, int64_t N, int64_t C, bool keep_gathered = false) {
  TpTraffic t;
  t.tp = tp;
  const int64_t rows = N / tp;
  for (int mb = 0; mb < m; ++mb) {
    if (!sp) {
      t.Add(CommOp::kAllReduce, N * C);  // embed forward
      for (int b = 0; b < 2 * L; ++b) t.Add(CommOp::kAllReduce, N * C);  // row-parallel outputs
      t.Add(CommOp::kAllReduce, N);      // head: row max
      t.Add(CommOp::kAllReduce, 2 * N);  // head: sum of exponentials, target logit
      t.Add(CommOp::kAllReduce, N * C);  // head backward: d(ln_f out)
      for (int b = 0; b < 2 * L; ++b) t.Add(CommOp::kAllReduce, N * C);  // column-parallel input grads
      continue;
    }
    t.Add(CommOp::kReduceScatter, rows * C);  // embed forward
    for (int b = 0; b < L; ++b) {
      for (int i = 0; i < 2; ++i) t.Add(CommOp::kAllGather, rows * C);
      for (int i = 0; i < 2; ++i) t.Add(CommOp::kReduceScatter, rows * C);
    }
    t.Add(CommOp::kAllGather, rows * C);  // head: ln_f input rows
    t.Add(CommOp::kAllReduce, N);
    t.Add(CommOp::kAllReduce, 2 * N);
    t.Add(CommOp::kReduceScatter, rows * C);  // head backward
    t.Add(CommOp::kAllReduce, 2 * C);         // ln_f's gradients
    for (int b = 0; b < L; ++b) {
      for (int i = 0; i < (keep_gathered ? 2 : 4); ++i) t.Add(CommOp::kAllGather, rows * C);
      for (int i = 0; i < 2; ++i) t.Add(CommOp::kReduceScatter, rows * C);
      t.Add(CommOp::kAllReduce, 4 * C);  // LayerNorms' gradients
    }
    t.Add(CommOp::kAllGather, rows * C);  // embed backward: output gradient rows
  }
  return t;
}

// Model-state bytes per rank from the parameter declarations: each unit's
// flat buffer holds this tp rank's slices (LocalShape), which ZeRO shards
// over dp as at tp 1 (docs/sharding.md).
struct StateTheory {
  int64_t padded = 0;  // Σ units' flat buffers at this dp, alignment included
  int64_t shard = 0;   // Σ units' shards
  int64_t local = 0;   // Σ units' local elements: split / tp + replicated
  int64_t split = 0, replicated = 0;  // whole-model elements, vocabulary padding included
};

StateTheory ModelStateTheory(const Model& model, int dp, int tp) {
  StateTheory t;
  for (const auto& unit : model.units) {
    std::vector<FlatParamDecl> decls;
    for (const ParamSpec& p : unit->params()) {
      decls.push_back({p.name, *LocalShape(p, tp)});
      (p.partition.replicated() ? t.replicated : t.split) += p.numel();
    }
    const FlatParamLayout l = *FlatParamLayout::Create(unit->name(), 0, decls, dp);
    t.padded += l.padded_numel();
    t.shard += l.shard_numel();
    t.local += l.numel();
  }
  return t;
}

TEST(TensorParallelMpiTest, TpCollectivesAndModelStateMatchTheFormulas) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "tensor parallelism needs at least 2 ranks";
  std::vector<std::pair<int, int>> shapes = {{1, n}};
  if (n == 4) shapes.push_back({2, 2});
  for (const auto& [dp, tp] : shapes) {
    Case c;
    c.dp = dp;
    c.tp = tp;
    uint32_t seed = 0;
    const std::vector<int32_t> tokens = SharedTokens(c.Batch(), TestModel(1), &seed);
    const Gpt2Config model = TestModel(tp);
    const int64_t N = int64_t{c.Batch() / (dp * c.m)} * model.seq_len;  // rows per micro-batch
    for (bool sp : {false, true}) {
      for (int stage = 0; stage <= 3; ++stage) {
        c.sp = sp;
        c.stage = stage;
        SCOPED_TRACE(c.Name());
        ProcessGrid& grid = Grid(dp, tp);
        std::unique_ptr<Model> built = std::move(BuildGpt2(model)).value();
        const StateTheory theory = ModelStateTheory(*built, dp, tp);
        // Split parameters divide over tp; the vocabulary is padded (67 -> a multiple of tp).
        EXPECT_EQ(theory.local, theory.split / tp + theory.replicated);
        EXPECT_EQ(theory.split + theory.replicated,
                  built->num_logical_params() + (model.padded_vocab_size() - model.vocab_size) * model.n_embd);
        auto engine = Engine::Create(Config(c), &grid, std::move(built));
        ASSERT_TRUE(engine.ok()) << engine.status();
        std::vector<HostBatch> batches =
            MicroBatchesForRank(tokens, c.Batch(), model.seq_len, dp, c.m, grid.dp_rank());
        const std::vector<Batch> views = Views(batches);
        const CommStats before = (*engine)->comm_stats_by_group().at("tp");
        ASSERT_TRUE((*engine)->TrainStep(views).ok());
        const CommStats ran = (*engine)->comm_stats_by_group().at("tp") - before;
        const TpTraffic want = ExpectedTpTraffic(tp, sp, c.m, model.n_layer, N, model.n_embd);
        for (CommOp op : {CommOp::kAllGather, CommOp::kReduceScatter, CommOp::kAllReduce}) {
          const OpCounters w = want.ops.count(op) ? want.ops.at(op) : OpCounters{};
          EXPECT_EQ(ran[op].calls, w.calls) << CommOpName(op);
          EXPECT_EQ(ran[op].bytes_sent, w.bytes_sent) << CommOpName(op);
        }
        int64_t want_calls = 0;  // nothing else runs on tp
        for (const auto& [op, counters] : want.ops) want_calls += counters.calls;
        EXPECT_EQ(ran.Total().calls, want_calls);
        const MemoryTracker& mem = (*engine)->memory();
        EXPECT_EQ(mem.Usage(MemoryCategory::kParams).current, 4 * (stage == 3 ? theory.shard : theory.padded));
        EXPECT_EQ(mem.Usage(MemoryCategory::kGrads).current, 4 * (stage <= 1 ? theory.padded : theory.shard));
        EXPECT_EQ(mem.Usage(MemoryCategory::kMasterParams).current, 4 * (stage == 0 ? theory.padded : theory.shard));
        EXPECT_EQ(mem.Usage(MemoryCategory::kOptimizerState).current, 8 * (stage == 0 ? theory.padded : theory.shard));
        if (grid.world().rank() == 0 && stage == 3) {
          std::printf("%s: tp sent %lld bytes in %lld collectives per step; model state %lld bytes per rank\n",
                      c.Name().c_str(), static_cast<long long>(ran.Total().bytes_sent),
                      static_cast<long long>(ran.Total().calls),
                      static_cast<long long>(mem.Usage(MemoryCategory::kParams).current +
                                             mem.Usage(MemoryCategory::kGrads).current +
                                             mem.Usage(MemoryCategory::kMasterParams).current +
                                             mem.Usage(MemoryCategory::kOptimizerState).current));
        }
      }
    }
  }
}

// Activations kept when the first backward starts (one micro-batch, nothing
// recomputed): sequence parallelism keeps 1/tp of every row-split tensor.
int64_t KeptActivationBytes(const Case& c, const std::vector<int32_t>& tokens) {
  ProcessGrid& grid = Grid(c.dp, c.tp);
  FunctionObserver at_backward;  // before the engine: it outlives it
  auto engine = Engine::Create(Config(c), &grid, std::move(BuildGpt2(TestModel(c.tp))).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return -1;
  int64_t kept = -1;
  Engine& trained = **engine;
  at_backward.action_start = [&](const ActionEvent& a) {
    if (kept < 0 && a.action->kind == ActionKind::kBackward) {
      kept = trained.memory().Usage(MemoryCategory::kActivations).current;
    }
  };
  trained.AddObserver(&at_backward);
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, c.Batch(), TestModel(c.tp).seq_len, c.dp, c.m,
                                                       grid.dp_rank());
  EXPECT_TRUE((*engine)->TrainStep(Views(batches)).ok());
  return kept;
}

TEST(TensorParallelMpiTest, SequenceParallelismDividesRowActivationsByTp) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "tensor parallelism needs at least 2 ranks";
  Case c;
  c.tp = n;
  c.m = 1;
  uint32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(c.Batch(), TestModel(1), &seed);
  const int64_t off = KeptActivationBytes(c, tokens);
  c.sp = true;
  const int64_t on = KeptActivationBytes(c, tokens);
  const Gpt2Config model = TestModel(n);
  const int64_t N = int64_t{c.Batch()} * model.seq_len, C = model.n_embd, L = model.n_layer;
  // Row-split under sequence parallelism (docs/parallelism.md): per block x
  // (the previous unit's output, kept once), ln_1 out, res2, ln_2 out and
  // four f32 statistics; the head's input rows (the last block's output) and
  // ln_f's two statistics.
  const int64_t row_bytes = L * (4 * N * C * 4 + 16 * N) + (N * C * 4 + 8 * N);
  if (Grid(1, n).world().rank() == 0) {
    std::printf("tp %d: activations kept after forward %lld bytes, with sequence parallelism %lld\n", n,
                static_cast<long long>(off), static_cast<long long>(on));
  }
  EXPECT_EQ(off - on, row_bytes - row_bytes / n);
}

// Sequence parallelism keeping the gathered LayerNorm outputs, at ZeRO 3
// on every rank as tp: bitwise the weights and losses of regathering (also
// under full activation checkpointing, whose recomputed forward gathers
// again); per step 2 fewer tp all-gathers per block and micro-batch
// (ExpectedTpTraffic exactly); the activations kept at the first backward up
// by the two outputs' other ranks' rows, 2·(N − N/tp)·C·4 per block.
TEST(TensorParallelMpiTest, KeepingGatheredLayerNormOutputsIsBitwiseWithTwoGathersFewerPerBlock) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "tensor parallelism needs at least 2 ranks";
  Case base;
  base.tp = n;
  base.stage = 3;
  base.sp = true;
  base.steps = 3;
  uint32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(base.Batch(), TestModel(1), &seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const Gpt2Config model = TestModel(n);
  for (auto policy : {ActivationCheckpointingConfig::NONE, ActivationCheckpointingConfig::EVERY_UNIT}) {
    Case c = base;
    c.policy = policy;
    const Outcome regathered = RunTensorParallel(c, tokens);
    c.keep_gathered = true;
    SCOPED_TRACE(c.Name());
    const Outcome kept = RunTensorParallel(c, tokens);
    EXPECT_TRUE(BitwiseEqual(kept.weights, regathered.weights)) << "differs from regathering";
    EXPECT_EQ(kept.losses, regathered.losses);
  }
  Case c = base;
  c.keep_gathered = true;
  ProcessGrid& grid = Grid(1, n);
  auto engine = Engine::Create(Config(c), &grid, std::move(BuildGpt2(model)).value());
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, c.Batch(), model.seq_len, 1, c.m, 0);
  const CommStats before = (*engine)->comm_stats_by_group().at("tp");
  ASSERT_TRUE((*engine)->TrainStep(Views(batches)).ok());
  const CommStats ran = (*engine)->comm_stats_by_group().at("tp") - before;
  const int64_t N = int64_t{c.Batch() / c.m} * model.seq_len, C = model.n_embd, L = model.n_layer;
  const TpTraffic want = ExpectedTpTraffic(n, true, c.m, L, N, C, /*keep_gathered=*/true);
  const TpTraffic regather = ExpectedTpTraffic(n, true, c.m, L, N, C);
  EXPECT_EQ(regather.ops.at(CommOp::kAllGather).calls - want.ops.at(CommOp::kAllGather).calls, 2 * L * c.m);
  for (CommOp op : {CommOp::kAllGather, CommOp::kReduceScatter, CommOp::kAllReduce}) {
    EXPECT_EQ(ran[op].calls, want.ops.at(op).calls) << CommOpName(op);
    EXPECT_EQ(ran[op].bytes_sent, want.ops.at(op).bytes_sent) << CommOpName(op);
  }
  Case one = base;
  one.m = 1;
  const int64_t off = KeptActivationBytes(one, tokens);
  one.keep_gathered = true;
  const int64_t on = KeptActivationBytes(one, tokens);
  const int64_t rows = int64_t{one.Batch()} * model.seq_len;
  EXPECT_EQ(on - off, L * 2 * (rows - rows / n) * C * 4);
}

// bf16 and f16 at tp 2 (tp 3 on 3 ranks) track the f32 run of the same
// layout within the precision tests' tolerances (tests/engine/
// precision_mpi_test.cc: step 1 within 1e-3 relative, every step within
// 0.25 absolute while the same batch is memorised); every activation-
// checkpointing policy gives bitwise the weights of none.
TEST(TensorParallelMpiTest, LowPrecisionTracksF32AndCheckpointingIsBitwise) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "tensor parallelism needs at least 2 ranks";
  Case base;
  base.tp = n % 2 == 0 ? 2 : n;
  base.dp = n / base.tp;
  base.stage = 3;
  base.sp = true;
  base.steps = 60;
  uint32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(base.Batch(), TestModel(1), &seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const Outcome f32 = RunTensorParallel(base, tokens);
  ASSERT_EQ(f32.losses.size(), static_cast<size_t>(base.steps));
  EXPECT_LT(f32.losses.back(), f32.losses.front() - 1.0f);  // it memorises the batch
  for (DTypeProto dtype : {BF16, F16}) {
    Case c = base;
    c.compute = dtype;
    SCOPED_TRACE(c.Name());
    const Outcome run = RunTensorParallel(c, tokens);
    ASSERT_EQ(run.losses.size(), f32.losses.size());
    EXPECT_LE(std::fabs(run.losses[0] - f32.losses[0]), 1e-3 * f32.losses[0]);
    double worst = 0;
    for (int s = 0; s < c.steps; ++s) worst = std::max(worst, std::fabs(double{run.losses[s]} - f32.losses[s]));
    EXPECT_LE(worst, 0.25);
    if (Grid(c.dp, c.tp).world().rank() == 0) {
      std::printf("%s: loss %.4f -> %.4f, worst |loss - f32 loss| %.4f\n", c.Name().c_str(), run.losses.front(),
                  run.losses.back(), worst);
    }
  }
  Case plain = base;
  plain.steps = 5;
  const Outcome none = RunTensorParallel(plain, tokens);
  for (auto policy : {ActivationCheckpointingConfig::EVERY_UNIT, ActivationCheckpointingConfig::EVERY_KTH}) {
    Case c = plain;
    c.policy = policy;
    SCOPED_TRACE(c.Name());
    EXPECT_TRUE(BitwiseEqual(RunTensorParallel(c, tokens).weights, none.weights)) << "differs from no checkpointing";
  }
}

// The trace draws each tp collective a unit issues (category "tp", on the
// comm track), as many per rank as the step issues.
TEST(TensorParallelMpiTest, TraceShowsEveryTpCollective) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "tensor parallelism needs at least 2 ranks";
  Case c;
  c.tp = n;
  c.sp = true;
  c.stage = 3;
  uint32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(c.Batch(), TestModel(1), &seed);
  const std::string path = absl::StrCat(getenv("TEST_TMPDIR"), "/tp_trace_", n, ".json");
  EngineConfig config = Config(c);
  config.mutable_logging()->set_trace_path(path);
  config.mutable_logging()->set_trace_steps(1);
  ProcessGrid& grid = Grid(c.dp, c.tp);
  auto engine = Engine::Create(config, &grid, std::move(BuildGpt2(TestModel(c.tp))).value());
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<HostBatch> batches =
      MicroBatchesForRank(tokens, c.Batch(), TestModel(c.tp).seq_len, c.dp, c.m, grid.dp_rank());
  ASSERT_TRUE((*engine)->TrainStep(Views(batches)).ok());
  ASSERT_TRUE((*engine)->WriteTrace().ok());
  if (grid.world().rank() != 0) return;
  std::ifstream file(path);
  const nlohmann::json trace = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(trace.is_discarded()) << path;
  EXPECT_EQ(trace["otherData"]["tp"], n);
  EXPECT_EQ(trace["otherData"]["sequence_parallel"], true);
  std::map<int, int64_t> per_rank;
  std::set<std::string> names;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "tp") continue;
    ++per_rank[e["pid"].get<int>()];
    names.insert(e["name"].get<std::string>().substr(0, e["name"].get<std::string>().find(' ', 3)));
  }
  const TpTraffic want = ExpectedTpTraffic(n, true, c.m, TestModel(n).n_layer, int64_t{2} * TestModel(n).seq_len,
                                           TestModel(n).n_embd);
  int64_t want_calls = 0;
  for (const auto& [op, counters] : want.ops) want_calls += counters.calls;
  ASSERT_EQ(static_cast<int>(per_rank.size()), n);
  for (const auto& [rank, count] : per_rank) EXPECT_EQ(count, want_calls) << "rank " << rank;
  EXPECT_EQ(names, (std::set<std::string>{"tp AllGather", "tp AllReduce(max)", "tp AllReduce(sum)", "tp AllReduce",
                                          "tp ReduceScatter"}));
}

// Ranks of one tp group that build another model, or run another tp
// layout, fail at Create on every rank with the fingerprint error.
TEST(TensorParallelMpiTest, ATpRankWithAnotherModelOrLayoutFailsCreateEverywhere) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "tensor parallelism needs at least 2 ranks";
  Case c;
  c.tp = n;
  ProcessGrid& grid = Grid(c.dp, c.tp);
  const bool last = grid.world().rank() == n - 1;
  Gpt2Config model = TestModel(n);
  if (last) model.n_layer = 3;
  auto engine = Engine::Create(Config(c), &grid, std::move(BuildGpt2(model)).value());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(engine.status().message(), absl::StrCat("the model differs across the ", n,
                                                                       " world ranks: world rank ",
                                                                       grid.world().rank(), " has ")))
      << engine.status();
  Case other = c;
  other.sp = last;
  engine = Engine::Create(Config(other), &grid, std::move(BuildGpt2(TestModel(n))).value());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(engine.status().message(),
                               absl::StrCat("the engine config differs across the ", n, " world ranks")))
      << engine.status();
}

}  // namespace
}  // namespace zeroshard
