// Failure paths of sharded checkpoints under mpirun, GPT-2 tiny:
//   * a save that fails on one rank (a shard file on a full disk or denied,
//     the manifest on rank 0, the rename of the step directory, `latest`)
//     returns the same error on every rank, naming the rank and the file,
//     leaves no temporary directory, and `latest` and the previous step as
//     they were: that step still resumes bit for bit;
//   * resuming with another optimizer (or other optimizer state) than the
//     checkpoint's is refused on every rank, naming both, unless weights only.
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/manifest.h"
#include "comm/status_agreement.h"
#include "core/file_io.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "tests/data_parallel_world.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 24;

Communicator& World() { return DataParallelWorld().dp(); }
int Rank() { return World().rank(); }

TrainConfig MakeConfig(const std::function<void(TrainConfig*)>& edit) {
  TrainConfig t;
  t.mutable_model()->set_n_layer(2);
  t.mutable_model()->set_n_head(2);
  t.mutable_model()->set_n_embd(16);
  t.mutable_model()->set_vocab_size(67);
  t.mutable_model()->set_seq_len(8);
  t.mutable_data()->set_batch_size(kGlobalBatch);
  t.set_steps(10);
  EngineConfig& c = *t.mutable_engine();
  c.mutable_zero()->set_stage(3);
  c.mutable_zero()->set_bucket_bytes(8192);
  c.mutable_parallel()->set_dp(World().size());
  c.mutable_optimizer()->set_lr(1e-2);
  c.mutable_optimizer()->set_weight_decay(0.1);
  c.mutable_device()->set_threads_per_rank(1);
  c.set_seed(5);
  if (edit) edit(&t);
  return t;
}

void Sgd(TrainConfig* c) { c->mutable_engine()->mutable_optimizer()->set_type(OptimizerConfig::SGD); }
void SgdMomentum(TrainConfig* c) {
  Sgd(c);
  c->mutable_engine()->mutable_optimizer()->set_momentum(0.9);
}
void Lion(TrainConfig* c) { c->mutable_engine()->mutable_optimizer()->set_type(OptimizerConfig::LION); }

// A directory every rank sees, emptied by rank 0.
std::string SharedDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = JoinPath(base != nullptr ? base : "/tmp", absl::StrCat("ckpt_fail_", name));
  if (Rank() == 0) {
    EXPECT_TRUE(RemoveTree(dir).ok());
    EXPECT_TRUE(MakeDirectories(dir).ok());
  }
  EXPECT_TRUE(World().Barrier()->Wait().ok());
  return dir;
}

using Weights = std::map<std::string, std::vector<float>>;

struct TrainRun {
  std::unique_ptr<Engine> engine;
  TrainConfig config;
  std::vector<float> losses;

  explicit TrainRun(const std::function<void(TrainConfig*)>& edit = nullptr) : config(MakeConfig(edit)) {
    auto model = BuildGpt2(TinyGpt2(2));
    EXPECT_TRUE(model.ok());
    auto e = Engine::CreateWithCommunicator(config.engine(), &World(), std::move(model).value());
    EXPECT_TRUE(e.ok()) << e.status();
    if (e.ok()) engine = std::move(*e);
  }
  int64_t step() const { return engine->stats().step; }
  absl::Status Steps(int n) {
    for (int i = 0; i < n; ++i) {
      const std::vector<int32_t> tokens = RandomTokens(static_cast<uint32_t>(100 + step()), kGlobalBatch,
                                                       TinyGpt2().seq_len, TinyGpt2().vocab_size);
      std::vector<HostBatch> batches =
          MicroBatchesForRank(tokens, kGlobalBatch, TinyGpt2().seq_len, World().size(), 1, Rank());
      absl::StatusOr<StepResult> r = engine->TrainStep(Views(batches));
      if (!r.ok()) return r.status();
      losses.push_back(r->loss);
    }
    return absl::OkStatus();
  }
  absl::Status Save(const std::string& root, int64_t step) {
    return SaveCheckpoint(*engine, root, step, Gpt2RunRecord(config), {step * kGlobalBatch, 0});
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
};

void ExpectBitwiseEqual(const Weights& a, const Weights& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, v] : a) {
    const std::vector<float>& w = b.at(name);
    ASSERT_EQ(v.size(), w.size()) << what << " " << name;
    EXPECT_EQ(std::memcmp(v.data(), w.data(), v.size() * sizeof(float)), 0) << what << ": " << name << " differs";
  }
}

// Whether `text` is the same on every rank (rank 0's is broadcast).
bool SameOnEveryRank(const std::string& text) {
  int32_t n = static_cast<int32_t>(text.size());
  EXPECT_TRUE(World().Broadcast(&n, 1, DType::kI32, 0)->Wait().ok());
  std::vector<int32_t> words((n + 3) / 4, 0);
  if (Rank() == 0) std::memcpy(words.data(), text.data(), text.size());
  if (!words.empty()) {
    EXPECT_TRUE(World().Broadcast(words.data(), static_cast<int64_t>(words.size()), DType::kI32, 0)->Wait().ok());
  }
  int32_t differs = n != static_cast<int32_t>(text.size()) || std::memcmp(words.data(), text.data(), text.size()) != 0;
  EXPECT_TRUE(World().AllReduce(&differs, 1, DType::kI32, ReduceOp::kMax)->Wait().ok());
  return differs == 0;
}

// Clears the injected fault however the test ends.
struct FaultScope {
  explicit FaultScope(std::function<int(FileOp, const std::string&)> fault) {
    SetFileFaultForTesting(std::move(fault));
  }
  ~FaultScope() { SetFileFaultForTesting(nullptr); }
};

TEST(CheckpointFailureMpiTest, FailedSaveCleansUpOnEveryRankAndKeepsLatest) {
  const int dp = World().size();
  const std::string root = JoinPath(SharedDir("save"), "ck");
  TrainRun run;
  ASSERT_TRUE(run.Steps(2).ok());
  ASSERT_TRUE(run.Save(root, 2).ok());
  const Weights at_2 = run.Gather();
  ASSERT_TRUE(run.Steps(2).ok());  // the losses of steps 3 and 4 a resume must repeat
  const std::string step_2_manifest = Rank() == 0 ? *ReadFileToString(JoinPath(root, "step_2/manifest.pbtxt")) : "";

  struct Case {
    std::string name;
    int rank;             // the one rank whose file operation fails
    FileOp op;
    std::string suffix;   // of the failing path
    int err;
    int64_t step;         // the step saved: 4, or 2 again (replacing the committed one)
    std::string phase;    // as the error names it
    absl::StatusCode code;
  };
  const int last = dp - 1, middle = dp / 2;
  const std::vector<Case> cases = {
      {"last rank's shard file, disk full", last, FileOp::kWrite, ShardFileName(0, last, 0), ENOSPC, 4,
       "writing a shard file", absl::StatusCode::kResourceExhausted},
      {"a middle rank's shard file, denied", middle, FileOp::kCreate, ShardFileName(0, middle, 0), EACCES, 4,
       "writing a shard file", absl::StatusCode::kPermissionDenied},
      {"rank 0's shard file fsync, disk full", 0, FileOp::kSync, ShardFileName(0, 0, 0), ENOSPC, 4,
       "writing a shard file", absl::StatusCode::kResourceExhausted},
      {"the manifest, disk full", 0, FileOp::kWrite, kManifestFileName, ENOSPC, 4, "committing the checkpoint",
       absl::StatusCode::kResourceExhausted},
      {"renaming to step_4, denied", 0, FileOp::kRename, "/step_4", EACCES, 4, "committing the checkpoint",
       absl::StatusCode::kPermissionDenied},
      {"latest.tmp, disk full", 0, FileOp::kWrite, "/latest.tmp", ENOSPC, 4, "committing the checkpoint",
       absl::StatusCode::kResourceExhausted},
      {"renaming latest, denied", 0, FileOp::kRename, "/latest", EACCES, 4, "committing the checkpoint",
       absl::StatusCode::kPermissionDenied},
      {"re-saving step 2, latest.tmp full", 0, FileOp::kWrite, "/latest.tmp", ENOSPC, 2,
       "committing the checkpoint", absl::StatusCode::kResourceExhausted},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.name, ", dp ", dp));
    absl::Status s;
    {
      FaultScope scope([&](FileOp op, const std::string& path) {
        return Rank() == c.rank && op == c.op && absl::EndsWith(path, c.suffix) ? c.err : 0;
      });
      s = run.Save(root, c.step);
    }
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_TRUE(absl::StartsWith(s.message(), absl::StrCat(c.phase, " failed on dp rank ", c.rank, ": "))) << s;
    EXPECT_NE(s.message().find(c.suffix), std::string::npos) << s;
    EXPECT_NE(s.message().find(std::strerror(c.err)), std::string::npos) << s;
    EXPECT_NE(s.message().find(absl::StrCat("step ", c.step, " was not saved")), std::string::npos) << s;
    EXPECT_EQ(IsRelayedError(s), Rank() != c.rank) << s;  // printed once, by the failing rank
    EXPECT_TRUE(SameOnEveryRank(std::string(s.message()))) << s;
    // SaveCheckpoint has removed everything on every rank before returning.
    if (Rank() == 0) {
      EXPECT_EQ(*ListDirectory(root), (std::vector<std::string>{"latest", "step_2"}));
      EXPECT_EQ(*ReadFileToString(JoinPath(root, "latest")), "step_2\n");
      EXPECT_EQ(*ReadFileToString(JoinPath(root, "step_2/manifest.pbtxt")), step_2_manifest);
    }
    ASSERT_TRUE(World().Barrier()->Wait().ok());
  }

  TrainRun resumed;
  absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*resumed.engine, root);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 2);
  ExpectBitwiseEqual(at_2, resumed.Gather(), "step 2 after the failed saves");
  ASSERT_TRUE(resumed.Steps(2).ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(std::memcmp(&resumed.losses[i], &run.losses[2 + i], 4), 0)
        << "step " << 3 + i << ": " << resumed.losses[i] << " vs " << run.losses[2 + i];
  }
  ExpectBitwiseEqual(run.Gather(), resumed.Gather(), "resumed at step 4 vs the saving run");

  // The failures leave nothing in the way of the next save.
  ASSERT_TRUE(run.Save(root, 4).ok());
  if (Rank() == 0) {
    EXPECT_EQ(*ListDirectory(root), (std::vector<std::string>{"latest", "step_2", "step_4"}));
    EXPECT_EQ(*ReadFileToString(JoinPath(root, "latest")), "step_4\n");
  }
}

TEST(CheckpointFailureMpiTest, ResumingWithAnotherOptimizerIsRefusedUnlessWeightsOnly) {
  const std::string dir = SharedDir("optimizer");
  const std::string adamw = JoinPath(dir, "adamw"), momentum = JoinPath(dir, "momentum"), sgd = JoinPath(dir, "sgd"),
                    lion = JoinPath(dir, "lion");
  std::map<std::string, Weights> saved;
  for (const auto& [root, edit] : std::vector<std::pair<std::string, std::function<void(TrainConfig*)>>>{
           {adamw, nullptr}, {momentum, SgdMomentum}, {sgd, Sgd}, {lion, Lion}}) {
    TrainRun run(edit);
    ASSERT_TRUE(run.Steps(2).ok());
    ASSERT_TRUE(run.Save(root, 2).ok());
    saved[root] = run.Gather();
  }
  const std::string tail =
      ": resume with the same optimizer, or load weights only with --init_from / LoadOptions weights_only";
  struct Case {
    std::string root;
    std::function<void(TrainConfig*)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {adamw, Sgd,
       absl::StrCat("checkpoint '", adamw, "/step_2' holds adamw optimizer state (exp_avg, exp_avg_sq); this run's "
                    "optimizer is sgd without momentum (no state)", tail)},
      {adamw, SgdMomentum,
       absl::StrCat("checkpoint '", adamw, "/step_2' holds adamw optimizer state (exp_avg, exp_avg_sq); this run's "
                    "optimizer is sgd with momentum (momentum)", tail)},
      {momentum, nullptr,
       absl::StrCat("checkpoint '", momentum, "/step_2' holds sgd optimizer state (momentum); this run's optimizer "
                    "is adamw (exp_avg, exp_avg_sq)", tail)},
      {momentum, Sgd,
       absl::StrCat("checkpoint '", momentum, "/step_2' holds sgd optimizer state (momentum); this run's optimizer "
                    "is sgd without momentum (no state)", tail)},
      {sgd, SgdMomentum,
       absl::StrCat("checkpoint '", sgd, "/step_2' holds no optimizer state (sgd without momentum); this run's "
                    "optimizer is sgd with momentum (momentum)", tail)},
      {adamw, Lion,
       absl::StrCat("checkpoint '", adamw, "/step_2' holds adamw optimizer state (exp_avg, exp_avg_sq); this run's "
                    "optimizer is lion (exp_avg)", tail)},
      {lion, nullptr,
       absl::StrCat("checkpoint '", lion, "/step_2' holds lion optimizer state (exp_avg); this run's optimizer is "
                    "adamw (exp_avg, exp_avg_sq)", tail)},
      {lion, SgdMomentum,
       absl::StrCat("checkpoint '", lion, "/step_2' holds lion optimizer state (exp_avg); this run's optimizer is "
                    "sgd with momentum (momentum)", tail)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    TrainRun run(c.edit);
    absl::StatusOr<LoadedCheckpoint> refused = LoadCheckpoint(*run.engine, c.root);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
    EXPECT_EQ(refused.status().message(), c.message);
    LoadOptions weights_only;
    weights_only.weights_only = true;
    absl::StatusOr<LoadedCheckpoint> init = LoadCheckpoint(*run.engine, c.root, weights_only);
    ASSERT_TRUE(init.ok()) << init.status();
    EXPECT_EQ(run.step(), 0);
    ExpectBitwiseEqual(saved[c.root], run.Gather(), "weights only");
    ASSERT_TRUE(run.Steps(1).ok());
  }
  TrainRun same(SgdMomentum);  // the saving optimizer resumes
  absl::StatusOr<LoadedCheckpoint> resumed = LoadCheckpoint(*same.engine, momentum);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(same.step(), 2);
}

}  // namespace
}  // namespace zeroshard
