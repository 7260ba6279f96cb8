// Sharded checkpoints of the engine under mpirun (one process per rank, MPI
// backend), GPT-2 tiny:
//   * resume: 20 steps straight == 10 steps, save, a fresh engine loads and
//     runs 10 more (losses, loss scales and weights bitwise), stages 0-3,
//     accumulation 1 and 3, f32 and f16 with dynamic loss scaling; saving
//     every 5 steps changes nothing;
//   * resharding on load between every pair of dp sizes up to the world size
//     (weights right after loading equal the saved ones bitwise; training
//     continues and agrees with the saving dp within f32 rounding);
//   * offline `reshard` then load == load with resharding (bitwise, after
//     training on);
//   * ImportSafetensors of a consolidated file and loading an `import`ed
//     checkpoint reproduce the weights bitwise;
//   * errors (missing, corrupt on one rank only, another model) are returned
//     on every rank with the same code.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/consolidate.h"
#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/import_weights.h"
#include "checkpoint/manifest.h"
#include "checkpoint/reshard.h"
#include "comm/mpi_communicator.h"
#include "comm/process_grid.h"
#include "core/file_io.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/shared_seed.h"
#include "engine/testing/tiny_gpt2.h"
#include "engine/testing/weights.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "tests/data_parallel_world.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 36;
constexpr uint64_t kSeed = 11;

Gpt2Config Tiny(int n_layer = 2) { return TinyGpt2(n_layer); }

TrainConfig MakeConfig(int stage, int dp, int k) {
  TrainConfig t;
  t.mutable_model()->set_n_layer(2);
  t.mutable_model()->set_n_head(2);
  t.mutable_model()->set_n_embd(16);
  t.mutable_model()->set_vocab_size(67);
  t.mutable_model()->set_seq_len(8);
  t.mutable_data()->set_batch_size(kGlobalBatch);
  t.set_steps(20);
  EngineConfig& c = *t.mutable_engine();
  c.mutable_zero()->set_stage(stage);
  c.mutable_zero()->set_bucket_bytes(8192);
  c.set_gradient_accumulation_steps(k);
  c.mutable_parallel()->set_dp(dp);
  c.mutable_optimizer()->set_lr(1e-2);
  c.mutable_optimizer()->set_weight_decay(0.1);
  c.mutable_optimizer()->set_grad_clip(1.0);
  c.mutable_lr_schedule()->set_type(LrScheduleConfig::WARMUP_COSINE);
  c.mutable_lr_schedule()->set_warmup_steps(3);
  c.mutable_lr_schedule()->set_decay_steps(20);
  c.mutable_lr_schedule()->set_min_lr(1e-3);
  c.mutable_device()->set_threads_per_rank(1);
  c.set_seed(kSeed);
  return t;
}

Communicator& World() { return DataParallelWorld().dp(); }

// Ranks [0, dp) of the world, split once per size (collective on first use
// of each size, so every test asks for sizes in the same order on every rank).
Communicator* FirstRanks(int dp) {
  static std::map<int, std::unique_ptr<Communicator>>* comms = new std::map<int, std::unique_ptr<Communicator>>();
  auto it = comms->find(dp);
  if (it == comms->end()) {
    const int rank = World().rank();
    auto c = World().Split(rank < dp ? 0 : 1, rank, absl::StrCat("dp", dp));
    if (!c.ok()) std::abort();
    it = comms->emplace(dp, std::move(c).value()).first;
  }
  return World().rank() < dp ? it->second.get() : nullptr;
}

void WorldBarrier() { ASSERT_TRUE(World().Barrier()->Wait().ok()); }

// A directory every rank sees, emptied by rank 0.
std::string SharedDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = JoinPath(base != nullptr ? base : "/tmp", absl::StrCat("ckpt_mpi_", name));
  if (World().rank() == 0) {
    EXPECT_TRUE(RemoveTree(dir).ok());
    EXPECT_TRUE(MakeDirectories(dir).ok());
  }
  WorldBarrier();
  return dir;
}

// One engine on `comm` plus the data of every step (tokens differ per step).
struct TrainRun {
  std::unique_ptr<Engine> engine;
  TrainConfig config;
  int32_t data_seed = 0;
  std::vector<float> losses;
  std::vector<double> next_scales;  // the loss scale after each step
  std::vector<int64_t> skipped;     // StepResult::skipped_steps after each step

  absl::Status Step() {
    const int dp = engine->coordinates().shard_size;
    const int k = config.engine().gradient_accumulation_steps();
    const int64_t s = engine->stats().step;
    const std::vector<int32_t> tokens =
        RandomTokens(static_cast<uint32_t>(data_seed + s), kGlobalBatch, Tiny().seq_len, Tiny().vocab_size);
    std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kGlobalBatch, Tiny().seq_len, dp, k, engine->coordinates().shard_rank);
    absl::StatusOr<StepResult> r = engine->TrainStep(Views(batches));
    if (!r.ok()) return r.status();
    losses.push_back(r->loss);
    next_scales.push_back(r->next_loss_scale);
    skipped.push_back(r->skipped_steps);
    return absl::OkStatus();
  }
  absl::Status Steps(int n) {
    for (int i = 0; i < n; ++i) {
      absl::Status s = Step();
      if (!s.ok()) return s;
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
  absl::Status Save(const std::string& root, const SaveOptions& options = SaveOptions()) {
    return SaveCheckpoint(*engine, root, engine->stats().step, Gpt2RunRecord(config), {engine->stats().step * kGlobalBatch, 0}, options);
  }
};

TrainRun MakeRun(Communicator* comm, int stage, int k, int32_t data_seed, int n_layer = 2,
                 const std::function<void(TrainConfig*)>& edit = nullptr) {
  TrainRun run;
  run.config = MakeConfig(stage, comm->size(), k);
  if (edit) edit(&run.config);
  run.data_seed = data_seed;
  auto model = BuildGpt2(Tiny(n_layer));
  EXPECT_TRUE(model.ok());
  auto engine = Engine::CreateWithCommunicator(run.config.engine(), comm, std::move(model).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (engine.ok()) run.engine = std::move(*engine);
  return run;
}

// Rank 0's weights on every world rank (members of smaller groups included).
Weights BroadcastWeights(const Weights& mine, const Weights& layout) {
  Weights out = layout;
  for (auto& [name, v] : out) {
    auto it = mine.find(name);
    if (World().rank() == 0) v = it->second;
    EXPECT_TRUE(World().Broadcast(v.data(), static_cast<int64_t>(v.size()), DType::kF32, 0)->Wait().ok());
  }
  return out;
}

void ExpectBitwiseEqual(const Weights& a, const Weights& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, v] : a) {
    const std::vector<float>& w = b.at(name);
    ASSERT_EQ(v.size(), w.size()) << what << " " << name;
    EXPECT_EQ(std::memcmp(v.data(), w.data(), v.size() * sizeof(float)), 0) << what << ": " << name << " differs";
  }
}

// f16 compute with a dynamic loss scale that grows every 3 clean steps, so
// the scale moves (and overflows back off) within the run.
void UseF16(TrainConfig* c) {
  c->mutable_engine()->mutable_precision()->set_compute_dtype(F16);
  c->mutable_engine()->mutable_precision()->mutable_loss_scale()->set_growth_interval(3);
  c->mutable_engine()->mutable_precision()->mutable_loss_scale()->set_hysteresis(1);
}

TEST(CheckpointMpiTest, ResumeIsBitwiseExactForEveryStageAccumulationAndF16LossScaling) {
  const int dp = World().size();
  const std::string dir = SharedDir("resume");
  const int32_t seed = SharedTestSeed(World());
  SCOPED_TRACE(absl::StrCat("data seed ", seed));
  for (bool f16 : {false, true}) {
    for (int k : {1, 3}) {
      for (int stage = 0; stage <= 3; ++stage) {
        SCOPED_TRACE(absl::StrCat(f16 ? "f16" : "f32", " stage ", stage, " accumulation ", k, " dp ", dp));
        const std::string root = JoinPath(dir, absl::StrCat(f16 ? "f16" : "f32", "s", stage, "k", k));
        const std::function<void(TrainConfig*)> edit = f16 ? UseF16 : std::function<void(TrainConfig*)>();
        TrainRun straight = MakeRun(&World(), stage, k, seed, 2, edit);
        ASSERT_TRUE(straight.Steps(20).ok());
        const Weights want = straight.Gather();

        TrainRun first = MakeRun(&World(), stage, k, seed, 2, edit);
        ASSERT_TRUE(first.Steps(10).ok());
        ASSERT_TRUE(first.Save(root).ok());
        const int64_t saved_at = first.engine->stats().step;
        const int64_t first_skipped = first.engine->stats().skipped_steps;
        first.engine.reset();

        TrainRun second = MakeRun(&World(), stage, k, seed, 2, edit);
        absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*second.engine, root);
        ASSERT_TRUE(loaded.ok()) << loaded.status();
        EXPECT_EQ(loaded->step, saved_at);
        EXPECT_EQ(loaded->optimizer_steps, saved_at);
        EXPECT_EQ(loaded->saved_dp, dp);
        EXPECT_EQ(loaded->data.sequences_consumed, saved_at * kGlobalBatch);
        EXPECT_EQ(loaded->seed, kSeed);
        EXPECT_EQ(second.engine->stats().step, saved_at);
        EXPECT_EQ(second.engine->stats().skipped_steps, first_skipped);
        if (f16) {
          EXPECT_EQ(loaded->loss_scaler.scale(), straight.next_scales[9]);
          EXPECT_EQ(second.engine->loss_scaler().scale(), straight.next_scales[9]);
          // The scale keeps moving after the save, so restoring it matters.
          EXPECT_NE(*std::min_element(straight.next_scales.begin() + 10, straight.next_scales.end()),
                    *std::max_element(straight.next_scales.begin() + 10, straight.next_scales.end()));
        } else {
          EXPECT_FALSE(loaded->loss_scaler.has_scale());
        }
        ASSERT_TRUE(second.Steps(10).ok());
        for (int i = 0; i < 10; ++i) {
          EXPECT_EQ(std::memcmp(&second.losses[i], &straight.losses[10 + i], 4), 0)
              << "step " << 10 + i << ": " << second.losses[i] << " vs " << straight.losses[10 + i];
          EXPECT_EQ(second.next_scales[i], straight.next_scales[10 + i]) << "step " << 10 + i;
          EXPECT_EQ(second.skipped[i], straight.skipped[10 + i]) << "step " << 10 + i;
        }
        ExpectBitwiseEqual(want, second.Gather(), "resumed vs straight");

        if (stage == 3 && k == 3) {
          // Saving every 5 steps (keep 2) does not change training.
          TrainRun saving = MakeRun(&World(), stage, k, seed, 2, edit);
          const std::string every = root + "_every5";
          for (int s = 0; s < 4; ++s) {
            ASSERT_TRUE(saving.Steps(5).ok());
            SaveOptions options;
            options.keep_last = 2;
            ASSERT_TRUE(saving.Save(every, options).ok());
          }
          ExpectBitwiseEqual(want, saving.Gather(), "saving every 5 vs straight");
          EXPECT_EQ(ListCheckpointSteps(every)->size(), 2u);
        }
      }
    }
  }
}

TEST(CheckpointMpiTest, LoadReshardsBetweenEveryPairOfDpSizes) {
  const int world = World().size();
  if (world < 2) GTEST_SKIP() << "needs two ranks for two dp sizes";
  const std::string dir = SharedDir("reshard");
  const int32_t seed = SharedTestSeed(World());
  SCOPED_TRACE(absl::StrCat("data seed ", seed));
  for (int n = 1; n <= world; ++n) FirstRanks(n);  // same split order everywhere
  const Weights layout = [&] {
    TrainRun r = MakeRun(&World(), 0, 1, seed);
    return r.Gather();
  }();
  int pair = 0;
  for (int save_dp = 1; save_dp <= world; ++save_dp) {
    for (int load_dp = 1; load_dp <= world; ++load_dp) {
      if (save_dp == load_dp || (save_dp != world && load_dp != world)) continue;
      SCOPED_TRACE(absl::StrCat("save at dp ", save_dp, ", load at dp ", load_dp));
      const int save_stage = pair % 4, load_stage = (pair + 2) % 4;
      ++pair;
      const std::string root = JoinPath(dir, absl::StrCat("from", save_dp, "to", load_dp));
      Weights saved, continued;
      std::vector<float> saved_losses;
      if (Communicator* c = FirstRanks(save_dp)) {
        TrainRun run = MakeRun(c, save_stage, 1, seed);
        ASSERT_TRUE(run.Steps(4).ok());
        ASSERT_TRUE(run.Save(root).ok());
        saved = run.Gather();
        ASSERT_TRUE(run.Steps(3).ok());
        continued = run.Gather();
        saved_losses = run.losses;
      }
      saved = BroadcastWeights(saved, layout);
      continued = BroadcastWeights(continued, layout);
      saved_losses.resize(7);
      ASSERT_TRUE(World().Broadcast(saved_losses.data(), 7, DType::kF32, 0)->Wait().ok());
      if (Communicator* c = FirstRanks(load_dp)) {
        TrainRun run = MakeRun(c, load_stage, 1, seed);
        absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*run.engine, root);
        ASSERT_TRUE(loaded.ok()) << loaded.status();
        EXPECT_EQ(loaded->saved_dp, save_dp);
        ExpectBitwiseEqual(saved, run.Gather(), "right after loading");
        ASSERT_TRUE(run.Steps(3).ok());
        for (int i = 0; i < 3; ++i) EXPECT_NEAR(run.losses[i], saved_losses[4 + i], 1e-5f) << "step " << 4 + i;
        // Another dp split sums in another order: close per tensor, not per
        // element (engine/testing/weights.h).
        std::string worst;
        EXPECT_LE(WorstTensorRelativeL2(run.Gather(), continued, &worst), 1e-3) << worst;
      }
      WorldBarrier();
    }
  }
}

TEST(CheckpointMpiTest, OfflineReshardThenLoadEqualsLoadingWithResharding) {
  const int dp = World().size();
  const std::string dir = SharedDir("offline_reshard");
  const int32_t seed = SharedTestSeed(World());
  SCOPED_TRACE(absl::StrCat("data seed ", seed));
  const std::string root = JoinPath(dir, "saved"), resharded = JoinPath(dir, "resharded");
  {
    TrainRun run = MakeRun(&World(), 2, 1, seed);
    ASSERT_TRUE(run.Steps(3).ok());
    ASSERT_TRUE(run.Save(root).ok());
  }
  if (World().rank() == 0) {
    absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(root);
    ASSERT_TRUE(reader.ok());
    ASSERT_TRUE(ReshardCheckpoint(*reader, resharded, {dp == 1 ? 3 : dp - 1, 1, 1}).ok());
  }
  WorldBarrier();
  TrainRun direct = MakeRun(&World(), 1, 1, seed), offline = MakeRun(&World(), 1, 1, seed);
  ASSERT_TRUE(LoadCheckpoint(*direct.engine, root).ok());
  absl::StatusOr<LoadedCheckpoint> l = LoadCheckpoint(*offline.engine, resharded);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->saved_dp, dp == 1 ? 3 : dp - 1);
  ASSERT_TRUE(direct.Steps(3).ok());
  ASSERT_TRUE(offline.Steps(3).ok());
  EXPECT_EQ(direct.losses, offline.losses);
  ExpectBitwiseEqual(direct.Gather(), offline.Gather(), "offline reshard vs reshard on load");
}

TEST(CheckpointMpiTest, ImportOfConsolidatedWeightsIsExact) {
  const std::string dir = SharedDir("import");
  const int32_t seed = SharedTestSeed(World());
  SCOPED_TRACE(absl::StrCat("data seed ", seed));
  const std::string root = JoinPath(dir, "saved"), file = JoinPath(dir, "full.safetensors");
  const std::string imported = JoinPath(dir, "imported");
  Weights saved;
  {
    TrainRun run = MakeRun(&World(), 3, 1, seed);
    ASSERT_TRUE(run.Steps(3).ok());
    ASSERT_TRUE(run.Save(root).ok());
    saved = run.Gather();
  }
  if (World().rank() == 0) {
    absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(root);
    ASSERT_TRUE(reader.ok());
    ASSERT_TRUE(ConsolidateCheckpoint(*reader, file, {}).ok());
    TrainConfig config = MakeConfig(0, 2, 1);
    absl::StatusOr<std::string> d =
        ImportCheckpoint(file, *BuildGpt2(TinyGpt2()).value(), Gpt2RunRecord(config), imported);
    ASSERT_TRUE(d.ok()) << d.status();
  }
  WorldBarrier();
  TrainRun a = MakeRun(&World(), 2, 1, seed);
  ASSERT_TRUE(ImportSafetensors(*a.engine, file).ok());
  ExpectBitwiseEqual(saved, a.Gather(), "ImportSafetensors");
  TrainRun b = MakeRun(&World(), 0, 1, seed);
  absl::StatusOr<LoadedCheckpoint> l = LoadCheckpoint(*b.engine, imported);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->step, 0);
  ExpectBitwiseEqual(saved, b.Gather(), "import then load");
  ASSERT_TRUE(b.Steps(1).ok());  // trains from the imported weights
}

TEST(CheckpointMpiTest, SgdMomentumResumesExactlyAndWeightsOnlyLoadsIntoAdamW) {
  const std::string dir = SharedDir("sgd");
  const int32_t seed = SharedTestSeed(World());
  SCOPED_TRACE(absl::StrCat("data seed ", seed));
  const std::string root = JoinPath(dir, "sgd");
  const auto sgd = [](TrainConfig* c) {
    c->mutable_engine()->mutable_optimizer()->set_type(OptimizerConfig::SGD);
    c->mutable_engine()->mutable_optimizer()->set_momentum(0.9);
  };
  TrainRun straight = MakeRun(&World(), 1, 1, seed, 2, sgd);
  ASSERT_TRUE(straight.Steps(6).ok());
  TrainRun first = MakeRun(&World(), 1, 1, seed, 2, sgd);
  ASSERT_TRUE(first.Steps(3).ok());
  ASSERT_TRUE(first.Save(root).ok());
  const Weights at_save = first.Gather();
  TrainRun second = MakeRun(&World(), 1, 1, seed, 2, sgd);
  ASSERT_TRUE(LoadCheckpoint(*second.engine, root).ok());
  ASSERT_TRUE(second.Steps(3).ok());
  ExpectBitwiseEqual(straight.Gather(), second.Gather(), "SGD momentum resumed vs straight");
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(root);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(std::vector<std::string>(reader->manifest().kinds().begin(), reader->manifest().kinds().end()),
            (std::vector<std::string>{"master", "momentum"}));

  // An AdamW engine needs exp_avg: refused, unless weights only (--init_from).
  TrainRun adam = MakeRun(&World(), 2, 1, seed);
  absl::StatusOr<LoadedCheckpoint> refused = LoadCheckpoint(*adam.engine, root);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("holds sgd optimizer state (momentum); this run's optimizer is adamw "
                                            "(exp_avg, exp_avg_sq): resume with the same optimizer, or load weights "
                                            "only with --init_from"),
            std::string::npos)
      << refused.status();
  LoadOptions weights_only;
  weights_only.weights_only = true;
  absl::StatusOr<LoadedCheckpoint> init = LoadCheckpoint(*adam.engine, root, weights_only);
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_EQ(adam.engine->stats().step, 0);
  ExpectBitwiseEqual(at_save, adam.Gather(), "weights-only load");
  ASSERT_TRUE(adam.Steps(1).ok());
}

// Lion's one state kind (exp_avg) round-trips: 3 steps, save, load into a
// fresh engine, 3 more equal 6 straight, bit for bit.
TEST(CheckpointMpiTest, LionResumesExactly) {
  const std::string dir = SharedDir("lion");
  const int32_t seed = SharedTestSeed(World());
  SCOPED_TRACE(absl::StrCat("data seed ", seed));
  const std::string root = JoinPath(dir, "lion");
  const auto lion = [](TrainConfig* c) {
    c->mutable_engine()->mutable_optimizer()->set_type(OptimizerConfig::LION);
    c->mutable_engine()->mutable_optimizer()->set_lr(1e-3);
  };
  TrainRun straight = MakeRun(&World(), 1, 1, seed, 2, lion);
  ASSERT_TRUE(straight.Steps(6).ok());
  TrainRun first = MakeRun(&World(), 1, 1, seed, 2, lion);
  ASSERT_TRUE(first.Steps(3).ok());
  ASSERT_TRUE(first.Save(root).ok());
  TrainRun second = MakeRun(&World(), 1, 1, seed, 2, lion);
  ASSERT_TRUE(LoadCheckpoint(*second.engine, root).ok());
  ASSERT_TRUE(second.Steps(3).ok());
  ExpectBitwiseEqual(straight.Gather(), second.Gather(), "Lion resumed vs straight");
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(root);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->manifest().optimizer(), "lion");
  EXPECT_EQ(std::vector<std::string>(reader->manifest().kinds().begin(), reader->manifest().kinds().end()),
            (std::vector<std::string>{"master", "exp_avg"}));
}

TEST(CheckpointMpiTest, CheckpointDueFollowsIntervalAndLastStep) {
  TrainConfig c = MakeConfig(0, 1, 1);
  c.set_steps(10);
  EXPECT_FALSE(CheckpointDue(c.engine(), c.steps(), 10));  // no directory: never
  c.mutable_engine()->mutable_checkpoint()->set_dir("/x");
  c.mutable_engine()->mutable_checkpoint()->set_interval(4);
  c.mutable_engine()->mutable_checkpoint()->set_keep_last(3);
  std::vector<int64_t> due;
  for (int64_t s = 0; s <= 12; ++s) {
    if (CheckpointDue(c.engine(), c.steps(), s)) due.push_back(s);
  }
  EXPECT_EQ(due, (std::vector<int64_t>{4, 8, 10, 12}));
  EXPECT_EQ(SaveOptionsFromConfig(c.engine()).keep_last, 3);
}

TEST(CheckpointMpiTest, ErrorsAreReturnedOnEveryRank) {
  const int dp = World().size();
  const std::string dir = SharedDir("errors");
  const int32_t seed = SharedTestSeed(World());
  SCOPED_TRACE(absl::StrCat("data seed ", seed));
  const std::string root = JoinPath(dir, "saved");
  TrainRun run = MakeRun(&World(), 3, 1, seed);
  ASSERT_TRUE(run.Steps(1).ok());
  ASSERT_TRUE(run.Save(root).ok());

  // A root that is a file: the save fails on every rank, nothing is written.
  const std::string file_root = JoinPath(dir, "a_file");
  if (World().rank() == 0) {
    ASSERT_TRUE(WriteFileDurably(file_root, {"x"}).ok());
  }
  WorldBarrier();
  absl::Status bad_root = run.Save(file_root);
  EXPECT_EQ(bad_root.code(), absl::StatusCode::kFailedPrecondition) << bad_root;
  EXPECT_NE(bad_root.message().find(World().rank() == 0 ? "exists and is not a directory"
                                                         : "creating the checkpoint directory failed on dp rank 0"),
            std::string::npos)
      << bad_root;

  absl::StatusOr<LoadedCheckpoint> missing = LoadCheckpoint(*run.engine, JoinPath(dir, "nope"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();

  TrainRun other = MakeRun(&World(), 3, 1, seed, /*n_layer=*/1);
  absl::StatusOr<LoadedCheckpoint> mismatch = LoadCheckpoint(*other.engine, root);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kFailedPrecondition) << mismatch.status();
  EXPECT_NE(mismatch.status().message().find("units, the model has 3"), std::string::npos) << mismatch.status();

  // Flip the first data byte of the last rank's file (its share of the
  // embedding's master weights): only that rank reads it.
  const std::string path = JoinPath(JoinPath(root, "step_1"), ShardFileName(0, dp - 1, 0));
  if (World().rank() == 0) {
    absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(root);
    ASSERT_TRUE(reader.ok());
    std::string bytes = *ReadFileToString(path);
    bytes[8 + reader->manifest().files(dp - 1).header_bytes()] ^= 0x10;
    ASSERT_TRUE(WriteFileDurably(path, {bytes}).ok());
  }
  WorldBarrier();
  // The root: rank 0 finds no step that verifies (checkpoint/retention.h).
  absl::StatusOr<LoadedCheckpoint> none = LoadCheckpoint(*run.engine, root);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kDataLoss) << none.status();
  EXPECT_NE(none.status().message().find(World().rank() == 0 ? "no checkpoint under '" : "failed on dp rank 0"),
            std::string::npos)
      << none.status();
  // The step directory itself: read as given, the reading rank names the file.
  absl::StatusOr<LoadedCheckpoint> corrupt = LoadCheckpoint(*run.engine, JoinPath(root, "step_1"));
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kDataLoss) << corrupt.status();
  if (World().rank() == dp - 1) {
    EXPECT_NE(corrupt.status().message().find(ShardFileName(0, dp - 1, 0)), std::string::npos) << corrupt.status();
  } else {
    EXPECT_NE(corrupt.status().message().find(absl::StrCat("failed on dp rank ", dp - 1)), std::string::npos)
        << corrupt.status();
  }
}

}  // namespace
}  // namespace zeroshard
