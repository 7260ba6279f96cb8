// Hybrid sharding (engine.zero.shard_group_size) under mpirun at dp 4:
//   * S 2 (and S 1) trains to the weights of full sharding within 1e-6
//     relative after 10 steps at every ZeRO stage, and for a fixed S every
//     stage gives bitwise the same weights; the replicas of a shard hold
//     bitwise the same master shard;
//   * model-state bytes per rank are the ZeRO formulas with the shard group
//     (N = S) as the sharding degree;
//   * the bytes each step moves on the shard group and on the replica group
//     equal their formulas (docs/parallelism.md, "Hybrid sharding");
//   * it composes with pipeline and tensor parallelism (dp 2 x pp 2, dp 2 x
//     tp 2, S 1) within 1e-6 of full sharding;
//   * checkpoints are written in the dp-wide layout (one file per dp rank)
//     with S recorded, resume bitwise at the same S and load bitwise at any
//     other S (full sharding included), in either direction.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/inspect.h"
#include "comm/process_grid.h"
#include "core/file_io.h"
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
#include "sharding/flat_param_layout.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

constexpr int kSteps = 10;
constexpr int kAccumulation = 2;

int WorldSize() { return MpiWorldSize(); }

// dp over the whole world, sharded over groups of `shard_group` (0: all).
ProcessGrid& Grid(int shard_group) { return CachedGrid({WorldSize(), 1, 1, shard_group}); }

struct Case {
  int shard_group = 0;  // 0: full sharding
  int stage = 1;
  std::string Name() const { return absl::StrCat("dp ", WorldSize(), " S ", shard_group, " ZeRO ", stage); }
};

TrainConfig MakeConfig(const Case& c) {
  TrainConfig t;
  t.mutable_model()->set_n_layer(2);
  t.mutable_model()->set_n_head(2);
  t.mutable_model()->set_n_embd(16);
  t.mutable_model()->set_vocab_size(67);
  t.mutable_model()->set_seq_len(8);
  t.mutable_data()->set_batch_size(2 * WorldSize() * kAccumulation);
  t.set_steps(kSteps);
  EngineConfig& e = *t.mutable_engine();
  e.mutable_zero()->set_stage(c.stage);
  e.mutable_zero()->set_shard_group_size(c.shard_group);
  e.mutable_zero()->set_bucket_bytes(4096);
  e.set_gradient_accumulation_steps(kAccumulation);
  e.mutable_parallel()->set_dp(WorldSize());
  e.mutable_optimizer()->set_lr(1e-3);
  e.mutable_optimizer()->set_weight_decay(0.1);
  e.mutable_optimizer()->set_grad_clip(1.0);
  e.mutable_device()->set_threads_per_rank(1);
  e.set_seed(11);
  return t;
}

struct TrainRun {
  Case c;
  TrainConfig config;
  std::unique_ptr<Engine> engine;
  int32_t data_seed = 0;
  std::vector<float> losses;

  static TrainRun Create(const Case& c, int32_t data_seed) {
    TrainRun r;
    r.c = c;
    r.config = MakeConfig(c);
    r.data_seed = data_seed;
    auto engine = Engine::Create(r.config.engine(), &Grid(c.shard_group), std::move(BuildGpt2(TinyGpt2(2))).value());
    EXPECT_TRUE(engine.ok()) << c.Name() << ": " << engine.status();
    if (engine.ok()) r.engine = std::move(engine).value();
    return r;
  }

  // n steps, the step's tokens drawn from (data_seed + step).
  void Steps(int n) {
    const int batch = r_batch();
    for (int i = 0; i < n && engine != nullptr; ++i) {
      const int64_t s = engine->stats().step;
      const std::vector<int32_t> tokens = RandomTokens(static_cast<uint32_t>(data_seed + s), batch, 8, 67);
      std::vector<HostBatch> batches =
          MicroBatchesForRank(tokens, batch, 8, WorldSize(), kAccumulation, Grid(c.shard_group).dp_rank());
      absl::StatusOr<StepResult> result = engine->TrainStep(Views(batches));
      ASSERT_TRUE(result.ok()) << c.Name() << ": " << result.status();
      losses.push_back(result->loss);
    }
  }
  int r_batch() const { return 2 * WorldSize() * kAccumulation; }
};

bool SkipUnlessFourRanks() { return WorldSize() != 4; }

TEST(HsdpMpiTest, GridSplitsDpIntoShardAndReplicaGroups) {
  if (SkipUnlessFourRanks()) GTEST_SKIP() << "hybrid sharding at dp 4 needs 4 ranks";
  ProcessGrid& g = Grid(2);
  ASSERT_NE(g.dp_replica(), nullptr);
  EXPECT_EQ(g.dp_shard().size(), 2);
  EXPECT_EQ(g.dp_shard().rank(), g.dp_rank() % 2);
  EXPECT_EQ(g.dp_replica()->size(), 2);
  EXPECT_EQ(g.dp_replica()->rank(), g.dp_rank() / 2);
  // The shard group is neighbouring dp ranks: its members' dp ranks.
  int32_t mine = g.dp_rank(), members[2] = {-1, -1};
  ASSERT_TRUE(g.dp_shard().AllGather(&mine, members, 1, DType::kI32)->Wait().ok());
  EXPECT_EQ(members[0], g.dp_rank() / 2 * 2);
  EXPECT_EQ(members[1], g.dp_rank() / 2 * 2 + 1);
  ASSERT_TRUE(g.dp_replica()->AllGather(&mine, members, 1, DType::kI32)->Wait().ok());
  EXPECT_EQ(members[0], g.dp_rank() % 2);
  EXPECT_EQ(members[1], g.dp_rank() % 2 + 2);
  // Without hybrid sharding the shard group is dp itself.
  EXPECT_EQ(&Grid(0).dp_shard(), &Grid(0).dp());
  EXPECT_EQ(Grid(0).dp_replica(), nullptr);
}

// A 32-bit FNV-1a of a float range, for comparing shards across ranks.
int32_t Fingerprint(const float* p, int64_t n) {
  uint32_t h = 2166136261u;
  const auto* bytes = reinterpret_cast<const unsigned char*>(p);
  for (int64_t i = 0; i < n * 4; ++i) h = (h ^ bytes[i]) * 16777619u;
  return static_cast<int32_t>(h & 0x7fffffff);
}

TEST(HsdpMpiTest, MatchesFullShardingAndIsBitwiseAcrossStages) {
  if (SkipUnlessFourRanks()) GTEST_SKIP() << "hybrid sharding at dp 4 needs 4 ranks";
  const int32_t seed = SharedTestSeed(Grid(0).world());
  TrainRun full = TrainRun::Create({0, 1}, seed);
  full.Steps(kSteps);
  const Weights reference = GatherWeights(*full.engine);
  for (int S : {2, 1}) {
    Weights first;
    for (int stage = 0; stage <= 3; ++stage) {
      TrainRun run = TrainRun::Create({S, stage}, seed);
      run.Steps(kSteps);
      ASSERT_EQ(run.losses.size(), full.losses.size()) << run.c.Name();
      for (size_t i = 0; i < run.losses.size(); ++i) {
        EXPECT_NEAR(run.losses[i], full.losses[i], 1e-6 * std::fabs(full.losses[i])) << run.c.Name() << " step " << i;
      }
      const Weights w = GatherWeights(*run.engine);
      const double rel = RelativeL2(w, reference);
      EXPECT_LE(rel, 1e-6) << run.c.Name() << " vs full sharding";
      if (stage == 0) {
        first = w;
        if (Grid(0).world().rank() == 0) std::printf("S %d: relative L2 to full sharding %.3g\n", S, rel);
      } else {
        EXPECT_TRUE(BitwiseEqual(w, first)) << run.c.Name() << " differs from ZeRO 0 at the same S";
      }
      // Every replica of a shard holds the same master shard, bit for bit.
      const EngineStateView& view = run.engine->state();
      Communicator* replica = Grid(S).dp_replica();
      ASSERT_NE(replica, nullptr);
      for (int u = 0; u < view.num_units(); ++u) {
        int32_t mine = Fingerprint(static_cast<const float*>(view.data(u, EngineStateView::kMaster)),
                                   view.region(u, EngineStateView::kMaster).length);
        std::vector<int32_t> all(replica->size());
        ASSERT_TRUE(replica->AllGather(&mine, all.data(), 1, DType::kI32)->Wait().ok());
        for (int32_t f : all) EXPECT_EQ(f, all[0]) << run.c.Name() << " unit " << u;
      }
    }
  }
}

// Padded and shard elements of every unit at sharding degree S with the
// engine's alignment for R = dp / S replicas (docs/sharding.md, with N = S).
struct StateTheory {
  int64_t padded = 0, shard = 0, dp_wide_shard = 0;
};

StateTheory Theory(const Model& model, int S, int replicas) {
  StateTheory t;
  for (const auto& unit : model.units) {
    std::vector<FlatParamDecl> decls;
    for (const ParamSpec& p : unit->params()) decls.push_back({p.name, p.shape});
    const FlatParamLayout l = *FlatParamLayout::Create(unit->name(), 0, decls, S, kDefaultShardAlignment * replicas);
    const FlatParamLayout wide = *FlatParamLayout::Create(unit->name(), 0, decls, S * replicas);
    t.padded += l.padded_numel();
    t.shard += l.shard_numel();
    t.dp_wide_shard += wide.shard_numel();
  }
  return t;
}

TEST(HsdpMpiTest, ModelStateBytesAreTheZeroFormulasOverTheShardGroup) {
  if (SkipUnlessFourRanks()) GTEST_SKIP() << "hybrid sharding at dp 4 needs 4 ranks";
  const std::unique_ptr<Model> model = std::move(BuildGpt2(TinyGpt2(2))).value();
  for (int stage = 0; stage <= 3; ++stage) {
    TrainRun run = TrainRun::Create({2, stage}, 1);
    ASSERT_NE(run.engine, nullptr);
    const StateTheory t = Theory(*model, 2, 2);
    // A shard group's shard is R whole shards of the dp-wide layout.
    EXPECT_EQ(t.shard, 2 * t.dp_wide_shard);
    const MemoryTracker& mem = run.engine->memory();
    EXPECT_EQ(mem.Usage(MemoryCategory::kParams).current, 4 * (stage == 3 ? t.shard : t.padded)) << run.c.Name();
    EXPECT_EQ(mem.Usage(MemoryCategory::kGrads).current, 4 * (stage <= 1 ? t.padded : t.shard)) << run.c.Name();
    EXPECT_EQ(mem.Usage(MemoryCategory::kMasterParams).current, 4 * (stage == 0 ? t.padded : t.shard))
        << run.c.Name();
    EXPECT_EQ(mem.Usage(MemoryCategory::kOptimizerState).current, 8 * (stage == 0 ? t.padded : t.shard))
        << run.c.Name();
  }
}

CommStats Delta(const CommStats& after, const CommStats& before) { return after - before; }

TEST(HsdpMpiTest, BytesPerStepOnShardAndReplicaGroupsMatchTheFormulas) {
  if (SkipUnlessFourRanks()) GTEST_SKIP() << "hybrid sharding at dp 4 needs 4 ranks";
  const int S = 2, R = 2;
  for (int stage = 0; stage <= 3; ++stage) {
    TrainRun run = TrainRun::Create({S, stage}, 3);
    ASSERT_NE(run.engine, nullptr);
    run.Steps(1);  // warm: the counters below are one steady step
    const Engine& engine = *run.engine;
    std::vector<int64_t> gathers_before;
    for (int u = 0; u < engine.num_units(); ++u) gathers_before.push_back(engine.gathers(u));
    const auto before = run.engine->comm_stats_by_group();
    ASSERT_EQ(before.count("dp_shard"), 1u);
    ASSERT_EQ(before.count("dp_replica"), 1u);
    ASSERT_EQ(before.count("dp"), 0u);
    run.Steps(1);
    const auto after = run.engine->comm_stats_by_group();
    const CommStats shard = Delta(after.at("dp_shard"), before.at("dp_shard"));
    const CommStats replica = Delta(after.at("dp_replica"), before.at("dp_replica"));
    int64_t shard_elems = 0, gathered = 0;
    for (int u = 0; u < engine.num_units(); ++u) {
      shard_elems += engine.layout(u).shard_numel();
      gathered += (engine.gathers(u) - gathers_before[u]) * engine.layout(u).shard_numel();
    }
    int buckets = 0;
    for (int b = 0; b < engine.reducer().num_buckets(); ++b) buckets += engine.reducer().reduce_bytes(b) > 0;
    // Every micro-batch reduce-scatters each bucket over S ranks and then
    // all-reduces its shard over R replicas (f32).
    EXPECT_EQ(shard[CommOp::kReduceScatter].calls, kAccumulation * buckets) << run.c.Name();
    EXPECT_EQ(shard[CommOp::kReduceScatter].bytes_sent, kAccumulation * (S - 1) * shard_elems * 4) << run.c.Name();
    EXPECT_EQ(replica[CommOp::kAllReduce].calls, kAccumulation * buckets) << run.c.Name();
    EXPECT_EQ(replica[CommOp::kAllReduce].bytes_sent, kAccumulation * 2 * (R - 1) * shard_elems * 4 / R)
        << run.c.Name();
    EXPECT_EQ(replica.Total().bytes_sent, replica[CommOp::kAllReduce].bytes_sent) << run.c.Name();
    // All-gathers on the shard group: stage 0 the reduced gradients, stages
    // 1-2 the updated parameters, stage 3 each gather of a unit's shards.
    const int64_t gather_elems = stage == 3 ? gathered : shard_elems;
    EXPECT_EQ(shard[CommOp::kAllGather].bytes_sent, (S - 1) * gather_elems * 4) << run.c.Name();
    EXPECT_EQ(shard.Total().bytes_sent,
              shard[CommOp::kReduceScatter].bytes_sent + shard[CommOp::kAllGather].bytes_sent)
        << run.c.Name();
    // The step program lists exactly these collectives (what `zeroshard
    // schedule` prints).
    const ProgramCheck check = CheckStepAgainstProgram(*run.engine, [&] { run.Steps(1); });
    EXPECT_EQ(check.measured, check.predicted) << run.c.Name();
  }
}

// Hybrid sharding inside a 2-D grid: dp 2 x pp 2 and dp 2 x tp 2 on 4
// ranks, shard groups of 1 (each dp rank holds whole units and the two
// replicas all-reduce), against full sharding of the same grid.
TEST(HsdpMpiTest, ComposesWithPipelineAndTensorParallelism) {
  if (SkipUnlessFourRanks()) GTEST_SKIP() << "dp 2 x pp 2 / tp 2 needs 4 ranks";
  const int32_t seed = SharedTestSeed(Grid(0).world());
  for (const bool pipeline : {true, false}) {
    Weights reference;
    for (const int S : {0, 1}) {
      const GridShape shape{2, pipeline ? 1 : 2, pipeline ? 2 : 1, S};
      TrainConfig config = MakeConfig({S, 2});
      config.mutable_engine()->mutable_parallel()->set_dp(2);
      config.mutable_engine()->mutable_parallel()->set_tp(shape.tp);
      config.mutable_engine()->mutable_parallel()->set_pp(shape.pp);
      Gpt2Config model = TinyGpt2(2);
      model.vocab_multiple = shape.tp;
      ProcessGrid& grid = CachedGrid(shape);
      auto engine = Engine::Create(config.engine(), &grid, std::move(BuildGpt2(model)).value());
      ASSERT_TRUE(engine.ok()) << engine.status();
      const int batch = 2 * 2 * kAccumulation;
      for (int s = 0; s < 5; ++s) {
        const std::vector<int32_t> tokens = RandomTokens(static_cast<uint32_t>(seed + s), batch, 8, 67);
        std::vector<HostBatch> batches = MicroBatchesForRank(tokens, batch, 8, 2, kAccumulation, grid.dp_rank());
        ASSERT_TRUE((*engine)->TrainStep(Views(batches)).ok());
      }
      const Weights w = GatherWeights(**engine);
      if (S == 0) {
        reference = w;
      } else {
        EXPECT_LE(RelativeL2(w, reference), 1e-6) << (pipeline ? "pp 2" : "tp 2") << " S 1 vs full sharding";
      }
    }
  }
}

std::string TempRoot(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return JoinPath(base != nullptr ? base : "/tmp", name);
}

TEST(HsdpMpiTest, CheckpointsLoadAtAnyShardGroupSize) {
  if (SkipUnlessFourRanks()) GTEST_SKIP() << "hybrid sharding at dp 4 needs 4 ranks";
  const int32_t seed = SharedTestSeed(Grid(0).world());
  const int saved_step = 4;
  // Saved at S 2 (ZeRO 3): resumed at S 2 it continues bit for bit.
  TrainRun saver = TrainRun::Create({2, 3}, seed);
  saver.Steps(saved_step);
  const std::string root = TempRoot("hsdp_ckpt");
  ASSERT_TRUE(SaveCheckpoint(*saver.engine, root, saved_step, Gpt2RunRecord(saver.config), {saved_step * 16, 0}).ok());
  const Weights at_save = GatherWeights(*saver.engine);
  saver.Steps(3);
  const Weights continued = GatherWeights(*saver.engine);

  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(root);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const CheckpointManifest& m = reader->manifest();
  EXPECT_EQ(m.topology().dp(), 4);
  EXPECT_EQ(m.topology().shard_group_size(), 2);
  ASSERT_EQ(m.files_size(), 4);
  for (int f = 0; f < 4; ++f) EXPECT_EQ(m.files(f).dp_rank(), f);
  EXPECT_NE(InspectCheckpoint(*reader).find("topology:    dp=4 tp=1 pp=1, saved by ZeRO stage 3 with hybrid sharding "
                                            "over groups of 2,"),
            std::string::npos)
      << InspectCheckpoint(*reader);

  TrainRun resumed = TrainRun::Create({2, 3}, seed);
  ASSERT_TRUE(LoadCheckpoint(*resumed.engine, root).ok());
  EXPECT_TRUE(BitwiseEqual(GatherWeights(*resumed.engine), at_save));
  resumed.Steps(3);
  EXPECT_TRUE(BitwiseEqual(GatherWeights(*resumed.engine), continued)) << "resume at S 2";

  // At other shard group sizes and stages the loaded weights are the saved ones.
  for (const Case& other : {Case{0, 3}, Case{1, 1}, Case{0, 0}}) {
    TrainRun loaded = TrainRun::Create(other, seed);
    absl::StatusOr<LoadedCheckpoint> l = LoadCheckpoint(*loaded.engine, root);
    ASSERT_TRUE(l.ok()) << other.Name() << ": " << l.status();
    EXPECT_TRUE(BitwiseEqual(GatherWeights(*loaded.engine), at_save)) << other.Name();
    loaded.Steps(3);
    EXPECT_LE(RelativeL2(GatherWeights(*loaded.engine), continued), 1e-6) << other.Name();
  }
  // And the other way: saved with full sharding, loaded at S 2.
  const std::string full_root = TempRoot("full_ckpt");
  TrainRun full = TrainRun::Create({0, 2}, seed);
  full.Steps(2);
  ASSERT_TRUE(SaveCheckpoint(*full.engine, full_root, 2, Gpt2RunRecord(full.config), {2 * 16, 0}).ok());
  TrainRun hybrid = TrainRun::Create({2, 2}, seed);
  ASSERT_TRUE(LoadCheckpoint(*hybrid.engine, full_root).ok());
  EXPECT_TRUE(BitwiseEqual(GatherWeights(*hybrid.engine), GatherWeights(*full.engine)));
}

}  // namespace
}  // namespace zeroshard
