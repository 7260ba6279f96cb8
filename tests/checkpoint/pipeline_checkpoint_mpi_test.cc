// Sharded checkpoints of pipeline-parallel runs under mpirun (GPT-2 tiny, 4
// blocks = 6 units):
//   * resume at the saving layout is bitwise exact (losses and weights),
//     for dp x pp = 1 x n and, at 4 ranks, 2 x 2, every ZeRO stage in turn;
//   * a checkpoint saved over pp stages loads into another split (pp n ->
//     pp 1 with dp n, and at 4 ranks pp 4 -> dp 2 x pp 2) and into another
//     partition, the weights right after loading bitwise the saved ones,
//     LoadedCheckpoint naming the saving dp and pp; training continues
//     within f32 rounding of the saving run;
//   * `ckpt consolidate` writes every parameter once, bitwise.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/consolidate.h"
#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/safetensors_file.h"
#include "comm/process_grid.h"
#include "core/file_io.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/shared_seed.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "engine/testing/weights.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 16;
constexpr int kLayers = 4;

Gpt2Config Tiny() { return TinyGpt2(kLayers); }

int WorldSize() { return MpiWorldSize(); }

// One grid per (dp, pp), created in the same order on every rank.
ProcessGrid& Grid(int dp, int pp) { return CachedGrid({dp, 1, pp}); }

Communicator& World() { return Grid(WorldSize(), 1).world(); }

struct Layout {
  int dp = 1, pp = 1, stage = 0;
  std::vector<int> partition;  // empty: by cost
  std::string Name() const {
    std::string s = absl::StrCat("dp ", dp, " x pp ", pp, " ZeRO ", stage);
    if (!partition.empty()) absl::StrAppend(&s, " partition ", absl::StrJoin(partition, ","));
    return s;
  }
};

TrainConfig MakeConfig(const Layout& l) {
  TrainConfig t;
  t.mutable_model()->set_n_layer(kLayers);
  t.mutable_model()->set_n_head(2);
  t.mutable_model()->set_n_embd(16);
  t.mutable_model()->set_vocab_size(67);
  t.mutable_model()->set_seq_len(8);
  t.mutable_data()->set_batch_size(kGlobalBatch);
  t.set_steps(20);
  EngineConfig& c = *t.mutable_engine();
  c.mutable_zero()->set_stage(l.stage);
  c.mutable_zero()->set_bucket_bytes(4096);
  c.set_gradient_accumulation_steps(4);
  c.mutable_parallel()->set_dp(l.dp);
  c.mutable_parallel()->set_pp(l.pp);
  for (int u : l.partition) c.mutable_parallel()->add_pp_partition(u);
  c.mutable_optimizer()->set_lr(1e-2);
  c.mutable_optimizer()->set_weight_decay(0.1);
  c.mutable_optimizer()->set_grad_clip(1.0);
  c.mutable_device()->set_threads_per_rank(1);
  c.set_seed(3);
  return t;
}

struct TrainRun {
  Layout layout;
  TrainConfig config;
  std::unique_ptr<Engine> engine;
  int32_t data_seed = 0;
  std::vector<float> losses;

  absl::Status Steps(int n) {
    ProcessGrid& grid = Grid(layout.dp, layout.pp);
    for (int i = 0; i < n; ++i) {
      const int64_t s = engine->stats().step;
      const std::vector<int32_t> tokens =
          RandomTokens(static_cast<uint32_t>(data_seed + s), kGlobalBatch, Tiny().seq_len, Tiny().vocab_size);
      std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kGlobalBatch, Tiny().seq_len, layout.dp,
                                                           config.engine().gradient_accumulation_steps(),
                                                           grid.dp_rank());
      absl::StatusOr<StepResult> r = engine->TrainStep(Views(batches));
      if (!r.ok()) return r.status();
      losses.push_back(r->loss);
    }
    return absl::OkStatus();
  }
  Weights Gather() {
    Weights w;
    for (const std::string& name : engine->ParamNames()) {
      absl::StatusOr<std::vector<float>> v = engine->GatherParam(name);
      EXPECT_TRUE(v.ok()) << v.status();
      if (v.ok()) w[name] = std::move(*v);
    }
    return w;
  }
  absl::Status Save(const std::string& root) {
    const int64_t step = engine->stats().step;
    return SaveCheckpoint(*engine, root, step, Gpt2RunRecord(config), {step * kGlobalBatch, 0});
  }
};

TrainRun MakeRun(const Layout& l, int32_t data_seed) {
  TrainRun run;
  run.layout = l;
  run.config = MakeConfig(l);
  run.data_seed = data_seed;
  auto engine = Engine::Create(run.config.engine(), &Grid(l.dp, l.pp), std::move(BuildGpt2(Tiny())).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (engine.ok()) run.engine = std::move(*engine);
  return run;
}

// A directory every rank sees, emptied by rank 0.
std::string SharedDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = JoinPath(base != nullptr ? base : "/tmp", absl::StrCat("pp_ckpt_", name));
  if (World().rank() == 0) {
    EXPECT_TRUE(RemoveTree(dir).ok());
    EXPECT_TRUE(MakeDirectories(dir).ok());
  }
  EXPECT_TRUE(World().Barrier()->Wait().ok());
  return dir;
}

TEST(PipelineCheckpointMpiTest, ResumeAtTheSavingLayoutIsBitwiseExact) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "a pipeline needs at least 2 ranks";
  const std::string dir = SharedDir("resume");
  const int32_t seed = SharedTestSeed(World());
  SCOPED_TRACE(absl::StrCat("data seed ", seed));
  std::vector<Layout> layouts;
  for (int stage = 0; stage <= 3; ++stage) layouts.push_back({1, n, stage, {}});
  if (n == 4) layouts.push_back({2, 2, 3, {}});
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.Name());
    const std::string root = JoinPath(dir, absl::StrCat("dp", l.dp, "pp", l.pp, "z", l.stage));
    TrainRun first = MakeRun(l, seed);
    ASSERT_TRUE(first.Steps(4).ok());
    ASSERT_TRUE(first.Save(root).ok());
    ASSERT_TRUE(first.Steps(4).ok());
    TrainRun second = MakeRun(l, seed);
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*second.engine, root);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->step, 4);
    EXPECT_EQ(loaded->saved_pp, l.pp);
    EXPECT_EQ(loaded->saved_dp, l.dp);
    ASSERT_TRUE(second.Steps(4).ok());
    EXPECT_EQ(second.losses, std::vector<float>(first.losses.begin() + 4, first.losses.end()));
    EXPECT_TRUE(BitwiseEqual(second.Gather(), first.Gather()));
  }
}

TEST(PipelineCheckpointMpiTest, LoadReshardsAcrossStagesPartitionsAndDp) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "a pipeline needs at least 2 ranks";
  const std::string dir = SharedDir("reshard");
  const int32_t seed = SharedTestSeed(World());
  SCOPED_TRACE(absl::StrCat("data seed ", seed));
  const Layout saving = {1, n, 2, {}};
  const std::string root = JoinPath(dir, "saved");
  TrainRun run = MakeRun(saving, seed);
  ASSERT_TRUE(run.Steps(4).ok());
  ASSERT_TRUE(run.Save(root).ok());
  const Weights saved = run.Gather();
  ASSERT_TRUE(run.Steps(3).ok());
  const Weights continued = run.Gather();

  // Another split of the 6 units: the first stage takes one.
  std::vector<int> uneven(n, 1);
  uneven.back() = 6 - (n - 1);
  std::vector<Layout> loading = {{n, 1, 3, {}}, {1, n, 1, uneven}};
  if (n == 4) loading.push_back({2, 2, 0, {}});
  for (const Layout& l : loading) {
    SCOPED_TRACE(absl::StrCat("load at ", l.Name()));
    TrainRun resumed = MakeRun(l, seed);
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*resumed.engine, root);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->saved_pp, n);
    EXPECT_EQ(loaded->saved_dp, 1);
    EXPECT_TRUE(BitwiseEqual(resumed.Gather(), saved)) << "right after loading";
    ASSERT_TRUE(resumed.Steps(3).ok());
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(resumed.losses[i], run.losses[4 + i], 1e-5f) << "step " << 5 + i;
    // Other stage and dp splits sum in other orders: close per tensor
    // (engine/testing/weights.h), not per element.
    std::string worst;
    EXPECT_LE(WorstTensorRelativeL2(resumed.Gather(), continued, &worst), 1e-3) << worst;
  }
}

// `ckpt consolidate` of a checkpoint saved over pp stages: every parameter
// once (the tied embedding once, though two stages hold it), bitwise the
// engine's weights.
TEST(PipelineCheckpointMpiTest, ConsolidateWritesTheWholeModelOnce) {
  const int n = WorldSize();
  if (n < 2) GTEST_SKIP() << "a pipeline needs at least 2 ranks";
  const std::string dir = SharedDir("consolidate");
  const int32_t seed = SharedTestSeed(World());
  const std::string root = JoinPath(dir, "saved"), file = JoinPath(dir, "full.safetensors");
  TrainRun run = MakeRun({1, n, 3, {}}, seed);
  ASSERT_TRUE(run.Steps(2).ok());
  ASSERT_TRUE(run.Save(root).ok());
  const Weights saved = run.Gather();
  if (World().rank() == 0) {
    absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(root);
    ASSERT_TRUE(reader.ok()) << reader.status();
    ASSERT_TRUE(ConsolidateCheckpoint(*reader, file, {}).ok());
    absl::StatusOr<SafetensorsFile> st = SafetensorsFile::Open(file);
    ASSERT_TRUE(st.ok()) << st.status();
    std::vector<std::string> names;
    for (const SafetensorsTensorInfo& t : st->header().tensors) names.push_back(t.name);
    std::vector<std::string> expected = run.engine->ParamNames();
    std::sort(names.begin(), names.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(names, expected);
    Weights read;
    for (const auto& [name, w] : saved) {
      std::vector<float> v(w.size());
      ASSERT_TRUE(st->ReadAsF32(name, 0, static_cast<int64_t>(v.size()), v.data()).ok()) << name;
      read[name] = std::move(v);
    }
    EXPECT_TRUE(BitwiseEqual(read, saved));
  }
  EXPECT_TRUE(World().Barrier()->Wait().ok());
}

}  // namespace
}  // namespace zeroshard
