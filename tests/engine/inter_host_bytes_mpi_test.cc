// Inter-host bytes (docs/metrics.md) on 4 local ranks with a faked host
// topology of 2 hosts x 2 ranks (world ranks 0-1 and 2-3), ZeRO 3:
//   * ProcessGrid::WorldRanksOf names each group's members as the
//     communicators hold them;
//   * one step's inter-host bytes equal the formulas for flat ZeRO-3
//     (dp over both hosts), PER_HOST (shard groups of one host) and
//     PER_HOST with int8 weights, gradients and replicas.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/host_topology.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"
#include "sharding/quantized_shard.h"

namespace zeroshard {
namespace {

constexpr int kAccumulation = 2;
constexpr int kBlock = 256;

int WorldSize() { return MpiWorldSize(); }
const HostTopology& TwoHosts() {
  static const HostTopology t = HostTopologyFromKeys({0, 0, 2, 2}, {"h0", "h0", "h1", "h1"});
  return t;
}

struct Case {
  std::string name;
  int shard_group = 0;  // 0: flat
  bool int8 = false;    // weights, gradients and replicas
};

std::unique_ptr<Engine> MakeEngine(const Case& c) {
  EngineConfig e;
  e.mutable_zero()->set_stage(3);
  e.mutable_zero()->set_shard_group_size(c.shard_group);
  e.mutable_zero()->set_bucket_bytes(4096);
  e.mutable_zero()->set_quantization_block(kBlock);
  if (c.int8) {
    e.mutable_zero()->set_weight_quantization(ZeroConfig::INT8);
    e.mutable_zero()->set_gradient_quantization(ZeroConfig::INT8);
    e.mutable_zero()->set_replica_quantization(ZeroConfig::INT8);
  }
  e.set_gradient_accumulation_steps(kAccumulation);
  e.mutable_parallel()->set_dp(WorldSize());
  e.mutable_optimizer()->set_lr(1e-3);
  e.mutable_device()->set_threads_per_rank(1);
  e.set_seed(3);
  auto engine = Engine::Create(e, &CachedGrid({WorldSize(), 1, 1, c.shard_group}), std::move(BuildGpt2(TinyGpt2(2))).value());
  EXPECT_TRUE(engine.ok()) << c.name << ": " << engine.status();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

void Step(Engine& engine, int shard_group, uint32_t seed) {
  const int batch = 2 * WorldSize() * kAccumulation;
  const std::vector<int32_t> tokens = RandomTokens(seed, batch, 8, 67);
  std::vector<HostBatch> batches =
      MicroBatchesForRank(tokens, batch, 8, WorldSize(), kAccumulation, CachedGrid({WorldSize(), 1, 1, shard_group}).dp_rank());
  ASSERT_TRUE(engine.TrainStep(Views(batches)).ok());
}

TEST(InterHostBytesMpiTest, GridNamesEachGroupsWorldRanks) {
  if (WorldSize() != 4) GTEST_SKIP() << "2 faked hosts x 2 ranks need 4 ranks";
  const ProcessGrid& g = CachedGrid({4, 1, 1, 2});
  for (Communicator* c : {&g.world(), &g.dp(), &g.dp_shard(), g.dp_replica(), &g.tp(), &g.pp(), &g.embedding()}) {
    int32_t mine = g.world().rank();
    std::vector<int32_t> members(c->size());
    ASSERT_TRUE(c->AllGather(&mine, members.data(), 1, DType::kI32)->Wait().ok());
    EXPECT_EQ(g.WorldRanksOf(c), std::vector<int>(members.begin(), members.end())) << c->name();
  }
  EXPECT_TRUE(g.WorldRanksOf(&g.world_control()).empty());
}

TEST(InterHostBytesMpiTest, StepBytesMatchTheFormulas) {
  if (WorldSize() != 4) GTEST_SKIP() << "2 faked hosts x 2 ranks need 4 ranks";
  const int dp = 4, S = 2, R = 2;
  for (const Case& c : {Case{"flat ZeRO-3", 0, false}, Case{"PER_HOST", S, false}, Case{"PER_HOST int8", S, true}}) {
    std::unique_ptr<Engine> engine = MakeEngine(c);
    ASSERT_NE(engine, nullptr);
    Step(*engine, c.shard_group, 1);
    std::vector<int64_t> gathers_before;
    for (int u = 0; u < engine->num_units(); ++u) gathers_before.push_back(engine->gathers(u));
    const auto before = engine->comm_stats_by_group();
    Step(*engine, c.shard_group, 2);
    const auto after = engine->comm_stats_by_group();
    std::map<std::string, int64_t> sent;
    for (const auto& [group, stats] : after) sent[group] = (stats - before.at(group)).Total().bytes_sent;
    const int64_t inter_host = InterHostBytesSent(TwoHosts(), sent, engine->comm_group_world_ranks());

    // The step's world-wide sums (norm, loss, overflow): one small
    // all-reduce over the world, on dp itself when dp is the job.
    const std::string world = c.shard_group == 0 ? "dp" : "world";
    const int64_t sums = (after.at(world) - before.at(world))[CommOp::kAllReduce].bytes_sent;
    EXPECT_GT(sums, 0) << c.name;
    int64_t expected = sums;
    if (c.shard_group == 0) {
      // Flat: every gather and every reduce-scatter crosses.
      for (int u = 0; u < engine->num_units(); ++u) {
        expected += (engine->gathers(u) - gathers_before[u]) * (dp - 1) * engine->layout(u).shard_numel() * 4;
      }
      for (int b = 0; b < engine->reducer().num_buckets(); ++b) {
        expected += kAccumulation * (dp - 1) * engine->reducer().reduce_bytes(b);
      }
    } else {
      // PER_HOST: only the replica reduction crosses; f32 all-reduce or the
      // int8 all-gather of each bucket's packed shard.
      for (int b = 0; b < engine->reducer().num_buckets(); ++b) {
        if (!c.int8) {
          expected += kAccumulation * 2 * (R - 1) * engine->reducer().reduce_bytes(b) / R;
          continue;
        }
        if (engine->reducer().reduce_bytes(b) == 0) continue;
        std::vector<const FlatParamLayout*> layouts;
        for (int u : engine->reducer().bucket_units(b)) layouts.push_back(&engine->layout(u));
        expected += kAccumulation * (R - 1) * MaxPackedBucketPartBytes(layouts, kBlock);
      }
      EXPECT_GT(sent.at("dp_shard"), 0) << c.name;  // it moves, but inside a host
    }
    EXPECT_EQ(inter_host, expected) << c.name;
    int64_t total = 0;
    for (const auto& [group, bytes] : sent) total += bytes;
    if (CachedGrid({4, 1, 1, 0}).world().rank() == 0) {
      std::printf("%s: inter-host %lld bytes per step of %lld sent\n", c.name.c_str(),
                  static_cast<long long>(inter_host), static_cast<long long>(total));
    }
  }
}

}  // namespace
}  // namespace zeroshard
