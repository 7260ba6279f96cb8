// The committed format-1 checkpoint (testdata/v1_gpt2_dp2/step_3: GPT-2,
// dp 2, ZeRO-2, AdamW) under today's build, on 2 ranks:
//   * it verifies clean;
//   * consolidate --optimizer gives exactly the committed file's bytes (the
//     build that wrote the checkpoint wrote them), and so does consolidating
//     its reshards to dp 3, pp 2 and dp 3 x pp 2 (each verifying clean, in
//     format 2);
//   * resharding it to tp 2 fails: format 1 records no partitions;
//   * an engine at dp 1 (rank 0 alone) and at dp 2 loads it, and so does
//     one at tp 2 (the engine knows its partitions): every GatherParam is
//     bitwise the consolidated tensor, and saving the loaded state again
//     consolidates to the committed bytes (optimizer included).
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/consolidate.h"
#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/manifest.h"
#include "checkpoint/reshard.h"
#include "checkpoint/safetensors_file.h"
#include "checkpoint/verify.h"
#include "comm/mpi_communicator.h"
#include "comm/process_grid.h"
#include "core/file_io.h"
#include "engine/config_loader.h"
#include "engine/engine.h"
#include "models/gpt2/gpt2_model_config.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"
#include "models/gpt2/train_config.h"

namespace zeroshard {
namespace {

constexpr char kStepDir[] = "tests/checkpoint/testdata/v1_gpt2_dp2/step_3";
constexpr char kConfig[] = "tests/checkpoint/testdata/v1_gpt2_dp2.pbtxt";
constexpr char kConsolidated[] = "tests/checkpoint/testdata/v1_gpt2_dp2_consolidated.safetensors";

int WorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int WorldSize() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// This rank's own scratch directory (offline checks run on every rank).
std::string ScratchDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = JoinPath(base != nullptr ? base : "/tmp", absl::StrCat("v1_", name, "_rank", WorldRank()));
  EXPECT_TRUE(RemoveTree(dir).ok());
  EXPECT_TRUE(MakeDirectories(dir).ok());
  return dir;
}

std::string Committed() {
  absl::StatusOr<std::string> bytes = ReadFileToString(kConsolidated);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.value_or("");
}

std::string ConsolidatedBytes(const std::string& dir, const std::string& out) {
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return "";
  ConsolidateOptions options;
  options.optimizer = true;
  absl::Status s = ConsolidateCheckpoint(*reader, out, options);
  EXPECT_TRUE(s.ok()) << s;
  return ReadFileToString(out).value_or("");
}

TEST(V1CompatTest, VerifiesClean) {
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(kStepDir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->manifest().format_version(), 1);
  EXPECT_EQ(reader->manifest().topology().dp(), 2);
  ASSERT_EQ(reader->manifest().files_size(), 2);
  EXPECT_EQ(reader->manifest().files(1).path(), "rank_00001.safetensors");
  const std::vector<absl::Status> problems = VerifyCheckpoint(kStepDir);
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems, first: " << problems[0];
}

TEST(V1CompatTest, ConsolidatesToTheCommittedBytes) {
  const std::string dir = ScratchDir("consolidate");
  const std::string want = Committed();
  ASSERT_GT(want.size(), 0u);
  EXPECT_TRUE(ConsolidatedBytes(kStepDir, JoinPath(dir, "c.safetensors")) == want);
}

TEST(V1CompatTest, ReshardedToDp3AndPp2ConsolidatesToTheCommittedBytes) {
  const std::string want = Committed();
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(kStepDir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const GridShape& target : {GridShape{3, 1, 1}, GridShape{1, 1, 2}, GridShape{3, 1, 2}}) {
    SCOPED_TRACE(absl::StrCat("dp ", target.dp, " pp ", target.pp));
    const std::string dir = ScratchDir(absl::StrCat("reshard_dp", target.dp, "_pp", target.pp));
    absl::StatusOr<std::string> out = ReshardCheckpoint(*reader, JoinPath(dir, "ckpt"), target);
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<absl::Status> problems = VerifyCheckpoint(*out);
    EXPECT_TRUE(problems.empty()) << problems[0];
    absl::StatusOr<CheckpointReader> resharded = CheckpointReader::Open(*out);
    ASSERT_TRUE(resharded.ok()) << resharded.status();
    EXPECT_EQ(resharded->manifest().format_version(), kManifestFormatVersion);
    EXPECT_EQ(resharded->manifest().files_size(), target.dp * target.pp);
    EXPECT_EQ(resharded->manifest().files(target.dp * target.pp - 1).path(),
              ShardFileName(target.pp - 1, target.dp - 1, 0));
    EXPECT_TRUE(ConsolidatedBytes(*out, JoinPath(dir, "c.safetensors")) == want);
  }
}

TEST(V1CompatTest, ReshardToTp2FailsNamingTheMissingPartitions) {
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(kStepDir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const std::string dir = ScratchDir("reshard_tp2");
  const std::string out_root = JoinPath(dir, "ckpt");
  absl::StatusOr<std::string> out = ReshardCheckpoint(*reader, out_root, GridShape{1, 2, 1});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(out.status().message(),
            "the checkpoint (format 1, tp 1) records no tensor-parallel partitions, so it cannot be split over tp 2; "
            "consolidate it and start the tp run from the .safetensors file (--init_from or ckpt import)");
  EXPECT_FALSE(PathExists(JoinPath(out_root, "latest")));
  EXPECT_FALSE(PathExists(JoinPath(out_root, "step_3")));
}

// Loads the fixture into an engine at the grid's (dp, tp) and checks every
// parameter against the consolidated file, then saves it and checks the
// consolidated bytes of that save.
void LoadAndCompare(ProcessGrid& grid, const std::string& scratch) {
  const int dp = grid.shape().dp, tp = grid.shape().tp;
  const std::string layout = absl::StrCat("dp", dp, "_tp", tp);
  absl::StatusOr<TrainConfig> config =
      LoadTrainConfig(kConfig,
                      {absl::StrCat("engine.parallel.dp=", dp), absl::StrCat("engine.parallel.tp=", tp),
                       "engine.device.threads_per_rank=1"},
                      dp * tp);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<Model>> model = BuildGpt2(Gpt2ConfigFromTrainConfig(*config));
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(config->engine(), &grid, std::move(*model));
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(**engine, kStepDir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 3);
  EXPECT_EQ(loaded->optimizer_steps, 3);
  EXPECT_EQ(loaded->saved_dp, 2);
  // A manifest from before the model registry: its GPT-2 sections are
  // skipped, its engine section kept, no model recorded.
  EXPECT_EQ(loaded->config.engine().seed(), 7u);
  EXPECT_EQ(loaded->config.engine().zero().stage(), 2);
  EXPECT_EQ(loaded->config.model_name(), "");
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(kConsolidated);
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<std::string> names = (*engine)->ParamNames();
  EXPECT_EQ(names.size(), 2u + 2 * 12 + 2);  // wte, wpe; 12 per block; ln_f
  for (const std::string& name : names) {
    absl::StatusOr<std::vector<float>> got = (*engine)->GatherParam(name);
    ASSERT_TRUE(got.ok()) << got.status();
    const SafetensorsTensorInfo* t = file->header().Find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->numel(), static_cast<int64_t>(got->size())) << name;
    std::vector<float> want(got->size());
    ASSERT_TRUE(file->ReadAsF32(name, 0, t->numel(), want.data()).ok());
    EXPECT_EQ(std::memcmp(got->data(), want.data(), want.size() * sizeof(float)), 0) << name << " at " << layout;
  }
  // The optimizer state came back too: saving it again gives the same file.
  const std::string root = JoinPath(scratch, absl::StrCat("saved_", layout));
  ASSERT_TRUE(SaveCheckpoint(**engine, root, 3, Gpt2RunRecord(*config), loaded->data).ok());
  if (grid.world().rank() == 0) {
    EXPECT_TRUE(ConsolidatedBytes(root, root + ".safetensors") == Committed()) << layout;
  }
}

// dp 1: rank 0 alone, on its own communicator.
void LoadAtDp1(const std::string& scratch, const CommOptions& options) {
  absl::StatusOr<std::unique_ptr<Communicator>> self = CreateMpiCommunicator(MPI_COMM_SELF, "world", options);
  ASSERT_TRUE(self.ok()) << self.status();
  absl::StatusOr<ProcessGrid> grid = ProcessGrid::Create(std::move(*self), GridShape{1, 1, 1});
  ASSERT_TRUE(grid.ok()) << grid.status();
  LoadAndCompare(*grid, scratch);
}

TEST(V1CompatTest, EngineAtDp1AndDp2LoadsItBitwise) {
  ASSERT_EQ(WorldSize(), 2) << "run on 2 ranks";
  CommOptions options;
  options.timeout = absl::Seconds(60);
  // A directory both ranks see.
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string scratch = JoinPath(base != nullptr ? base : "/tmp", "v1_engine");
  if (WorldRank() == 0) {
    EXPECT_TRUE(RemoveTree(scratch).ok());
    EXPECT_TRUE(MakeDirectories(scratch).ok());
    LoadAtDp1(scratch, options);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  absl::StatusOr<std::unique_ptr<Communicator>> world = CreateMpiWorld(options);
  ASSERT_TRUE(world.ok()) << world.status();
  absl::StatusOr<ProcessGrid> grid = ProcessGrid::Create(std::move(*world), GridShape{2, 1, 1});
  ASSERT_TRUE(grid.ok()) << grid.status();
  LoadAndCompare(*grid, scratch);
}

// Offline `ckpt reshard` cannot split a format-1 checkpoint over tp, but an
// engine at tp 2 can load it: the model supplies the partitions.
TEST(V1CompatTest, EngineAtTp2LoadsItBitwise) {
  ASSERT_EQ(WorldSize(), 2) << "run on 2 ranks";
  CommOptions options;
  options.timeout = absl::Seconds(60);
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string scratch = JoinPath(base != nullptr ? base : "/tmp", "v1_engine_tp2");
  if (WorldRank() == 0) {
    EXPECT_TRUE(RemoveTree(scratch).ok());
    EXPECT_TRUE(MakeDirectories(scratch).ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  absl::StatusOr<std::unique_ptr<Communicator>> world = CreateMpiWorld(options);
  ASSERT_TRUE(world.ok()) << world.status();
  absl::StatusOr<ProcessGrid> grid = ProcessGrid::Create(std::move(*world), GridShape{1, 2, 1});
  ASSERT_TRUE(grid.ok()) << grid.status();
  LoadAndCompare(*grid, scratch);
}

}  // namespace
}  // namespace zeroshard
