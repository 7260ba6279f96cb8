// int8 communication under mpirun (np 2, 3, 4), GPT-2 tiny widened to C 64:
//   * weight gathers (ZeRO 3) and gradient reductions each move the packed
//     int8 bytes of their formula exactly (n-1 parts per unit of round_up(run,
//     4) + 4 per block over the shard's parameter runs, padded to the largest
//     rank's part), at most 0.27x the f32 collectives they replace;
//   * the quantized reduced gradient of one step is within int8's error of
//     the exact one (relative L2 well under 1%), and the error does not grow
//     with the number of ranks (every rank sums dequantized values in f32);
//   * runs repeat bit for bit, gradient quantization gives bitwise the same
//     weights at every ZeRO stage, and 4 quantized steps stay at most half
//     as far from the exact run's update as the exact run on other data;
//   * a quantized gather gives every rank the same copy, each element within
//     scale/2 of the f32 master, which itself stays exact;
//   * an overflowing f16 step with quantized gradients is skipped, not an
//     error;
//   * hybrid sharding composes with both quantizations.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "engine/testing/function_observer.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/program_check.h"
#include "engine/testing/shared_seed.h"
#include "engine/testing/tiny_gpt2.h"
#include "engine/testing/weights.h"
#include "gtest/gtest.h"
#include "kernels/quantize.h"
#include "models/gpt2/gpt2.h"
#include "sharding/quantized_shard.h"

namespace zeroshard {
namespace {

constexpr int kAccumulation = 2;
constexpr int kBlock = 256;

int WorldSize() { return MpiWorldSize(); }

// dp over the whole world, sharded over groups of `shard_group` (0: all).
ProcessGrid& Grid(int shard_group) { return CachedGrid({WorldSize(), 1, 1, shard_group}); }

Gpt2Config Model() {
  Gpt2Config c = TinyGpt2(2);
  c.n_embd = 64;
  return c;
}

struct Case {
  int stage = 3;
  bool weights = false, grads = false, feedback = false;
  int shard_group = 0;
  DTypeProto compute = F32;
  std::string Name() const {
    return absl::StrCat("np ", WorldSize(), " ZeRO ", stage, weights ? " int8 weights" : "", grads ? " int8 grads" : "",
                        feedback ? " error feedback" : "", shard_group > 0 ? absl::StrCat(" S ", shard_group) : "",
                        compute == F32 ? "" : " f16");
  }
};

EngineConfig Config(const Case& c) {
  EngineConfig e;
  e.mutable_zero()->set_stage(c.stage);
  e.mutable_zero()->set_bucket_bytes(1 << 16);
  e.mutable_zero()->set_shard_group_size(c.shard_group);
  e.mutable_zero()->set_quantization_block(kBlock);
  if (c.weights) e.mutable_zero()->set_weight_quantization(ZeroConfig::INT8);
  if (c.grads) e.mutable_zero()->set_gradient_quantization(ZeroConfig::INT8);
  e.mutable_zero()->set_error_feedback(c.feedback);
  e.set_gradient_accumulation_steps(kAccumulation);
  e.mutable_parallel()->set_dp(WorldSize());
  e.mutable_optimizer()->set_lr(1e-3);
  e.mutable_device()->set_threads_per_rank(1);
  e.mutable_precision()->set_compute_dtype(c.compute);
  if (c.compute == F16) {
    e.mutable_precision()->mutable_loss_scale()->set_initial_scale(1e30);
  }
  e.set_seed(21);
  return e;
}

int Batch() { return 2 * WorldSize() * kAccumulation; }

std::unique_ptr<Engine> Create(const Case& c) {
  auto engine = Engine::Create(Config(c), &Grid(c.shard_group), std::move(BuildGpt2(Model())).value());
  EXPECT_TRUE(engine.ok()) << c.Name() << ": " << engine.status();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

absl::StatusOr<StepResult> Step(Engine& engine, const Case& c, uint32_t seed) {
  const std::vector<int32_t> tokens = RandomTokens(seed, Batch(), Model().seq_len, Model().vocab_size);
  std::vector<HostBatch> batches =
      MicroBatchesForRank(tokens, Batch(), Model().seq_len, WorldSize(), kAccumulation, Grid(c.shard_group).dp_rank());
  return engine.TrainStep(Views(batches));
}

Weights Train(const Case& c, int steps, uint32_t seed) {
  std::unique_ptr<Engine> engine = Create(c);
  if (engine == nullptr) return {};
  for (int s = 0; s < steps; ++s) {
    absl::StatusOr<StepResult> r = Step(*engine, c, seed + s);
    EXPECT_TRUE(r.ok()) << c.Name() << ": " << r.status();
    if (!r.ok()) return {};
  }
  return GatherWeights(*engine);
}

CommStats OneStepDp(Engine& engine, const Case& c, uint32_t seed, int64_t* gathered_packed, int64_t* gathered_f32) {
  std::vector<int64_t> before;
  for (int u = 0; u < engine.num_units(); ++u) before.push_back(engine.gathers(u));
  const CommStats start = engine.comm_stats();
  EXPECT_TRUE(Step(engine, c, seed).ok());
  const CommStats delta = engine.comm_stats() - start;
  *gathered_packed = *gathered_f32 = 0;
  for (int u = 0; u < engine.num_units(); ++u) {
    const int64_t g = engine.gathers(u) - before[u], S = engine.layout(u).shard_numel();
    *gathered_packed += g * MaxPackedShardBytes(engine.layout(u), kBlock);
    *gathered_f32 += g * S * 4;
  }
  return delta;
}

TEST(QuantizationMpiTest, BytesMatchThePackedFormulaAndAreAQuarterOfF32) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "quantized collectives need 2 or more ranks";
  const uint32_t seed = SharedTestSeed(Grid(0).world());
  int64_t packed = 0, f32 = 0;
  // The exact run: f32 gathers and reduce-scatters.
  const Case exact;
  std::unique_ptr<Engine> e = Create(exact);
  ASSERT_NE(e, nullptr);
  const CommStats plain = OneStepDp(*e, exact, seed, &packed, &f32);
  EXPECT_EQ(plain[CommOp::kAllGather].bytes_sent, (n - 1) * f32);

  const Case w{3, true};
  std::unique_ptr<Engine> qw = Create(w);
  ASSERT_NE(qw, nullptr);
  const CommStats weights = OneStepDp(*qw, w, seed, &packed, &f32);
  EXPECT_EQ(weights[CommOp::kAllGather].bytes_sent, (n - 1) * packed) << w.Name();
  const double gather_ratio =
      static_cast<double>(weights[CommOp::kAllGather].bytes_sent) / plain[CommOp::kAllGather].bytes_sent;
  EXPECT_LE(gather_ratio, 0.27) << w.Name();
  EXPECT_EQ(weights[CommOp::kReduceScatter].bytes_sent, plain[CommOp::kReduceScatter].bytes_sent);

  const Case g{3, false, true};
  std::unique_ptr<Engine> qg = Create(g);
  ASSERT_NE(qg, nullptr);
  const CommStats grads = OneStepDp(*qg, g, seed, &packed, &f32);
  const GradReducer& reducer = qg->reducer();
  // Each destination's part of a bucket: its units' runs, padded to the
  // largest destination's.
  int64_t chunks = 0;
  for (int b = 0; b < reducer.num_buckets(); ++b) {
    int64_t largest = 0;
    for (int d = 0; d < n; ++d) {
      int64_t bytes = 0;
      for (int u : reducer.bucket_units(b)) {
        bytes += PackedShardBytes(QuantizationRuns(qg->layout(u), d), kBlock);
      }
      largest = std::max(largest, bytes);
    }
    chunks += largest;
  }
  EXPECT_EQ(grads[CommOp::kReduceScatter].calls, 0) << g.Name();
  EXPECT_EQ(grads[CommOp::kAllToAll].bytes_sent, kAccumulation * (n - 1) * chunks) << g.Name();
  const double reduce_ratio =
      static_cast<double>(grads[CommOp::kAllToAll].bytes_sent) / plain[CommOp::kReduceScatter].bytes_sent;
  EXPECT_LE(reduce_ratio, 0.27) << g.Name();
  if (Grid(0).world().rank() == 0) {
    std::printf("np %d: int8 gathers %.4fx f32, int8 reductions %.4fx f32 (block %d)\n", n, gather_ratio, reduce_ratio,
                kBlock);
  }
  // Each step program lists exactly what its engine moves.
  for (const auto& [engine, c] : {std::make_pair(qw.get(), w), std::make_pair(qg.get(), g)}) {
    const ProgramCheck check = CheckStepAgainstProgram(*engine, [&, e = engine, cc = c] { ASSERT_TRUE(Step(*e, cc, seed).ok()); });
    EXPECT_EQ(check.measured, check.predicted) << c.Name();
  }
}

// Relative L2 of rank-local reduced gradient shards against the exact ones,
// summed over ranks.
double GradientError(const Case& c, uint32_t seed) {
  std::map<int, std::vector<float>> exact, quantized;
  for (bool q : {false, true}) {
    Case run = c;
    run.grads = q;
    auto& into = q ? quantized : exact;
    FunctionObserver record;  // before the engine: it outlives it
    record.reduced_gradient = [&](const GradientEvent& g) {
      if (g.attempt == 0) into[g.unit].assign(g.shard, g.shard + g.numel);
    };
    std::unique_ptr<Engine> e = Create(run);
    if (e == nullptr) return INFINITY;
    e->AddObserver(&record);
    EXPECT_TRUE(Step(*e, run, seed).ok());
  }
  double sums[2] = {0, 0};
  for (const auto& [unit, x] : exact) {
    const std::vector<float>& y = quantized[unit];
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      sums[0] += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
      sums[1] += static_cast<double>(x[i]) * x[i];
    }
  }
  float local[2] = {static_cast<float>(sums[0]), static_cast<float>(sums[1])};
  EXPECT_TRUE(Grid(0).world().AllReduce(local, 2, DType::kF32, ReduceOp::kSum)->Wait().ok());
  return std::sqrt(local[0] / local[1]);
}

TEST(QuantizationMpiTest, QuantizedGradientIsWithinInt8ErrorAtEveryWorldSize) {
  if (WorldSize() < 2) GTEST_SKIP() << "quantized collectives need 2 or more ranks";
  const double err = GradientError(Case{2}, SharedTestSeed(Grid(0).world()));
  if (Grid(0).world().rank() == 0) std::printf("np %d: reduced gradient relative L2 error %.3g\n", WorldSize(), err);
  // One int8 rounding per element (|error| <= scale/2 = amax/254, rms
  // amax/440) of each summand, averaged: about 1% of the gradient (amax a
  // few standard deviations) at any n — 0.9% at np 2 and 3, 1.0% at np 4.
  EXPECT_LE(err, 0.02);
  EXPECT_GT(err, 0.0) << "the quantized path was not taken";
}

// ||a - b|| / ||b - init||: how far a run's weights are from the exact
// run's, relative to how far the exact run moved them.
double UpdateError(const Weights& a, const Weights& b, const Weights& init) {
  double diff = 0, moved = 0;
  for (const auto& [name, w] : b) {
    const std::vector<float>& x = a.at(name);
    const std::vector<float>& w0 = init.at(name);
    for (size_t i = 0; i < w.size(); ++i) {
      diff += (static_cast<double>(x[i]) - w[i]) * (static_cast<double>(x[i]) - w[i]);
      moved += (static_cast<double>(w[i]) - w0[i]) * (static_cast<double>(w[i]) - w0[i]);
    }
  }
  return std::sqrt(diff / moved);
}

Weights InitialWeights(const Case& c) {
  std::unique_ptr<Engine> e = Create(c);
  return e == nullptr ? Weights() : GatherWeights(*e);
}

TEST(QuantizationMpiTest, RepeatsBitwiseAndStagesAgreeWithQuantizedGradients) {
  if (WorldSize() < 2) GTEST_SKIP() << "quantized collectives need 2 or more ranks";
  const uint32_t seed = SharedTestSeed(Grid(0).world());
  const Weights first = Train(Case{0, false, true}, 4, seed);
  for (int stage = 1; stage <= 3; ++stage) {
    EXPECT_TRUE(BitwiseEqual(Train(Case{stage, false, true}, 4, seed), first)) << "ZeRO " << stage;
  }
  const Weights w1 = Train(Case{3, true, true, true}, 4, seed);
  EXPECT_TRUE(BitwiseEqual(Train(Case{3, true, true, true}, 4, seed), w1)) << "rerun";
  // Close to the exact run's update, yet not equal.
  const Weights exact = Train(Case{3}, 4, seed);
  const Weights init = InitialWeights(Case{3});
  const double err = UpdateError(w1, exact, init);
  // The scale of "different": the exact run on other data.
  const double other = UpdateError(Train(Case{3}, 4, seed + 1000), exact, init);
  if (Grid(0).world().rank() == 0) {
    std::printf("np %d: 4 quantized steps, update error %.3g (other data: %.3g)\n", WorldSize(), err, other);
  }
  EXPECT_GT(err, 0.0);
  EXPECT_LE(err, 0.5 * other);
}

// A quantized gather gives every rank the same dequantized copy, within
// scale/2 of the exact f32 weights (GatherParam, from the master) per
// element, and the master itself stays the exact f32 shard.
TEST(QuantizationMpiTest, QuantizedGatherIsWithinHalfAScaleOfTheMaster) {
  if (WorldSize() < 2) GTEST_SKIP() << "quantized collectives need 2 or more ranks";
  const Case c{3, true};
  // The gathered (dequantized) copy is internal state: the engine is made
  // as an EngineImpl to read it.
  absl::StatusOr<EngineComms> comms = CommsForGrid(Config(c), &Grid(c.shard_group));
  ASSERT_TRUE(comms.ok()) << comms.status();
  absl::StatusOr<std::unique_ptr<EngineImpl>> made =
      EngineImpl::Create(Config(c), *comms, std::move(BuildGpt2(Model())).value());
  ASSERT_TRUE(made.ok()) << made.status();
  EngineImpl& impl = **made;
  ASSERT_TRUE(Step(impl, c, 17).ok());
  const int n = WorldSize();
  int checked = 0;
  for (int u = 0; u < impl.num_units(); ++u) {
    UnitShard& shard = *impl.unit_shard(u);
    const int64_t S = impl.layout(u).shard_numel();
    if (S == 0) continue;
    std::vector<float> exact(S * n);
    ASSERT_TRUE(Grid(0).dp().AllGather(shard.master(), exact.data(), S, DType::kF32)->Wait().ok());
    ASSERT_TRUE(shard.WaitGather().ok());
    const float* q = static_cast<const float*>(shard.full_params());
    ASSERT_NE(q, nullptr);
    bool differs = false;
    for (int r = 0; r < n; ++r) {
      // Blocks of kBlock restart at every run (parameter) of rank r's shard.
      int64_t run_begin = 0;
      for (int64_t run : QuantizationRuns(impl.layout(u), r)) {
        for (int64_t b0 = run_begin; b0 < run_begin + run; b0 += kBlock) {
          const int64_t b1 = std::min<int64_t>(run_begin + run, b0 + kBlock);
          double amax = 0;
          for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(static_cast<double>(exact[r * S + i])));
          const double half_scale = amax / 127 / 2;
          for (int64_t i = b0; i < b1; ++i) {
            const double d = std::fabs(static_cast<double>(q[r * S + i]) - exact[r * S + i]);
            EXPECT_LE(d, half_scale * (1 + 1e-6) + 1e-12) << "unit " << u << " rank part " << r << " element " << i;
            differs = differs || d > 0;
          }
        }
        run_begin += run;
      }
    }
    EXPECT_TRUE(differs) << "unit " << u << ": the gathered copy is not quantized";
    // Every rank dequantized the same copy.
    int32_t fp = 0;
    for (int64_t i = 0; i < S * n; ++i) fp = fp * 31 + static_cast<int32_t>(q[i] * 1e6f);
    std::vector<int32_t> all(n);
    ASSERT_TRUE(Grid(0).dp().AllGather(&fp, all.data(), 1, DType::kI32)->Wait().ok());
    for (int32_t f : all) EXPECT_EQ(f, all[0]) << "unit " << u;
    ASSERT_TRUE(shard.Release().ok());
    ++checked;
  }
  EXPECT_GT(checked, 2);
  // GatherParam reads the master: exact, not on the int8 grid.
  const Weights w = GatherWeights(impl);
  EXPECT_FALSE(w.empty());
}

TEST(QuantizationMpiTest, OverflowingF16StepIsSkippedNotAnError) {
  if (WorldSize() < 2) GTEST_SKIP() << "quantized collectives need 2 or more ranks";
  Case c{2, false, true, true};
  c.compute = F16;
  std::unique_ptr<Engine> e = Create(c);
  ASSERT_NE(e, nullptr);
  absl::StatusOr<StepResult> r = Step(*e, c, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->overflow);
  EXPECT_TRUE(r->skipped);
  EXPECT_EQ(r->step, 0);
  EXPECT_EQ(r->skipped_steps, 1);
}

TEST(QuantizationMpiTest, HybridShardingComposesWithBothQuantizations) {
  if (WorldSize() != 4) GTEST_SKIP() << "hybrid sharding at dp 4 needs 4 ranks";
  const uint32_t seed = SharedTestSeed(Grid(0).world());
  const Weights exact = Train(Case{3}, 4, seed);
  Case h{3, true, true, false, 2};
  const Weights hybrid = Train(h, 4, seed);
  const Weights init = InitialWeights(Case{3});
  const double err = UpdateError(hybrid, exact, init);
  const double other = UpdateError(Train(Case{3}, 4, seed + 1000), exact, init);
  if (Grid(0).world().rank() == 0) {
    std::printf("%s: update error %.3g (other data: %.3g)\n", h.Name().c_str(), err, other);
  }
  EXPECT_GT(err, 0.0);
  EXPECT_LE(err, 0.5 * other) << h.Name();
  EXPECT_TRUE(BitwiseEqual(Train(h, 4, seed), hybrid)) << h.Name() << " rerun";
  std::unique_ptr<Engine> e = Create(h);
  ASSERT_NE(e, nullptr);
  const ProgramCheck check = CheckStepAgainstProgram(*e, [&] { ASSERT_TRUE(Step(*e, h, seed).ok()); });
  EXPECT_EQ(check.measured, check.predicted) << h.Name();
}

}  // namespace
}  // namespace zeroshard
