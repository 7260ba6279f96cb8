// Asynchronous checkpoints under mpirun (1 and 2 ranks): the snapshot
// is the step's state even when the next step trains before the write runs,
// its files and manifest equal a synchronous save's byte for byte, its size
// is the memory plan's term, and a failed write is a named error that leaves
// `latest` untouched and no temporary directory behind.
#include "checkpoint/async_checkpoint.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/manifest.h"
#include "checkpoint/run_record.h"
#include "core/file_io.h"
#include "engine/engine.h"
#include "engine/memory_plan.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "tests/data_parallel_world.h"

namespace zeroshard {
namespace {

constexpr int kRows = 4;

Communicator& World() { return DataParallelWorld().dp(); }

struct Trainer {
  EngineConfig config;
  std::unique_ptr<Engine> engine;
  Gpt2Config gpt = TinyGpt2();
  int steps = 0;

  explicit Trainer(int stage) {
    config.mutable_zero()->set_stage(stage);
    config.mutable_zero()->set_bucket_bytes(4096);
    config.mutable_device()->set_threads_per_rank(1);
    config.mutable_optimizer()->set_lr(1e-2);
    config.mutable_lr_schedule()->set_type(LrScheduleConfig::CONSTANT);
    config.mutable_checkpoint()->set_async_save(true);
    config.mutable_parallel()->set_dp(World().size());
    engine = Engine::CreateWithCommunicator(config, &World(), BuildGpt2(gpt).value()).value();
  }
  absl::Status Step() {
    const int dp = World().size();
    std::vector<HostBatch> b =
        MicroBatchesForRank(RandomTokens(100 + steps, kRows * dp, gpt.seq_len, gpt.vocab_size), kRows * dp,
                            gpt.seq_len, dp, 1, World().rank());
    ++steps;
    return engine->TrainStep(Views(b)).status();
  }
  CheckpointRunConfig Run() const { return MakeRunRecord("gpt2", config, config); }
  DataPosition Data() const { return {steps * kRows * World().size(), 0}; }
};

// The same on every rank; each rank count runs in a fresh TEST_TMPDIR.
std::string Root(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return JoinPath(tmp != nullptr ? tmp : "/tmp", absl::StrCat(name, "_np", World().size()));
}

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> s = ReadFileToString(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : "";
}

TEST(AsyncCheckpointTest, SnapshotIsTheDueStepAndEqualsASynchronousSaveByteForByte) {
  for (int stage : {0, 2}) {
    Trainer t(stage);
    ASSERT_TRUE(t.Step().ok());
    ASSERT_TRUE(t.Step().ok());
    const std::string sync_root = Root(absl::StrCat("sync", stage)), async_root = Root(absl::StrCat("async", stage));
    const absl::Status saved = SaveCheckpoint(*t.engine, sync_root, 2, t.Run(), t.Data());
    ASSERT_TRUE(saved.ok()) << saved;

    // The writer waits until the next step has trained: what it writes must
    // still be step 2's state.
    absl::Notification trained;
    SaveOptions options;
    options.async_write_fault = [&](int64_t step) {
      if (step == 2) trained.WaitForNotification();
      return absl::OkStatus();
    };
    AsyncCheckpointer async(options);
    ASSERT_TRUE(async.Begin(*t.engine, async_root, 2, t.Run(), t.Data()).ok());
    EXPECT_TRUE(async.in_flight());
    EXPECT_EQ(async.in_flight_step(), 2);
    EXPECT_FALSE(async.written());
    MemoryPlanInputs in;
    in.options = t.engine->options();
    in.plan = &t.engine->plan();
    std::unique_ptr<Model> model = BuildGpt2(t.gpt).value();
    in.model = model.get();
    absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_GT(async.snapshot_bytes(), 0);
    EXPECT_EQ(async.snapshot_bytes(), plan->checkpoint_snapshot_bytes) << "stage " << stage;

    // A second save while one is in flight is refused.
    absl::Status second = async.Begin(*t.engine, async_root, 3, t.Run(), t.Data());
    EXPECT_EQ(second, absl::FailedPreconditionError(
                          "the asynchronous checkpoint of step 2 is in flight; finish it before saving step 3"));

    ASSERT_TRUE(t.Step().ok());
    trained.Notify();
    absl::StatusOr<int64_t> committed = async.Finish(*t.engine);
    ASSERT_TRUE(committed.ok()) << committed.status();
    EXPECT_EQ(*committed, 2);
    EXPECT_FALSE(async.in_flight());
    // The buffers stay held for the next save, which takes them over.
    EXPECT_EQ(async.snapshot_bytes(), plan->checkpoint_snapshot_bytes);
    EXPECT_EQ(async.peak_snapshot_bytes(), plan->checkpoint_snapshot_bytes);
    EXPECT_EQ(Read(JoinPath(async_root, kLatestFileName)), "step_2\n");
    for (const std::string& file : {std::string("manifest.pbtxt"), ShardFileName(0, World().rank(), 0)}) {
      const std::string a = Read(JoinPath(async_root, "step_2/" + file));
      ASSERT_FALSE(a.empty()) << file;
      EXPECT_TRUE(a == Read(JoinPath(sync_root, "step_2/" + file))) << "stage " << stage << " " << file;
    }
    // A later save reuses the held buffers: the peak does not grow.
    ASSERT_TRUE(async.Begin(*t.engine, async_root, 3, t.Run(), t.Data()).ok());
    ASSERT_TRUE(async.Finish(*t.engine).ok());
    EXPECT_EQ(async.peak_snapshot_bytes(), plan->checkpoint_snapshot_bytes) << "stage " << stage;
    EXPECT_EQ(Read(JoinPath(async_root, kLatestFileName)), "step_3\n");
  }
}

TEST(AsyncCheckpointTest, FailedWriteIsANamedErrorAndLatestIsUntouched) {
  Trainer t(2);
  ASSERT_TRUE(t.Step().ok());
  const std::string root = Root("failed");
  SaveOptions options;
  // Only the last rank's write fails; every rank gets its error.
  const int failing = World().size() - 1;
  options.async_write_fault = [failing](int64_t step) {
    return step == 2 && World().rank() == failing ? absl::DataLossError("injected write failure") : absl::OkStatus();
  };
  AsyncCheckpointer async(options);
  ASSERT_TRUE(async.Begin(*t.engine, root, 1, t.Run(), t.Data()).ok());
  ASSERT_TRUE(async.Finish(*t.engine).ok());
  ASSERT_TRUE(t.Step().ok());
  ASSERT_TRUE(async.Begin(*t.engine, root, 2, t.Run(), t.Data()).ok());
  absl::StatusOr<int64_t> committed = async.Finish(*t.engine);
  ASSERT_FALSE(committed.ok());
  const std::string m(committed.status().message());
  EXPECT_EQ(committed.status().code(), absl::StatusCode::kDataLoss) << m;
  EXPECT_TRUE(absl::StartsWith(m, absl::StrCat("writing a shard file failed on dp rank ", failing, ": "))) << m;
  EXPECT_TRUE(absl::StrContains(m, "/.tmp_step_2_")) << m;
  EXPECT_TRUE(absl::StrContains(m, absl::StrCat("/", ShardFileName(0, failing, 0), ": injected write failure"))) << m;
  EXPECT_TRUE(absl::EndsWith(m, "; step 2 was not saved")) << m;
  EXPECT_FALSE(async.in_flight());
  EXPECT_EQ(Read(JoinPath(root, kLatestFileName)), "step_1\n");
  absl::StatusOr<std::vector<std::string>> entries = ListDirectory(root);
  ASSERT_TRUE(entries.ok());
  for (const std::string& e : *entries) EXPECT_FALSE(absl::StrContains(e, ".tmp_step_")) << e;
  EXPECT_FALSE(PathExists(JoinPath(root, "step_2")));
}

}  // namespace
}  // namespace zeroshard
