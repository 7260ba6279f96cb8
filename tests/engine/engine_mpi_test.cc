// The sharding engine on GPT-2 tiny under mpirun (one process per dp rank,
// the MPI backend): parity with an independent single-rank unsharded
// reference (nn/ResidentModel + the AdamW kernel), bitwise equality of
// stages 0-3 and of repeated runs, exact memory and communication
// accounting, and errors returned on every rank.
//
// GPT-2 tiny: 2 layers, 2 heads, C = 16, V = 67, T = 8 (67 makes the unit
// sizes indivisible by dp 2, 3, 4); 36 sequences per step so every dp in
// 1..4 times accumulation in {1, 3} divides the global batch.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/mpi_communicator.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "sharding/flat_param_layout.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "tests/data_parallel_world.h"
#include "kernels/optimizer.h"
#include "models/gpt2/gpt2.h"
#include "nn/resident_model.h"
#include "sharding/grad_clip.h"
#include "sharding/lr_schedule.h"
#include "sharding/weight_decay_policy.h"
#include "engine/testing/weights.h"
#include "engine/testing/shared_seed.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 36;
constexpr int kSteps = 10;
constexpr uint64_t kSeed = 7;
// AdamW's eps. PyTorch's 1e-8 lets gradients that are f32 noise (|g| far
// below 1e-8 relative to the rest) move weights by ~lr in a noise-chosen
// direction, so two summation orders can drift apart by more than 1e-6 on an
// unlucky token draw; 1e-6 keeps the comparison about the engine.
constexpr float kAdamEps = 1e-6f;

Gpt2Config Tiny() { return TinyGpt2(); }

EngineConfig MakeConfig(int stage, int dp, int k) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_zero()->set_prefetch(1);
  c.mutable_zero()->set_bucket_bytes(8192);
  c.set_gradient_accumulation_steps(k);
  c.mutable_parallel()->set_dp(dp);
  c.mutable_optimizer()->set_lr(1e-3);
  c.mutable_optimizer()->set_eps(kAdamEps);
  c.mutable_optimizer()->set_weight_decay(0.1);
  c.mutable_optimizer()->set_grad_clip(1.0);
  c.mutable_lr_schedule()->set_type(LrScheduleConfig::WARMUP_COSINE);
  c.mutable_lr_schedule()->set_warmup_steps(2);
  c.mutable_lr_schedule()->set_decay_steps(kSteps);
  c.mutable_lr_schedule()->set_min_lr(1e-4);
  c.mutable_device()->set_threads_per_rank(1);
  c.set_seed(kSeed);
  return c;
}

// One grid for the whole binary: dp = every rank.
ProcessGrid& Grid() { return DataParallelWorld(); }

// Tokens every rank agrees on, from a random seed every rank agrees on (the
// largest of the ranks' draws), stored in *seed for the caller's SCOPED_TRACE.
std::vector<int32_t> SharedTokens(int32_t* seed) {
  *seed = SharedTestSeed(Grid().dp());
  return RandomTokens(static_cast<uint32_t>(*seed), kGlobalBatch, Tiny().seq_len, Tiny().vocab_size);
}

struct EngineRun {
  Weights weights;
  std::vector<StepResult> results;
};

EngineRun RunEngine(int stage, int k, const std::vector<int32_t>& tokens) {
  EngineRun run;
  const int dp = Grid().dp().size();
  auto model = BuildGpt2(Tiny());
  EXPECT_TRUE(model.ok()) << model.status();
  auto engine = Engine::Create(MakeConfig(stage, dp, k), &Grid(), std::move(model).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  std::vector<HostBatch> batches =
      MicroBatchesForRank(tokens, kGlobalBatch, Tiny().seq_len, dp, k, Grid().dp_rank());
  const std::vector<Batch> views = Views(batches);
  for (int s = 0; s < kSteps; ++s) {
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(views);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.results.push_back(*r);
  }
  for (const std::string& name : (*engine)->ParamNames()) {
    absl::StatusOr<std::vector<float>> w = (*engine)->GatherParam(name);
    EXPECT_TRUE(w.ok()) << w.status();
    if (w.ok()) run.weights[name] = std::move(*w);
  }
  return run;
}

// The independent reference: every parameter resident, the whole global
// batch in one forward/backward, PyTorch's clip_grad_norm_ and AdamW.
Weights RunReference(const std::vector<int32_t>& tokens) {
  auto model = BuildGpt2(Tiny());
  EXPECT_TRUE(model.ok());
  ComputeContext ctx;
  ctx.kernels = kernels::KernelContext::Cpu(1);
  auto rm = ResidentModel::Create(model->get(), ctx);
  EXPECT_TRUE(rm.ok()) << rm.status();
  EXPECT_TRUE(rm->InitParams(kSeed).ok());
  std::vector<HostBatch> whole = MicroBatchesForRank(tokens, kGlobalBatch, Tiny().seq_len, 1, 1, 0);
  const EngineConfig config = MakeConfig(0, 1, 1);
  LrScheduleOptions lr_options;
  lr_options.type = LrScheduleType::kWarmupCosine;
  lr_options.lr = config.optimizer().lr();
  lr_options.min_lr = config.lr_schedule().min_lr();
  lr_options.warmup_steps = config.lr_schedule().warmup_steps();
  lr_options.decay_steps = config.lr_schedule().decay_steps();
  const LrSchedule schedule = *LrSchedule::Create(lr_options);
  const WeightDecayPolicy decay;
  struct Param {
    TensorView p, g;
    std::vector<float> m, v;
    bool decay;
  };
  std::vector<Param> params;
  for (const auto& unit : (*model)->units) {
    for (const ParamSpec& spec : unit->params()) {
      ParamLocation loc = *(*model)->FindParam(spec.name);
      params.push_back({rm->param(loc), rm->grad(loc), std::vector<float>(spec.numel()),
                        std::vector<float>(spec.numel()), decay.Decays(spec.name, spec.no_weight_decay)});
    }
  }
  for (int step = 1; step <= kSteps; ++step) {
    EXPECT_TRUE(rm->ZeroGrads().ok());
    // d(objective)/d(loss sum) of the mean over the global batch's tokens.
    EXPECT_TRUE(rm->ForwardBackward(whole[0].view, 1.0f / (kGlobalBatch * Tiny().seq_len)).ok());
    double sumsq = 0;
    for (Param& p : params) sumsq += SumOfSquares(p.g.as<float>(), p.g.numel());
    const float coeff = ClipCoefficient(std::sqrt(static_cast<float>(sumsq)), 1.0f);
    for (Param& p : params) {
      float* g = p.g.as<float>();
      if (coeff < 1.0f) {
        for (int64_t i = 0; i < p.g.numel(); ++i) g[i] *= coeff;
      }
      kernels::AdamWHyper h{static_cast<float>(schedule.LearningRate(step)), 0.9f, 0.95f, kAdamEps,
                            p.decay ? 0.1f : 0.0f, step};
      EXPECT_TRUE(kernels::AdamWUpdate(ctx.kernels, p.p.as<float>(), g, p.m.data(), p.v.data(), p.p.numel(), h).ok());
    }
  }
  Weights out;
  for (const auto& unit : (*model)->units) {
    for (const ParamSpec& spec : unit->params()) {
      TensorView v = rm->param(*(*model)->FindParam(spec.name));
      out[spec.name].assign(v.as<float>(), v.as<float>() + v.numel());
    }
  }
  return out;
}

// Parity metrics against the reference.
//   whole: ||a - ref||_2 / ||ref||_2 over every parameter together (the
//          issue's "within 1e-6 relative");
//   worst_tensor: the same per tensor, the worst one, leaving out the key
//          bias (see below);
//   key_bias_max: max |w| of the key-bias slice on either side.
// The key bias (c_attn.bias[C, 2C)) has an exactly zero gradient: adding a
// constant to every key shifts each query's scores by the same amount,
// which softmax ignores. Its computed gradient is f32 rounding noise, which
// AdamW normalises into steps of about lr, so it is noise-driven in the
// reference and in the engine alike; we check it stays noise-sized instead.
struct Parity {
  double whole = 0, worst_tensor = 0, key_bias_max = 0;
  std::string worst_name;
};
Parity Compare(const Weights& a, const Weights& ref) {
  Parity p;
  const int64_t C = Tiny().n_embd;
  double diff_all = 0, norm_all = 0;
  for (const auto& [name, r] : ref) {
    auto it = a.find(name);
    if (it == a.end() || it->second.size() != r.size()) return Parity{INFINITY, INFINITY, INFINITY, name};
    const bool has_key_bias = absl::EndsWith(name, "attn.c_attn.bias");
    double diff = 0, norm = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      const double d = static_cast<double>(it->second[i]) - r[i];
      diff_all += d * d;
      norm_all += static_cast<double>(r[i]) * r[i];
      if (has_key_bias && static_cast<int64_t>(i) >= C && static_cast<int64_t>(i) < 2 * C) {
        p.key_bias_max = std::max({p.key_bias_max, std::fabs(static_cast<double>(r[i])),
                                   std::fabs(static_cast<double>(it->second[i]))});
        continue;
      }
      diff += d * d;
      norm += static_cast<double>(r[i]) * r[i];
    }
    if (std::sqrt(diff / norm) > p.worst_tensor) {
      p.worst_tensor = std::sqrt(diff / norm);
      p.worst_name = name;
    }
  }
  p.whole = std::sqrt(diff_all / norm_all);
  return p;
}

TEST(EngineMpiTest, Gpt2ParityStageEqualityRepeatability) {
  int32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(&seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const Weights reference = RunReference(tokens);
  const int dp = Grid().dp().size();
  for (int k : {1, 3}) {
    EngineRun stage0;
    for (int stage = 0; stage <= 3; ++stage) {
      SCOPED_TRACE(absl::StrCat("dp ", dp, " stage ", stage, " k ", k));
      EngineRun run = RunEngine(stage, k, tokens);
      ASSERT_EQ(run.results.size(), static_cast<size_t>(kSteps));
      const Parity parity = Compare(run.weights, reference);
      EXPECT_LE(parity.whole, 1e-6);
      // Per tensor the bound only has to catch a tensor handled wrongly
      // (relative error near 1): small tensors see the summation-order
      // differences of accumulation amplified by AdamW — token seed
      // 384521591 (ZS_TEST_SEED) gives 7.9e-5 on h.1.attn.c_proj.bias
      // at k 3, while the whole model stays at 3.4e-7.
      EXPECT_LE(parity.worst_tensor, 1e-3) << parity.worst_name;
      EXPECT_LE(parity.key_bias_max, 1e-5);
      if (Grid().dp_rank() == 0) {
        std::printf("dp %d stage %d k %d: loss %.6f -> %.6f; relative L2 to reference: whole model %.3g, worst "
                    "tensor %.3g (%s); |key bias| <= %.3g\n",
                    dp, stage, k, run.results.front().loss, run.results.back().loss, parity.whole,
                    parity.worst_tensor, parity.worst_name.c_str(), parity.key_bias_max);
      }
      if (stage == 0) {
        EXPECT_LT(run.results.back().loss, run.results.front().loss);
        EXPECT_TRUE(BitwiseEqual(RunEngine(0, k, tokens).weights, run.weights)) << "a second run differs";
        stage0 = std::move(run);
      } else {
        EXPECT_TRUE(BitwiseEqual(run.weights, stage0.weights)) << "differs from stage 0";
        for (int s = 0; s < kSteps; ++s) {
          EXPECT_EQ(run.results[s].loss, stage0.results[s].loss) << "step " << s + 1;
          EXPECT_EQ(run.results[s].grad_norm, stage0.results[s].grad_norm) << "step " << s + 1;
        }
      }
    }
  }
}

// Per rank after step 1: the per-stage bytes of docs/sharding.md, padding included.
TEST(EngineMpiTest, Gpt2MemoryAndCommAccounting) {
  int32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(&seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const int dp = Grid().dp().size();
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE(absl::StrCat("dp ", dp, " stage ", stage));
    auto model = BuildGpt2(Tiny());
    ASSERT_TRUE(model.ok());
    // Theory from the parameter declarations alone.
    int64_t P = 0, S = 0, N = 0, max_P = 0, embed_P = 0, last_P = 0;
    for (const auto& unit : (*model)->units) {
      std::vector<FlatParamDecl> decls;
      for (const ParamSpec& p : unit->params()) decls.push_back({p.name, p.shape});
      FlatParamLayout l = *FlatParamLayout::Create(unit->name(), 0, decls, dp);
      P += l.padded_numel();
      S += l.shard_numel();
      N += l.numel();
      max_P = std::max(max_P, l.padded_numel());
      if (unit->name() == "embed") embed_P = l.padded_numel();
      last_P = l.padded_numel();
    }
    ASSERT_EQ(N, (*model)->num_params());
    auto engine = Engine::Create(MakeConfig(stage, dp, 1), &Grid(), std::move(model).value());
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<HostBatch> batches =
        MicroBatchesForRank(tokens, kGlobalBatch, Tiny().seq_len, dp, 1, Grid().dp_rank());
    const std::vector<Batch> views = Views(batches);
    const CommStats before = (*engine)->comm_stats();
    (*engine)->memory().ResetPeaks();
    ASSERT_TRUE((*engine)->TrainStep(views).ok());
    const CommStats c = (*engine)->comm_stats() - before;
    const MemoryTracker& m = (*engine)->memory();
    EXPECT_EQ(m.Usage(MemoryCategory::kParams).current, 4 * (stage == 3 ? S : P));
    EXPECT_EQ(m.Usage(MemoryCategory::kGrads).current, 4 * (stage <= 1 ? P : S));
    EXPECT_EQ(m.Usage(MemoryCategory::kMasterParams).current, 4 * (stage == 0 ? P : S));
    EXPECT_EQ(m.Usage(MemoryCategory::kOptimizerState).current, 8 * (stage == 0 ? P : S));
    if (stage == 3) {
      const int64_t gathered_peak = m.Usage(MemoryCategory::kParams).peak - 4 * S;
      EXPECT_LE(gathered_peak, 4 * ((1 + 1) * max_P + embed_P));  // (1 + prefetch) units + the tied owner
    }
    // Stages 0-2: 2 Psi (N-1)/N elements; stage 3: 3 Psi (N-1)/N (Psi padded)
    // less the head and the embedding it reads, which stay gathered across
    // the turnaround from forward to backward.
    const int64_t moved = c[CommOp::kAllGather].bytes_sent + c[CommOp::kReduceScatter].bytes_sent;
    EXPECT_EQ(moved, (stage == 3 ? 3 * P - last_P - embed_P : 2 * P) * 4 * (dp - 1) / dp);
    // [sum of squares, loss sum, loss weight, overflow flag, failed allocations]; the batch
    // agreement runs on the control communicator.
    EXPECT_EQ(c[CommOp::kAllReduce].calls, 1);
    if (Grid().dp_rank() == 0) {
      std::printf("dp %d stage %d: params %lld grads %lld master %lld optim %lld bytes; moved %lld bytes (Psi=%lld)\n",
                  dp, stage, static_cast<long long>(m.Usage(MemoryCategory::kParams).current),
                  static_cast<long long>(m.Usage(MemoryCategory::kGrads).current),
                  static_cast<long long>(m.Usage(MemoryCategory::kMasterParams).current),
                  static_cast<long long>(m.Usage(MemoryCategory::kOptimizerState).current),
                  static_cast<long long>(moved), static_cast<long long>(P));
    }
  }
}

TEST(EngineMpiTest, DifferentModelOnLastRankFailsCreateEverywhere) {
  const int dp = Grid().dp().size();
  if (dp < 2) GTEST_SKIP() << "needs two ranks to disagree";
  Gpt2Config c = Tiny();
  if (Grid().dp_rank() == dp - 1) c.n_embd = 32;
  auto engine = Engine::Create(MakeConfig(3, dp, 1), &Grid(), std::move(BuildGpt2(c)).value());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(engine.status().message(),
                               absl::StrCat("the model differs across the ", dp, " dp ranks")))
      << engine.status();
}

TEST(EngineMpiTest, DifferentConfigOnRankZeroFailsCreateEverywhere) {
  const int dp = Grid().dp().size();
  if (dp < 2) GTEST_SKIP() << "needs two ranks to disagree";
  EngineConfig config = MakeConfig(2, dp, 1);
  if (Grid().dp_rank() == 0) config.mutable_optimizer()->set_lr(2e-3);
  auto engine = Engine::Create(config, &Grid(), std::move(BuildGpt2(Tiny())).value());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(engine.status().message(),
                               absl::StrCat("the engine config differs across the ", dp, " dp ranks")))
      << engine.status();
}

TEST(EngineMpiTest, WrongBatchShapeAndUnknownNameFailEverywhere) {
  int32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(&seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  const int dp = Grid().dp().size();
  auto engine = Engine::Create(MakeConfig(3, dp, 1), &Grid(), std::move(BuildGpt2(Tiny())).value());
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kGlobalBatch, Tiny().seq_len, dp, 1, Grid().dp_rank());
  // The last rank's targets have half the rows (and twice the columns).
  const bool culprit = Grid().dp_rank() == dp - 1;
  TensorView targets = *batches[0].view.Find("targets");
  targets.shape = {targets.shape[0] / 2, targets.shape[1] * 2};
  const Batch bad = culprit ? Batch{{"inputs", *batches[0].view.Find("inputs")}, {"targets", targets}}
                            : batches[0].view;
  absl::StatusOr<StepResult> r = (*engine)->TrainStep({&bad, 1});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  if (culprit) {
    EXPECT_TRUE(absl::StartsWith(r.status().message(), "micro-batch 0: batch tensor 'targets' is i32["))
        << r.status();
  } else {
    EXPECT_EQ(r.status().message(), absl::StrCat("the step could not start on dp rank ", dp - 1,
                                                 " (see its error); this rank (dp rank ", Grid().dp_rank(),
                                                 ") was fine"));
  }
  absl::StatusOr<std::vector<float>> w = (*engine)->GatherParam("h.7.attn.c_attn.weight");
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  // The engine is intact: a good step trains, and a real name gathers.
  r = (*engine)->TrainStep({&batches[0].view, 1});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->step, 1);
  w = (*engine)->GatherParam("h.1.attn.c_attn.weight");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->size(), 16u * 48u);
}

}  // namespace
}  // namespace zeroshard
