// int8 replica reduction (engine.zero.replica_quantization) under hybrid
// sharding at dp 4 with shard groups of 2 (R = 2 replicas):
//   * it trains, its losses within kLossTolerance of the f32 replica
//     all-reduce on the same batches;
//   * two runs are bitwise equal, and the replicas of a shard hold bitwise
//     the same master shard;
//   * the replica group moves one int8 AllGather per reduction, of the
//     packed bytes the step program lists (what `zeroshard schedule`
//     prints), and nothing else.
// NONE is the f32 all-reduce that //tests/engine:hsdp_mpi_test checks.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/state_view.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/program_check.h"
#include "engine/testing/shared_seed.h"
#include "engine/testing/tiny_gpt2.h"
#include "engine/testing/weights.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"
#include "sharding/quantized_shard.h"

namespace zeroshard {
namespace {

constexpr int kSteps = 8;
constexpr int kAccumulation = 2;
constexpr int kShardGroup = 2;
// Relative loss difference per step between int8 and f32 replica
// reductions (block 256, 8 steps on one batch): at most 6.3e-5 over 5 seeds
// (ZS_TEST_SEED=random).
constexpr double kLossTolerance = 5e-4;

int WorldSize() { return MpiWorldSize(); }
ProcessGrid& Grid() { return CachedGrid({WorldSize(), 1, 1, kShardGroup}); }

TrainConfig MakeConfig(bool int8_replicas, int stage, DTypeProto reduce_dtype = F32) {
  TrainConfig t;
  t.mutable_model()->set_n_layer(2);
  t.mutable_model()->set_n_head(2);
  t.mutable_model()->set_n_embd(16);
  t.mutable_model()->set_vocab_size(67);
  t.mutable_model()->set_seq_len(8);
  t.mutable_data()->set_batch_size(2 * WorldSize() * kAccumulation);
  t.set_steps(kSteps);
  EngineConfig& e = *t.mutable_engine();
  e.mutable_zero()->set_stage(stage);
  e.mutable_zero()->set_shard_group_size(kShardGroup);
  e.mutable_zero()->set_bucket_bytes(4096);
  e.mutable_zero()->set_quantization_block(256);
  if (int8_replicas) e.mutable_zero()->set_replica_quantization(ZeroConfig::INT8);
  if (reduce_dtype != F32) e.mutable_precision()->set_reduce_dtype(reduce_dtype);
  e.set_gradient_accumulation_steps(kAccumulation);
  e.mutable_parallel()->set_dp(WorldSize());
  e.mutable_optimizer()->set_lr(3e-3);
  e.mutable_optimizer()->set_weight_decay(0.1);
  e.mutable_optimizer()->set_grad_clip(1.0);
  e.mutable_device()->set_threads_per_rank(1);
  e.set_seed(11);
  return t;
}

struct TrainRun {
  std::unique_ptr<Engine> engine;
  std::vector<float> losses;
  int32_t seed = 0;

  static TrainRun Create(bool int8_replicas, int stage, int32_t seed, DTypeProto reduce_dtype = F32) {
    TrainRun r;
    r.seed = seed;
    auto engine = Engine::Create(MakeConfig(int8_replicas, stage, reduce_dtype).engine(), &Grid(),
                                 std::move(BuildGpt2(TinyGpt2(2))).value());
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (engine.ok()) r.engine = std::move(engine).value();
    return r;
  }
  // n steps on one fixed batch, so that the loss falls.
  void Steps(int n) {
    const int batch = 2 * WorldSize() * kAccumulation;
    for (int i = 0; i < n && engine != nullptr; ++i) {
      const std::vector<int32_t> tokens = RandomTokens(static_cast<uint32_t>(seed), batch, 8, 67);
      std::vector<HostBatch> batches = MicroBatchesForRank(tokens, batch, 8, WorldSize(), kAccumulation, Grid().dp_rank());
      absl::StatusOr<StepResult> result = engine->TrainStep(Views(batches));
      ASSERT_TRUE(result.ok()) << result.status();
      losses.push_back(result->loss);
    }
  }
};

int32_t Fingerprint(const float* p, int64_t n) {
  uint32_t h = 2166136261u;
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  for (int64_t i = 0; i < n * 4; ++i) h = (h ^ bytes[i]) * 16777619u;
  return static_cast<int32_t>(h & 0x7fffffff);
}

TEST(ReplicaQuantizationMpiTest, TrainsNearF32AndIsBitwiseRepeatable) {
  if (WorldSize() != 4) GTEST_SKIP() << "dp 4 with shard groups of 2 needs 4 ranks";
  const int32_t seed = SharedTestSeed(Grid().world());
  TrainRun f32 = TrainRun::Create(false, 3, seed);
  f32.Steps(kSteps);
  TrainRun a = TrainRun::Create(true, 3, seed);
  a.Steps(kSteps);
  TrainRun b = TrainRun::Create(true, 3, seed);
  b.Steps(kSteps);
  ASSERT_EQ(a.losses.size(), f32.losses.size());
  double worst = 0;
  for (size_t i = 0; i < a.losses.size(); ++i) {
    const double rel = std::fabs(a.losses[i] - f32.losses[i]) / std::fabs(f32.losses[i]);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, kLossTolerance) << "step " << i << ": int8 " << a.losses[i] << " vs f32 " << f32.losses[i];
    EXPECT_EQ(a.losses[i], b.losses[i]) << "step " << i;
  }
  // It trains: the last loss is below the first.
  EXPECT_LT(a.losses.back(), a.losses.front());
  if (Grid().world().rank() == 0) std::printf("int8 replicas: worst relative loss difference %.3g\n", worst);
  const Weights wa = GatherWeights(*a.engine);
  EXPECT_TRUE(BitwiseEqual(wa, GatherWeights(*b.engine))) << "two int8 runs differ";
  EXPECT_FALSE(BitwiseEqual(wa, GatherWeights(*f32.engine))) << "int8 replicas changed nothing";
  // Every replica of a shard takes bitwise the same update.
  const EngineStateView& view = a.engine->state();
  Communicator* replica = Grid().dp_replica();
  ASSERT_NE(replica, nullptr);
  for (int u = 0; u < view.num_units(); ++u) {
    int32_t mine = Fingerprint(static_cast<const float*>(view.data(u, EngineStateView::kMaster)),
                               view.region(u, EngineStateView::kMaster).length);
    std::vector<int32_t> all(replica->size());
    ASSERT_TRUE(replica->AllGather(&mine, all.data(), 1, DType::kI32)->Wait().ok());
    for (int32_t f : all) EXPECT_EQ(f, all[0]) << "unit " << u;
  }
}

TEST(ReplicaQuantizationMpiTest, ReplicaGroupMovesThePackedShardsTheProgramLists) {
  if (WorldSize() != 4) GTEST_SKIP() << "dp 4 with shard groups of 2 needs 4 ranks";
  const int R = WorldSize() / kShardGroup;
  for (int stage : {1, 3}) {
    TrainRun run = TrainRun::Create(true, stage, 5);
    ASSERT_NE(run.engine, nullptr);
    run.Steps(1);
    const Engine& engine = *run.engine;
    // Per reduction: (R - 1) x the bucket's packed part, the largest over
    // the shard group's ranks (sharding/quantized_shard.h).
    int64_t packed = 0;
    int buckets = 0;
    for (int b = 0; b < engine.reducer().num_buckets(); ++b) {
      if (engine.reducer().reduce_bytes(b) == 0) continue;
      std::vector<const FlatParamLayout*> layouts;
      for (int u : engine.reducer().bucket_units(b)) layouts.push_back(&engine.layout(u));
      packed += MaxPackedBucketPartBytes(layouts, 256);
      ++buckets;
    }
    const auto before = run.engine->comm_stats_by_group();
    run.Steps(1);
    const CommStats replica = run.engine->comm_stats_by_group().at("dp_replica") - before.at("dp_replica");
    EXPECT_EQ(replica[CommOp::kAllGather].calls, kAccumulation * buckets) << "stage " << stage;
    EXPECT_EQ(replica[CommOp::kAllGather].bytes_sent, kAccumulation * (R - 1) * packed) << "stage " << stage;
    EXPECT_EQ(replica.Total().bytes_sent, replica[CommOp::kAllGather].bytes_sent) << "stage " << stage;
    const ProgramCheck check = CheckStepAgainstProgram(*run.engine, [&] { run.Steps(1); });
    EXPECT_EQ(check.measured, check.predicted) << "stage " << stage;
  }
}

// A bf16 reduce dtype: the replicas quantize the bf16 reduced shard and
// sum into an f32 buffer of their own; still repeatable and equal across
// replicas, and near the f32 run (bf16 rounding: 1e-2 relative).
TEST(ReplicaQuantizationMpiTest, Bf16ReduceDtypeIsRepeatableAndReplicasAgree) {
  if (WorldSize() != 4) GTEST_SKIP() << "dp 4 with shard groups of 2 needs 4 ranks";
  const int32_t seed = SharedTestSeed(Grid().world());
  TrainRun f32 = TrainRun::Create(false, 2, seed);
  f32.Steps(4);
  TrainRun a = TrainRun::Create(true, 2, seed, BF16);
  a.Steps(4);
  TrainRun b = TrainRun::Create(true, 2, seed, BF16);
  b.Steps(4);
  ASSERT_EQ(a.losses.size(), 4u);
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_EQ(a.losses[i], b.losses[i]) << "step " << i;
    EXPECT_NEAR(a.losses[i], f32.losses[i], 1e-2 * f32.losses[i]) << "step " << i;
  }
  EXPECT_TRUE(BitwiseEqual(GatherWeights(*a.engine), GatherWeights(*b.engine)));
  const EngineStateView& view = a.engine->state();
  for (int u = 0; u < view.num_units(); ++u) {
    int32_t mine = Fingerprint(static_cast<const float*>(view.data(u, EngineStateView::kMaster)),
                               view.region(u, EngineStateView::kMaster).length);
    std::vector<int32_t> all(Grid().dp_replica()->size());
    ASSERT_TRUE(Grid().dp_replica()->AllGather(&mine, all.data(), 1, DType::kI32)->Wait().ok());
    for (int32_t f : all) EXPECT_EQ(f, all[0]) << "unit " << u;
  }
  const ProgramCheck check = CheckStepAgainstProgram(*a.engine, [&] { a.Steps(1); });
  EXPECT_EQ(check.measured, check.predicted);
}

}  // namespace
}  // namespace zeroshard
