// Engine tests with dp ranks as threads (sharding/testing/thread_communicator.h)
// and the loop-based toy model: parity, stage equality, repeatability,
// memory and communication accounting, errors. The same claims for GPT-2
// under mpirun live in tests/engine/.
#include "comm/status_agreement.h"
#include "core/testing/test_seed.h"
#include "engine/engine.h"
#include "sharding/flat_param_layout.h"

#include <cmath>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nn/param_init.h"
#include "engine/testing/global_batch.h"
#include "sharding/testing/thread_communicator.h"
#include "engine/testing/toy_model.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 36;  // divisible by dp * k for dp in 1..4, k in {1, 3}
const ToyModelConfig kToy{2, 16, 67, 8};

struct RunSpec {
  int stage = 0;
  int dp = 1;
  int k = 1;
  ZeroConfig::ReduceMode mode = ZeroConfig::ACCUMULATE;
  int prefetch = 1;
  int64_t persistence_threshold = 0;
  bool reshard_after_forward = true;
  int64_t bucket_bytes = 4096;
  OptimizerConfig::Type optimizer = OptimizerConfig::ADAMW;
  int steps = 10;
  ActivationCheckpointingConfig::Policy checkpointing = ActivationCheckpointingConfig::NONE;
  int checkpoint_k = 2;
  bool head_owns_wte = false;  // the embedding borrows wte from the (later) head
};

EngineConfig MakeConfig(const RunSpec& s) {
  EngineConfig c;
  c.mutable_zero()->set_stage(s.stage);
  c.mutable_zero()->set_prefetch(s.prefetch);
  c.mutable_zero()->set_persistence_threshold(s.persistence_threshold);
  c.mutable_zero()->set_reshard_after_forward(s.reshard_after_forward);
  c.mutable_zero()->set_bucket_bytes(s.bucket_bytes);
  c.mutable_zero()->set_reduce_mode(s.mode);
  c.set_gradient_accumulation_steps(s.k);
  c.mutable_parallel()->set_dp(s.dp);
  c.mutable_optimizer()->set_type(s.optimizer);
  c.mutable_optimizer()->set_lr(1e-3);
  // 1e-6, not PyTorch's 1e-8: with 1e-8 AdamW turns near-zero gradients
  // (pure f32 summation noise) into ~lr steps of noise-chosen sign, and an
  // unlucky draw drifts past 1e-6 between dp sizes (tests/engine has details).
  c.mutable_optimizer()->set_eps(1e-6);
  c.mutable_optimizer()->set_weight_decay(0.1);
  c.mutable_optimizer()->set_grad_clip(1.0);
  c.mutable_optimizer()->set_momentum(s.optimizer == OptimizerConfig::SGD ? 0.9 : 0.0);
  c.mutable_optimizer()->set_nesterov(s.optimizer == OptimizerConfig::SGD);
  c.mutable_lr_schedule()->set_type(LrScheduleConfig::WARMUP_COSINE);
  c.mutable_lr_schedule()->set_warmup_steps(2);
  c.mutable_lr_schedule()->set_decay_steps(10);
  c.mutable_lr_schedule()->set_min_lr(1e-4);
  c.mutable_device()->set_threads_per_rank(1);
  c.mutable_activation_checkpointing()->set_policy(s.checkpointing);
  c.mutable_activation_checkpointing()->set_k(s.checkpoint_k);
  c.set_seed(42);
  return c;
}

// The toy model's engine for `spec` over `comm` (collective).
absl::StatusOr<std::unique_ptr<Engine>> CreateToyEngine(const RunSpec& spec, Communicator* comm) {
  ToyModelConfig toy = kToy;
  toy.head_owns_wte = spec.head_owns_wte;
  return Engine::CreateWithCommunicator(MakeConfig(spec), comm, BuildToyModel(toy));
}

// ZeRO-3 over `dp` ranks, everything else as RunSpec's defaults.
RunSpec Stage3(int dp) {
  RunSpec s;
  s.dp = dp;
  s.stage = 3;
  return s;
}

std::vector<int32_t> RandomTokens(uint32_t seed) {
  return ::zeroshard::RandomTokens(seed, kGlobalBatch, kToy.seq_len, kToy.vocab_size);
}

std::vector<HostBatch> SliceBatch(const std::vector<int32_t>& tokens, int dp, int k, int rank) {
  return MicroBatchesForRank(tokens, kGlobalBatch, kToy.seq_len, dp, k, rank);
}

struct MemorySnapshot {
  int64_t params = 0, master = 0, grads = 0, optim = 0, params_peak = 0;
};

struct RunOutput {
  std::map<std::string, std::vector<float>> weights;  // gathered on rank 0
  std::vector<StepResult> results;                    // rank 0
  std::vector<MemorySnapshot> memory;                 // per rank, after step 1
  std::vector<CommStats> step1_comm;                  // per rank, during step 1
  std::vector<int> peak_gathered_units;               // per rank
  std::vector<int64_t> shard_params_bytes;            // per rank: stage-3 shard bytes
};

// Runs `fn(rank, comm)` on dp threads.
template <typename Fn>
void OnRanks(int dp, Fn fn) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(dp);
  std::vector<std::thread> threads;
  for (int r = 0; r < dp; ++r) threads.emplace_back([&, r] { fn(r, comms[r].get()); });
  for (std::thread& t : threads) t.join();
}

RunOutput RunEngine(const RunSpec& spec, const std::vector<int32_t>& tokens) {
  RunOutput out;
  out.memory.resize(spec.dp);
  out.step1_comm.resize(spec.dp);
  out.peak_gathered_units.resize(spec.dp);
  out.shard_params_bytes.resize(spec.dp);
  OnRanks(spec.dp, [&](int rank, Communicator* comm) {
    auto engine = CreateToyEngine(spec, comm);
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<HostBatch> batches = SliceBatch(tokens, spec.dp, spec.k, rank);
    std::vector<Batch> views = Views(batches);
    for (int step = 1; step <= spec.steps; ++step) {
      const CommStats before = (*engine)->comm_stats();
      (*engine)->memory().ResetPeaks();
      absl::StatusOr<StepResult> result = (*engine)->TrainStep(views);
      ASSERT_TRUE(result.ok()) << result.status();
      if (rank == 0) out.results.push_back(*result);
      if (step == 1) {
        const MemoryTracker& m = (*engine)->memory();
        out.memory[rank] = {m.Usage(MemoryCategory::kParams).current, m.Usage(MemoryCategory::kMasterParams).current,
                            m.Usage(MemoryCategory::kGrads).current,
                            m.Usage(MemoryCategory::kOptimizerState).current,
                            m.Usage(MemoryCategory::kParams).peak};
        out.step1_comm[rank] = (*engine)->comm_stats() - before;
      }
    }
    out.peak_gathered_units[rank] = (*engine)->stats().peak_gathered_units;
    for (const std::string& name : (*engine)->ParamNames()) {
      absl::StatusOr<std::vector<float>> w = (*engine)->GatherParam(name);
      ASSERT_TRUE(w.ok()) << w.status();
      if (rank == 0) out.weights[name] = std::move(*w);
    }
  });
  return out;
}

bool BitwiseEqual(const RunOutput& a, const RunOutput& b) {
  if (a.weights.size() != b.weights.size()) return false;
  for (const auto& [name, w] : a.weights) {
    const std::vector<float>& v = b.weights.at(name);
    if (w.size() != v.size() || std::memcmp(w.data(), v.data(), w.size() * sizeof(float)) != 0) return false;
  }
  return true;
}

// Per tensor, ||a - ref||_2 / ||ref||_2; the worst tensor. This is the
// "relative" of the parity claim. (The element-wise max |a - ref| / max |ref|
// is reported by MaxElementDiff: AdamW's normalisation turns the f32
// summation-order noise of small gradients into a few ulps more there.)
double MaxRelativeDiff(const RunOutput& a, const RunOutput& ref) {
  double worst = 0;
  for (const auto& [name, r] : ref.weights) {
    const std::vector<float>& v = a.weights.at(name);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      const double d = static_cast<double>(v[i]) - r[i];
      diff += d * d;
      norm += static_cast<double>(r[i]) * r[i];
    }
    worst = std::max(worst, std::sqrt(diff / norm));
  }
  return worst;
}

// ||a - ref||_2 / ||ref||_2 over every parameter together.
double WholeRelativeDiff(const RunOutput& a, const RunOutput& ref) {
  double diff = 0, norm = 0;
  for (const auto& [name, r] : ref.weights) {
    const std::vector<float>& v = a.weights.at(name);
    for (size_t i = 0; i < r.size(); ++i) {
      const double d = static_cast<double>(v[i]) - r[i];
      diff += d * d;
      norm += static_cast<double>(r[i]) * r[i];
    }
  }
  return std::sqrt(diff / norm);
}

double MaxElementDiff(const RunOutput& a, const RunOutput& ref) {
  double worst = 0;
  for (const auto& [name, r] : ref.weights) {
    const std::vector<float>& v = a.weights.at(name);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(v[i]) - r[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(r[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// Runs `spec` at stages 1, 2 and 3 and expects each bitwise equal to
// `stage0`, the same spec's stage-0 result.
void ExpectStages1To3BitwiseEqual(RunSpec spec, const std::vector<int32_t>& tokens, const RunOutput& stage0) {
  for (int stage : {1, 2, 3}) {
    spec.stage = stage;
    EXPECT_TRUE(BitwiseEqual(RunEngine(spec, tokens), stage0)) << "stage " << stage;
  }
}

TEST(EngineTest, ParityStagesDpAccumulation) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  RunSpec ref_spec;  // single rank, stage 0, no accumulation
  const RunOutput ref = RunEngine(ref_spec, tokens);
  ASSERT_EQ(ref.results.size(), 10u);
  EXPECT_LT(ref.results.back().loss, ref.results.front().loss) << "the reference did not learn";
  for (int k : {1, 3}) {
    for (int dp : {1, 2, 3, 4}) {
      RunOutput stage0;
      for (int stage : {0, 1, 2, 3}) {
        SCOPED_TRACE(absl::StrCat("stage ", stage, " dp ", dp, " k ", k));
        RunSpec spec;
        spec.stage = stage;
        spec.dp = dp;
        spec.k = k;
        RunOutput out = RunEngine(spec, tokens);
        const double whole = WholeRelativeDiff(out, ref);
        const double rel = MaxRelativeDiff(out, ref);
        const double element = MaxElementDiff(out, ref);
        EXPECT_LE(whole, 1e-6);
        EXPECT_LE(rel, 1e-5);
        EXPECT_LE(element, 1e-4);
        if (stage == 0) {
          stage0 = std::move(out);
          RunOutput again = RunEngine(spec, tokens);
          EXPECT_TRUE(BitwiseEqual(stage0, again)) << "run twice differs";
        } else {
          EXPECT_TRUE(BitwiseEqual(out, stage0)) << "differs from stage 0";
        }
        std::printf("stage %d dp %d k %d: whole-model relative L2 diff %.3g, worst tensor %.3g, max element diff "
                    "%.3g\n", stage, dp, k, whole, rel, element);
      }
    }
  }
}

// Sum over units of the padded numel P and the shard numel S at `dp`.
struct Sizes {
  int64_t P = 0, S = 0, max_P = 0, embed_P = 0;
  std::vector<int64_t> unit_P, unit_S, unit_N;
};
Sizes LayoutSizes(int dp) {
  Sizes s;
  std::unique_ptr<Model> model = BuildToyModel(kToy);
  for (int u = 0; u < static_cast<int>(model->units.size()); ++u) {
    std::vector<FlatParamDecl> decls;
    for (const ParamSpec& p : model->units[u]->params()) decls.push_back({p.name, p.shape});
    FlatParamLayout l = *FlatParamLayout::Create(model->units[u]->name(), u, decls, dp);
    s.P += l.padded_numel();
    s.S += l.shard_numel();
    s.max_P = std::max(s.max_P, l.padded_numel());
    if (u == 0) s.embed_P = l.padded_numel();
    s.unit_P.push_back(l.padded_numel());
    s.unit_S.push_back(l.shard_numel());
    s.unit_N.push_back(l.numel());
  }
  return s;
}

TEST(EngineTest, MemoryAfterFirstStepMatchesStageFormulas) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  for (int dp : {1, 3, 4}) {
    const Sizes z = LayoutSizes(dp);
    ASSERT_EQ(z.S * dp, z.P);
    for (int stage : {0, 1, 2, 3}) {
      SCOPED_TRACE(absl::StrCat("stage ", stage, " dp ", dp));
      RunSpec spec;
      spec.stage = stage;
      spec.dp = dp;
      spec.steps = 1;
      const RunOutput out = RunEngine(spec, tokens);
      for (int r = 0; r < dp; ++r) {
        const MemorySnapshot& m = out.memory[r];
        // f32 compute: 4 bytes params, 4 grads, 4 master, 8 AdamW (m, v).
        EXPECT_EQ(m.params, 4 * (stage == 3 ? z.S : z.P));
        EXPECT_EQ(m.grads, 4 * (stage <= 1 ? z.P : z.S));
        EXPECT_EQ(m.master, 4 * (stage == 0 ? z.P : z.S));
        EXPECT_EQ(m.optim, 8 * (stage == 0 ? z.P : z.S));
        if (stage == 3) {
          // Gathered working set: the unit, the next `prefetch` (1) one, and
          // the tied owner "embed" held across each pass.
          EXPECT_LE(m.params_peak - 4 * z.S, 4 * (2 * z.max_P + z.embed_P));
          EXPECT_GT(m.params_peak - 4 * z.S, 4 * z.max_P) << "nothing was prefetched";
          EXPECT_EQ(out.peak_gathered_units[r], 3);
        }
      }
    }
  }
}

TEST(EngineTest, CommBytesPerStepMatchTheory) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  for (int dp : {2, 3, 4}) {
    const Sizes z = LayoutSizes(dp);
    for (int k : {1, 3}) {
      for (auto mode : {ZeroConfig::ACCUMULATE, ZeroConfig::DEFER}) {
        if (k == 1 && mode == ZeroConfig::DEFER) continue;
        for (int stage : {0, 1, 2, 3}) {
          SCOPED_TRACE(absl::StrCat("stage ", stage, " dp ", dp, " k ", k, " mode ", mode));
          RunSpec spec;
          spec.stage = stage;
          spec.dp = dp;
          spec.k = k;
          spec.mode = mode;
          spec.steps = 1;
          const RunOutput out = RunEngine(spec, tokens);
          // Elements moved per rank by one pass over every unit: Psi (N-1)/N.
          const int64_t pass_bytes = 4 * z.S * (dp - 1);
          const int64_t reductions = mode == ZeroConfig::ACCUMULATE ? k : 1;
          // Stage 3 gathers every unit for forward and again for backward,
          // but the head and the embedding it reads stay gathered across
          // each micro-batch's turnaround from forward to backward.
          const int64_t turnaround_bytes = 4 * (z.unit_S.front() + z.unit_S.back()) * (dp - 1);
          const int64_t gather_bytes = stage == 3 ? k * (2 * pass_bytes - turnaround_bytes) : pass_bytes;
          // The batch-signature agreement: an AllGather of 9 i32 words per
          // rank (here on the same communicator as the data).
          const int64_t agreement = 9 * 4 * (dp - 1);
          for (int r = 0; r < dp; ++r) {
            const CommStats& c = out.step1_comm[r];
            EXPECT_EQ(c[CommOp::kReduceScatter].bytes_sent, reductions * pass_bytes);
            EXPECT_EQ(c[CommOp::kAllGather].bytes_sent, gather_bytes + agreement);
            // [sum of squares, loss sum, loss weight, overflow flag, failed allocations].
            EXPECT_EQ(c[CommOp::kAllReduce].calls, 1);
            EXPECT_EQ(c[CommOp::kAllReduce].bytes_sent, 2 * 5 * 4 * (dp - 1) / dp);
            if (k == 1) {
              const int64_t theory = (stage == 3 ? 3 : 2) * z.P * (dp - 1) / dp * 4 - (stage == 3 ? turnaround_bytes : 0);
              EXPECT_EQ(c[CommOp::kReduceScatter].bytes_sent + c[CommOp::kAllGather].bytes_sent - agreement, theory);
            }
          }
        }
      }
    }
  }
}

TEST(EngineTest, DeferEqualsAcrossStagesAndMatchesAccumulate) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  RunSpec spec;
  spec.dp = 2;
  spec.k = 3;
  spec.mode = ZeroConfig::ACCUMULATE;
  const RunOutput accumulate = RunEngine(spec, tokens);
  spec.mode = ZeroConfig::DEFER;
  const RunOutput defer0 = RunEngine(spec, tokens);
  EXPECT_LE(MaxRelativeDiff(defer0, accumulate), 1e-6);
  ExpectStages1To3BitwiseEqual(spec, tokens, defer0);
}

TEST(EngineTest, SgdNesterovStagesBitwiseEqual) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  RunSpec spec;
  spec.optimizer = OptimizerConfig::SGD;
  const RunOutput ref = RunEngine(spec, tokens);
  spec.dp = 3;
  const RunOutput dp3 = RunEngine(spec, tokens);
  EXPECT_LE(MaxRelativeDiff(dp3, ref), 1e-6);
  ExpectStages1To3BitwiseEqual(spec, tokens, dp3);
}

TEST(EngineTest, LionStagesBitwiseEqual) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  RunSpec spec;
  spec.optimizer = OptimizerConfig::LION;
  spec.dp = 2;
  const RunOutput stage0 = RunEngine(spec, tokens);
  ExpectStages1To3BitwiseEqual(spec, tokens, stage0);
}

TEST(EngineTest, PersistentUnitsGatherOncePerStep) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  const int dp = 2;
  const Sizes z = LayoutSizes(dp);
  RunSpec spec;
  spec.stage = 3;
  spec.dp = dp;
  spec.steps = 1;
  spec.persistence_threshold = 1000;  // the blocks (272) and head (16); not embed (1200)
  ASSERT_GT(z.unit_N[0], spec.persistence_threshold);
  const RunOutput persistent = RunEngine(spec, tokens);
  spec.persistence_threshold = 0;
  spec.reshard_after_forward = false;
  const RunOutput no_reshard = RunEngine(spec, tokens);
  spec.reshard_after_forward = true;
  spec.prefetch = 0;
  const RunOutput no_prefetch = RunEngine(spec, tokens);
  spec.prefetch = 1;
  const RunOutput base = RunEngine(spec, tokens);
  int64_t persistent_S = 0;
  for (size_t u = 1; u < z.unit_S.size(); ++u) persistent_S += z.unit_S[u];
  const int64_t agreement = 9 * 4 * (dp - 1);  // the batch-signature AllGather
  for (int r = 0; r < dp; ++r) {
    // Persistent units once per step, and embed once too: the head reads
    // it, so it stays gathered across the turnaround.
    EXPECT_EQ(persistent.step1_comm[r][CommOp::kAllGather].bytes_sent - agreement,
              4 * (dp - 1) * (persistent_S + z.unit_S[0]));
    // Without resharding every unit is gathered once.
    EXPECT_EQ(no_reshard.step1_comm[r][CommOp::kAllGather].bytes_sent - agreement, 4 * (dp - 1) * z.S);
    EXPECT_EQ(no_prefetch.peak_gathered_units[r], 2);  // the unit and the held tied owner
  }
  EXPECT_TRUE(BitwiseEqual(persistent, base));
  EXPECT_TRUE(BitwiseEqual(no_reshard, base));
  EXPECT_TRUE(BitwiseEqual(no_prefetch, base));
}

// The tied weight either owned by the first unit and borrowed by the last
// (GPT-2's layout) or owned by the last and borrowed by the first: a
// borrower's gradient must land before its owner's bucket is reduced, so
// both layouts train the same model at every stage (bucket_bytes 0: one
// bucket per unit, so the owner's bucket would close before the borrower's
// backward if the closing rule ignored borrowers).
TEST(EngineTest, BorrowingFromAnEarlierOrALaterUnitTrainsTheSameAtEveryStage) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  RunSpec spec;
  spec.dp = 2;
  spec.steps = 3;
  spec.bucket_bytes = 0;
  const RunOutput earlier = RunEngine(spec, tokens);  // head borrows from embed
  spec.head_owns_wte = true;
  const RunOutput later = RunEngine(spec, tokens);  // embed borrows from head
  // Other flat layouts: the gradient norm sums in another order.
  EXPECT_LE(WholeRelativeDiff(later, earlier), 1e-6);
  EXPECT_LE(MaxElementDiff(later, earlier), 1e-5);
  ExpectStages1To3BitwiseEqual(spec, tokens, later);
}

TEST(EngineTest, BucketSizeDoesNotChangeStageEquality) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  RunSpec spec;
  spec.dp = 3;
  spec.bucket_bytes = 0;  // every unit alone
  const RunOutput alone = RunEngine(spec, tokens);
  spec.bucket_bytes = 1 << 20;  // everything in one bucket
  const RunOutput fused0 = RunEngine(spec, tokens);
  EXPECT_LE(MaxRelativeDiff(fused0, alone), 1e-6);
  ExpectStages1To3BitwiseEqual(spec, tokens, fused0);
}

// Error cases: every rank returns a status, none hangs.
TEST(EngineTest, DifferentModelsFailCreateOnEveryRank) {
  OnRanks(2, [](int rank, Communicator* comm) {
    ToyModelConfig cfg = kToy;
    if (rank == 1) cfg.n_layer = 3;
    RunSpec spec;
    spec.dp = 2;
    auto engine = Engine::CreateWithCommunicator(MakeConfig(spec), comm, BuildToyModel(cfg));
    ASSERT_FALSE(engine.ok());
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StartsWith(engine.status().message(),
                                 absl::StrCat("the model differs across the 2 dp ranks: dp rank ", rank, " has ",
                                              rank == 1 ? 5 : 4, " units")))
        << engine.status();
  });
}

TEST(EngineTest, DifferentConfigsFailCreateOnEveryRank) {
  OnRanks(3, [](int rank, Communicator* comm) {
    RunSpec spec;
    spec.dp = 3;
    spec.stage = rank == 2 ? 2 : 3;
    auto engine = CreateToyEngine(spec, comm);
    ASSERT_FALSE(engine.ok());
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StartsWith(engine.status().message(),
                                 absl::StrCat("the engine config differs across the 3 dp ranks: dp rank ", rank)))
        << engine.status();
  });
}

// Recomputing units must not change a single bit of the weights. (The toy
// model does not count its saved tensors in the tracker; the activation
// memory claim is tested on GPT-2 in tests/engine/precision_mpi_test.cc.)
TEST(EngineTest, CheckpointingKeepsWeightsBitwise) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  for (int stage = 0; stage <= 3; ++stage) {
    RunSpec none;
    none.stage = stage;
    none.dp = 2;
    none.steps = 3;
    RunSpec every = none, kth = none;
    every.checkpointing = ActivationCheckpointingConfig::EVERY_UNIT;
    kth.checkpointing = ActivationCheckpointingConfig::EVERY_KTH;
    const RunOutput a = RunEngine(none, tokens), b = RunEngine(every, tokens), c = RunEngine(kth, tokens);
    EXPECT_TRUE(BitwiseEqual(a, b)) << "stage " << stage;
    EXPECT_TRUE(BitwiseEqual(a, c)) << "stage " << stage;
  }
}

TEST(EngineTest, CheckpointingPolicyPicksUnits) {
  struct Case {
    ActivationCheckpointingConfig::Policy policy;
    int k;
    std::vector<std::string> named;
    std::vector<bool> expected;  // embed, blk.0, blk.1, blk.2, head
  };
  const std::vector<Case> cases = {
      {ActivationCheckpointingConfig::NONE, 2, {}, {false, false, false, false, false}},
      {ActivationCheckpointingConfig::EVERY_UNIT, 2, {}, {true, true, true, true, false}},
      {ActivationCheckpointingConfig::EVERY_KTH, 2, {}, {true, false, true, false, false}},
      {ActivationCheckpointingConfig::EVERY_KTH, 3, {}, {true, false, false, true, false}},
      {ActivationCheckpointingConfig::NAMED, 2, {"blk.1", "head"}, {false, false, true, false, true}},
  };
  ToyModelConfig toy = kToy;
  toy.n_layer = 3;
  for (const Case& c : cases) {
    OnRanks(1, [&](int, Communicator* comm) {
      EngineConfig config = MakeConfig(RunSpec());
      config.mutable_activation_checkpointing()->set_policy(c.policy);
      config.mutable_activation_checkpointing()->set_k(c.k);
      for (const std::string& u : c.named) config.mutable_activation_checkpointing()->add_units(u);
      auto engine = Engine::CreateWithCommunicator(config, comm, BuildToyModel(toy));
      ASSERT_TRUE(engine.ok()) << engine.status();
      EXPECT_EQ((*engine)->checkpointed_units(), c.expected)
          << ActivationCheckpointingConfig::Policy_Name(c.policy) << " k " << c.k;
    });
  }
  OnRanks(2, [&](int, Communicator* comm) {
    RunSpec spec;
    spec.dp = 2;
    EngineConfig config = MakeConfig(spec);
    config.mutable_activation_checkpointing()->set_policy(ActivationCheckpointingConfig::NAMED);
    config.mutable_activation_checkpointing()->add_units("blk.9");
    auto engine = Engine::CreateWithCommunicator(config, comm, BuildToyModel(kToy));
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(engine.status().message(),
              "engine.activation_checkpointing.units: 'blk.9' is not a unit of the model (4 units, first 'embed')");
  });
}

// bf16 compute: 2-byte parameters (full or shard) and full gradients, the
// same f32 master and optimizer state (no step needed: the at-rest buffers).
TEST(EngineTest, Bf16HalvesParamsAndFullGrads) {
  for (int stage = 0; stage <= 3; ++stage) {
    int64_t bytes[2][4];  // [f32, bf16][params, grads, master, optimizer]
    for (int d = 0; d < 2; ++d) {
      OnRanks(2, [&](int rank, Communicator* comm) {
        RunSpec spec;
        spec.stage = stage;
        spec.dp = 2;
        EngineConfig config = MakeConfig(spec);
        config.mutable_precision()->set_compute_dtype(d == 0 ? F32 : BF16);
        auto engine = Engine::CreateWithCommunicator(config, comm, BuildToyModel(kToy));
        ASSERT_TRUE(engine.ok()) << engine.status();
        if (rank != 0) return;
        const MemoryTracker& m = (*engine)->memory();
        bytes[d][0] = m.Usage(MemoryCategory::kParams).current;
        bytes[d][1] = m.Usage(MemoryCategory::kGrads).current;
        bytes[d][2] = m.Usage(MemoryCategory::kMasterParams).current;
        bytes[d][3] = m.Usage(MemoryCategory::kOptimizerState).current;
      });
    }
    EXPECT_EQ(bytes[1][0] * 2, bytes[0][0]) << "stage " << stage;
    // Stages 0-1 hold full compute-dtype gradients at rest; stages 2-3 the
    // f32 reduced shard (its full bf16 buffer exists only during backward).
    if (stage <= 1) {
      EXPECT_EQ(bytes[1][1] * 2, bytes[0][1]) << "stage " << stage;
    } else {
      EXPECT_EQ(bytes[1][1], bytes[0][1]) << "stage " << stage;
    }
    EXPECT_EQ(bytes[1][2], bytes[0][2]) << "stage " << stage;
    EXPECT_EQ(bytes[1][3], bytes[0][3]) << "stage " << stage;
    EXPECT_GT(bytes[0][0], 0);
  }
}

TEST(EngineTest, LocalCreateErrorReachesEveryRank) {
  OnRanks(2, [](int rank, Communicator* comm) {
    RunSpec spec;
    spec.dp = 2;
    EngineConfig config = MakeConfig(spec);
    if (rank == 0) config.mutable_precision()->set_master_dtype(BF16);
    auto engine = Engine::CreateWithCommunicator(config, comm, BuildToyModel(kToy));
    ASSERT_FALSE(engine.ok());
    if (rank == 0) {
      EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument) << engine.status();
    } else {
      EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ(engine.status().message(),
                "Engine::Create failed on another of the 2 dp ranks (see its error); this rank (dp rank 1) was fine");
    }
  });
}

TEST(EngineTest, DpSizeMismatchIsInvalidArgumentOnEveryRank) {
  OnRanks(2, [](int rank, Communicator* comm) {
    RunSpec spec;
    spec.dp = 4;
    auto engine = CreateToyEngine(spec, comm);
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(engine.status().message(), "engine.parallel.dp: 4 but the dp communicator has 2 ranks");
  });
}

TEST(EngineTest, BadBatchFailsOnEveryRankAndEngineRecovers) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  OnRanks(2, [&](int rank, Communicator* comm) {
    auto engine = CreateToyEngine(Stage3(2), comm);
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<HostBatch> batches = SliceBatch(tokens, 2, 1, rank);
    const TensorView inputs = *batches[0].view.Find("inputs"), targets = *batches[0].view.Find("targets");
    // Rank 1's targets have the wrong shape.
    TensorView reshaped = targets;
    reshaped.shape = {targets.shape[0] * 2, targets.shape[1] / 2};
    const Batch bad = rank == 1 ? Batch{{"inputs", inputs}, {"targets", reshaped}} : batches[0].view;
    absl::StatusOr<StepResult> r = (*engine)->TrainStep({&bad, 1});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    if (rank == 1) {
      EXPECT_EQ(r.status().message(),
                "micro-batch 0: batch tensor 'targets' is i32[36, 4], expected 18 rows on dimension 0 like 'inputs'");
    } else {
      EXPECT_EQ(r.status().message(), "the step could not start on dp rank 1 (see its error); this rank (dp rank 0) "
                                      "was fine");
      EXPECT_TRUE(IsRelayedError(r.status()));
    }
    // Ranks disagree on B: rank 1 passes half its rows.
    TensorView half_inputs = inputs, half_targets = targets;
    half_inputs.shape[0] = half_targets.shape[0] = 9;
    const Batch shorter = rank == 1 ? Batch{{"inputs", half_inputs}, {"targets", half_targets}} : batches[0].view;
    r = (*engine)->TrainStep({&shorter, 1});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(),
              absl::StrCat("the micro-batches differ across dp ranks: dp rank(s) 1 have other names, dtypes or shapes "
                           "than dp rank 0; this rank (dp rank ",
                           rank, ") has [0] inputs:i32[", rank == 1 ? 9 : 18, ", 8] targets:i32[", rank == 1 ? 9 : 18,
                           ", 8]"));
    // Wrong number of micro-batches on rank 0.
    std::vector<Batch> two = {batches[0].view, batches[0].view};
    r = (*engine)->TrainStep(rank == 0 ? absl::MakeConstSpan(two) : absl::MakeConstSpan(two.data(), 1));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    if (rank == 0) {
      EXPECT_EQ(r.status().message(), "got 2 micro-batches, expected gradient_accumulation_steps=1");
    }
    // Nothing was changed: a good step still works and counts as step 1.
    r = (*engine)->TrainStep({&batches[0].view, 1});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->step, 1);
    EXPECT_EQ(r->rows, kGlobalBatch);
    EXPECT_EQ(r->loss_weight, kGlobalBatch * kToy.seq_len);
  });
}

TEST(EngineTest, UnknownParamNameIsNotFoundOnEveryRank) {
  OnRanks(3, [](int rank, Communicator* comm) {
    auto engine = CreateToyEngine(Stage3(3), comm);
    ASSERT_TRUE(engine.ok()) << engine.status();
    absl::StatusOr<std::vector<float>> w = (*engine)->GatherParam("h.0.attn.c_attn.weight");
    EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(w.status().message(), "no parameter named 'h.0.attn.c_attn.weight' in the model (4 units; e.g. 'wte.weight')");
    // Still usable afterwards: the initial weights equal InitParam's.
    w = (*engine)->GatherParam("blk.1.fc.weight");
    ASSERT_TRUE(w.ok()) << w.status();
    std::vector<float> expected(16 * 16);
    InitParam((*engine)->model().units[2]->params()[0], 42, expected.data());
    EXPECT_EQ(*w, expected);
  });
}

TEST(EngineTest, ReportsLossNormAndLr) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  RunSpec spec;
  spec.dp = 2;
  spec.stage = 2;
  spec.steps = 3;
  const RunOutput out = RunEngine(spec, tokens);
  ASSERT_EQ(out.results.size(), 3u);
  // Warmup over 2 steps to 1e-3, then cosine to 1e-4 at step 10.
  EXPECT_FLOAT_EQ(out.results[0].lr, 5e-4f);
  EXPECT_FLOAT_EQ(out.results[1].lr, 1e-3f);
  EXPECT_FLOAT_EQ(out.results[2].lr, static_cast<float>(1e-4 + 0.9e-3 * 0.5 * (1 + std::cos(M_PI / 8))));
  for (const StepResult& r : out.results) {
    EXPECT_FALSE(r.skipped);
    EXPECT_GT(r.grad_norm, 0.0f);
    EXPECT_TRUE(std::isfinite(r.loss));
    EXPECT_NEAR(r.loss, std::log(67.0), 0.5);
  }
  EXPECT_EQ(out.results[2].step, 3);
}

TEST(EngineTest, EvaluateMatchesFirstStepLossAndReleasesGathers) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  OnRanks(3, [&](int rank, Communicator* comm) {
    SCOPED_TRACE(absl::StrCat("token seed ", seed));  // a trace covers its own thread only
    auto engine = CreateToyEngine(Stage3(3), comm);
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<HostBatch> batches = SliceBatch(tokens, 3, 1, rank);
    const int64_t shard_bytes = (*engine)->memory().Usage(MemoryCategory::kParams).current;
    absl::StatusOr<EvalResult> eval = (*engine)->Evaluate(batches[0].view);
    ASSERT_TRUE(eval.ok()) << eval.status();
    EXPECT_EQ((*engine)->memory().Usage(MemoryCategory::kParams).current, shard_bytes) << "a gather was kept";
    absl::StatusOr<StepResult> step = (*engine)->TrainStep({&batches[0].view, 1});
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_EQ(eval->loss, step->loss);  // same weights, same batch, same reduction
    EXPECT_EQ(eval->loss_weight, step->loss_weight);
    absl::StatusOr<EvalResult> after = (*engine)->Evaluate(batches[0].view);
    ASSERT_TRUE(after.ok());
    EXPECT_LT(after->loss, eval->loss);
  });
}

// A non-finite gradient norm skips the update on every rank: no weight
// moves, the step is not counted, and the next clean step is step 1.
TEST(EngineTest, NonFiniteGradientSkipsTheStepEverywhere) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  OnRanks(2, [&](int rank, Communicator* comm) {
    RunSpec spec;
    spec.dp = 2;
    spec.stage = 3;
    ToyModelConfig cfg = kToy;
    cfg.nan_target = 66;
    auto engine = Engine::CreateWithCommunicator(MakeConfig(spec), comm, BuildToyModel(cfg));
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<HostBatch> batches = SliceBatch(tokens, 2, 1, rank);
    // Only rank 1 sees the poisoning target; clean it from rank 0's batch.
    for (int32_t& t : batches[0].targets) {
      if (rank == 0 && t == 66) t = 0;
    }
    if (rank == 1) batches[0].targets[5] = 66;
    auto before = (*engine)->GatherParam("blk.0.fc.weight");
    ASSERT_TRUE(before.ok());
    absl::StatusOr<StepResult> r = (*engine)->TrainStep({&batches[0].view, 1});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->skipped);
    EXPECT_TRUE(std::isnan(r->grad_norm));
    EXPECT_EQ(r->step, 0);
    auto after = (*engine)->GatherParam("blk.0.fc.weight");
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(*after, *before);
    for (int32_t& t : batches[0].targets) {
      if (t == 66) t = 1;
    }
    r = (*engine)->TrainStep({&batches[0].view, 1});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->skipped);
    EXPECT_EQ(r->step, 1);
    EXPECT_EQ(r->lr, 5e-4f);  // warmup step 1 of 2
  });
}

// A unit that owns no parameter (P = S = 0) takes part in every stage.
TEST(EngineTest, UnitWithoutParametersWorksInEveryStage) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  ToyModelConfig cfg = kToy;
  cfg.head_scale = false;
  std::vector<std::map<std::string, std::vector<float>>> weights(4);
  for (int stage = 0; stage <= 3; ++stage) {
    OnRanks(2, [&](int rank, Communicator* comm) {
      RunSpec spec;
      spec.dp = 2;
      spec.stage = stage;
      spec.bucket_bytes = 0;
      auto engine = Engine::CreateWithCommunicator(MakeConfig(spec), comm, BuildToyModel(cfg));
      ASSERT_TRUE(engine.ok()) << engine.status();
      EXPECT_EQ((*engine)->layout(3).padded_numel(), 0);
      std::vector<HostBatch> batches = SliceBatch(tokens, 2, 1, rank);
      for (int s = 0; s < 3; ++s) ASSERT_TRUE((*engine)->TrainStep({&batches[0].view, 1}).ok());
      for (const std::string& name : (*engine)->ParamNames()) {
        auto w = (*engine)->GatherParam(name);
        ASSERT_TRUE(w.ok()) << w.status();
        if (rank == 0) weights[stage][name] = *w;
      }
    });
    EXPECT_EQ(weights[stage], weights[0]) << "stage " << stage;
  }
  EXPECT_EQ(weights[0].count("ln_f.weight"), 0u);
}

// A unit failing mid-step (here on every rank, so nobody is left in a
// collective) leaves the engine refusing further work.
TEST(EngineTest, FailureInsideAStepMakesTheEngineRefuseWork) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  OnRanks(2, [&](int rank, Communicator* comm) {
    auto engine = CreateToyEngine(Stage3(2), comm);
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<HostBatch> batches = SliceBatch(tokens, 2, 1, rank);
    batches[0].inputs[3] = kToy.vocab_size;  // out of range: the embedding rejects it
    absl::StatusOr<StepResult> r = (*engine)->TrainStep({&batches[0].view, 1});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "token 67 at 3 is outside [0, 67)");
    batches[0].inputs[3] = 0;
    r = (*engine)->TrainStep({&batches[0].view, 1});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(r.status().message(),
              "the engine is unusable after a failure in the middle of a collective sequence: token 67 at 3 is "
              "outside [0, 67)");
    EXPECT_EQ((*engine)->GatherParam("wte.weight").status().code(), absl::StatusCode::kFailedPrecondition);
  });
}

// Records the order of unit calls and collectives, to check when the engine
// issues gathers and reductions relative to compute.
struct EventLog {
  std::vector<std::string> events;
};

class LoggingUnit : public Unit {
 public:
  LoggingUnit(std::unique_ptr<Unit> inner, EventLog* log) : inner_(std::move(inner)), log_(log) {}
  const std::string& name() const override { return inner_->name(); }
  const std::vector<ParamSpec>& params() const override { return inner_->params(); }
  std::vector<std::string> borrowed_params() const override { return inner_->borrowed_params(); }
  double NominalLossWeight(const Batch& batch) const override { return inner_->NominalLossWeight(batch); }
  absl::Status Forward(const UnitContext& ctx, absl::Span<const TensorView> params, const Batch& batch,
                       absl::Span<const TensorView> in, UnitOutput* out,
                       std::unique_ptr<SavedActivations>* saved) const override {
    log_->events.push_back("F " + name());
    return inner_->Forward(ctx, params, batch, in, out, saved);
  }
  absl::Status Backward(const UnitContext& ctx, absl::Span<const TensorView> params,
                        absl::Span<const TensorView> grads, const Batch& batch, const SavedActivations& saved,
                        absl::Span<const TensorView> grad_out, ActivationPack* grad_in) const override {
    log_->events.push_back("B " + name());
    return inner_->Backward(ctx, params, grads, batch, saved, grad_out, grad_in);
  }

 private:
  std::unique_ptr<Unit> inner_;
  EventLog* log_;
};

class LoggingCommunicator : public Communicator {
 public:
  LoggingCommunicator(Communicator* inner, EventLog* log) : inner_(inner), log_(log) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  Device device() const override { return inner_->device(); }
  std::unique_ptr<Work> AllGather(const void* in, void* out, int64_t count, DType dtype) override {
    log_->events.push_back(absl::StrCat("AG ", count));
    return inner_->AllGather(in, out, count, dtype);
  }
  std::unique_ptr<Work> AllToAll(const void* in, void* out, int64_t count, DType dtype) override {
    log_->events.push_back(absl::StrCat("A2A ", count));
    return inner_->AllToAll(in, out, count, dtype);
  }
  std::unique_ptr<Work> ReduceScatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    log_->events.push_back(absl::StrCat("RS ", count));
    return inner_->ReduceScatter(in, out, count, dtype, op);
  }
  std::unique_ptr<Work> AllReduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    log_->events.push_back(absl::StrCat("AR ", count));
    return inner_->AllReduce(buf, count, dtype, op);
  }
  std::unique_ptr<Work> Broadcast(void* buf, int64_t count, DType dtype, int root) override {
    return inner_->Broadcast(buf, count, dtype, root);
  }
  std::unique_ptr<Work> Send(const void* buf, int64_t count, DType dtype, int peer, int tag) override {
    return inner_->Send(buf, count, dtype, peer, tag);
  }
  std::unique_ptr<Work> Recv(void* buf, int64_t count, DType dtype, int peer, int tag) override {
    return inner_->Recv(buf, count, dtype, peer, tag);
  }
  std::unique_ptr<Work> Barrier() override { return inner_->Barrier(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key, const std::string& name) override {
    return inner_->Split(color, key, name);
  }
  CommStats Stats() const override { return inner_->Stats(); }

 private:
  Communicator* inner_;
  EventLog* log_;
};

// The order of one step's unit calls and collectives (dp = 1, one bucket per
// unit; units: embed 1200 elements, blk.0 and blk.1 272, head 16 borrowing
// wte). Stage 3 gathers one unit ahead and holds embed across each pass;
// stages 0, 2 and 3 launch a unit's reduce-scatter right after its backward,
// stage 1 after the whole backward.
std::vector<std::string> StepEvents(int stage) {
  EventLog log;
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(1);
  LoggingCommunicator comm(comms[0].get(), &log);
  std::unique_ptr<Model> model = BuildToyModel(kToy);
  for (auto& unit : model->units) unit = std::make_unique<LoggingUnit>(std::move(unit), &log);
  RunSpec spec;
  spec.stage = stage;
  spec.bucket_bytes = 0;
  auto engine = Engine::CreateWithCommunicator(MakeConfig(spec), &comm, std::move(model));
  EXPECT_TRUE(engine.ok()) << engine.status();
  const std::vector<int32_t> tokens = RandomTokens(1);
  std::vector<HostBatch> batches = SliceBatch(tokens, 1, 1, 0);
  log.events.clear();
  EXPECT_TRUE((*engine)->TrainStep({&batches[0].view, 1}).ok());
  return log.events;
}

TEST(EngineTest, Stage3GathersAheadAndReducesDuringBackward) {
  EXPECT_EQ(StepEvents(3), std::vector<std::string>({
                               "AG 9",                                    // batch signatures
                               "AG 1200", "AG 272", "F embed",            // embed + prefetch blk.0
                               "AG 272", "F blk.0",                       // prefetch blk.1
                               "AG 16", "F blk.1",                        // prefetch head (embed still held)
                               "F head",                                  // head and embed stay gathered
                               "AG 272", "B head",                        // prefetch blk.1
                               "RS 16", "AG 272", "B blk.1",              // head's reduction; prefetch blk.0
                               "RS 272", "B blk.0", "RS 272", "B embed",  //
                               "RS 1200", "AR 5",                         // embed's reduction; [sum sq, loss, weight, overflow, failures]
                           }));
}

TEST(EngineTest, Stage2ReducesDuringBackwardStage1AfterIt) {
  EXPECT_EQ(StepEvents(2), std::vector<std::string>({
                               "AG 9", "F embed", "F blk.0", "F blk.1", "F head",               //
                               "B head", "RS 16", "B blk.1", "RS 272", "B blk.0", "RS 272",     //
                               "B embed", "RS 1200", "AR 5", "AG 1200", "AG 272", "AG 272", "AG 16",  // publish
                           }));
  EXPECT_EQ(StepEvents(1), std::vector<std::string>({
                               "AG 9", "F embed", "F blk.0", "F blk.1", "F head",     //
                               "B head", "B blk.1", "B blk.0", "B embed",             //
                               "RS 16", "RS 272", "RS 272", "RS 1200", "AR 5",        //
                               "AG 1200", "AG 272", "AG 272", "AG 16",                //
                           }));
}

// Clipping scales the gradient by clip / (norm + 1e-6): with plain SGD that
// equals an unclipped run at lr * coefficient (up to one rounding per step).
TEST(EngineTest, ClippingAppliesTheCoefficient) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const std::vector<int32_t> tokens = RandomTokens(seed);
  auto run = [&](double clip, double lr, StepResult* result) {
    std::map<std::string, std::vector<float>> weights;
    OnRanks(2, [&](int rank, Communicator* comm) {
      RunSpec spec;
      spec.dp = 2;
      spec.stage = 2;
      EngineConfig config = MakeConfig(spec);
      config.mutable_optimizer()->set_type(OptimizerConfig::SGD);
      config.mutable_optimizer()->set_weight_decay(0);
      config.mutable_optimizer()->set_grad_clip(clip);
      config.mutable_optimizer()->set_lr(lr);
      config.mutable_lr_schedule()->set_type(LrScheduleConfig::CONSTANT);
      config.mutable_lr_schedule()->set_warmup_steps(0);
      auto engine = Engine::CreateWithCommunicator(config, comm, BuildToyModel(kToy));
      ASSERT_TRUE(engine.ok()) << engine.status();
      std::vector<HostBatch> batches = SliceBatch(tokens, 2, 1, rank);
      absl::StatusOr<StepResult> r = (*engine)->TrainStep({&batches[0].view, 1});
      ASSERT_TRUE(r.ok()) << r.status();
      if (rank == 0) *result = *r;
      for (const std::string& name : (*engine)->ParamNames()) {
        auto w = (*engine)->GatherParam(name);
        ASSERT_TRUE(w.ok());
        if (rank == 0) weights[name] = *w;
      }
    });
    return weights;
  };
  StepResult clipped, unclipped;
  const double clip = 1e-3;
  auto w_clipped = run(clip, 0.5, &clipped);
  ASSERT_GT(clipped.grad_norm, 10 * clip) << "the test needs clipping to engage";
  const double coeff = clip / (clipped.grad_norm + 1e-6);
  auto w_scaled = run(0.0, 0.5 * coeff, &unclipped);
  EXPECT_EQ(unclipped.grad_norm, clipped.grad_norm);
  for (const auto& [name, w] : w_clipped) {
    const std::vector<float>& v = w_scaled.at(name);
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(w[i], v[i], 1e-6 * std::fabs(v[i]) + 1e-9) << name << "[" << i << "]";
  }
}

}  // namespace
}  // namespace zeroshard
