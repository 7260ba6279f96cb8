// Writes the inputs of ckpt_test.sh into OUT_DIR:
//   ckpt_test_fixture_main OUT_DIR
//     fixture/ (a dp-4 checkpoint root from checkpoint/testing),
//     gpt2.safetensors (random full weights of a 1-layer GPT-2) and
//     gpt2.pbtxt (its run config at dp 3);
//   mpirun -np 2 ckpt_test_fixture_main --tp2 OUT_DIR
//     tp2/ (that GPT-2 with vocabulary 13, padded to 14 rows, trained 2
//     steps at dp 1 x tp 2, sequence parallel, ZeRO 3, then saved),
//     tp2_gathered.safetensors (every parameter's GatherParam at the save,
//     whole and unpadded) and tp1/ (the same model and data at dp 2 x tp 1).
// The seeds are fixed unless ZS_TEST_SEED says otherwise
// (core/testing/test_seed.h) and printed, so they are in a failed test's log.
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/testing/checkpoint_fixture.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "core/file_io.h"
#include "core/testing/test_seed.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

constexpr int kBatch = 4;

Gpt2Config SmallGpt2(int vocab_multiple) {
  Gpt2Config gc;
  gc.n_layer = 1;
  gc.n_head = 2;
  gc.n_embd = 8;
  gc.vocab_size = 13;
  gc.seq_len = 4;
  gc.vocab_multiple = vocab_multiple;
  return gc;
}

// Trains SmallGpt2 for 2 steps at (dp, tp) on every rank of the job and
// saves it under `root`; with `gathered` non-empty, rank 0 also writes
// every parameter's GatherParam there.
absl::Status TrainAndSave(int dp, int tp, uint32_t data_seed, const std::string& root, const std::string& gathered) {
  CommOptions options;
  options.timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<Communicator>> world = CreateMpiWorld(options);
  if (!world.ok()) return world.status();
  absl::StatusOr<ProcessGrid> grid = ProcessGrid::Create(std::move(world).value(), {dp, tp, 1});
  if (!grid.ok()) return grid.status();
  const Gpt2Config gc = SmallGpt2(tp);
  TrainConfig config;
  config.mutable_model()->set_n_layer(gc.n_layer);
  config.mutable_model()->set_n_head(gc.n_head);
  config.mutable_model()->set_n_embd(gc.n_embd);
  config.mutable_model()->set_vocab_size(gc.vocab_size);
  config.mutable_model()->set_seq_len(gc.seq_len);
  config.mutable_data()->set_batch_size(kBatch);
  config.set_steps(2);
  EngineConfig& ec = *config.mutable_engine();
  ec.mutable_zero()->set_stage(tp > 1 ? 3 : 2);
  ec.mutable_parallel()->set_dp(dp);
  ec.mutable_parallel()->set_tp(tp);
  ec.mutable_parallel()->set_sequence_parallel(tp > 1);
  ec.mutable_optimizer()->set_lr(1e-2);
  ec.mutable_device()->set_threads_per_rank(1);
  ec.set_seed(7);
  absl::StatusOr<std::unique_ptr<Model>> model = BuildGpt2(gc);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(ec, &grid.value(), std::move(model).value());
  if (!engine.ok()) return engine.status();
  for (int s = 0; s < 2; ++s) {
    const std::vector<int32_t> tokens = RandomTokens(data_seed + s, kBatch, gc.seq_len, gc.vocab_size);
    std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kBatch, gc.seq_len, dp, 1, grid->dp_rank());
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(Views(batches));
    if (!r.ok()) return r.status();
  }
  absl::Status s = SaveCheckpoint(**engine, root, 2, Gpt2RunRecord(config), {2 * kBatch, 0});
  if (!s.ok() || gathered.empty()) return s;
  std::vector<std::vector<float>> storage;
  std::vector<SafetensorsTensorData> tensors;
  const std::vector<std::string> names = (*engine)->ParamNames();
  storage.reserve(names.size());
  for (const std::string& name : names) {
    absl::StatusOr<std::vector<float>> w = (*engine)->GatherParam(name);
    if (!w.ok()) return w.status();
    storage.push_back(std::move(*w));
    for (const auto& unit : (*engine)->model().units) {
      for (const ParamSpec& p : unit->params()) {
        if (p.name == name) tensors.push_back({name, DType::kF32, p.logical(), storage.back().data()});
      }
    }
  }
  if (grid->world().rank() != 0) return absl::OkStatus();
  return WriteSafetensors(gathered, tensors, {}).status();
}

int TensorParallelFixture(const std::string& out) {
  absl::Status s = EnsureMpiInitialized();
  int rank = 0;
  if (s.ok()) {
    absl::StatusOr<std::unique_ptr<Communicator>> world = CreateMpiWorld(CommOptions{});
    s = world.status();
    if (s.ok() && (*world)->size() != 2) {
      s = absl::InvalidArgumentError(absl::StrCat("--tp2 runs on 2 ranks (mpirun -np 2), not ", (*world)->size()));
    }
    int32_t seed = static_cast<int32_t>(TestSeedFor("ckpt_test_fixture_main --tp2", SeedLog::kQuiet));
    if (s.ok()) s = (*world)->Broadcast(&seed, 1, DType::kI32, 0)->Wait();
    if (s.ok()) {
      rank = (*world)->rank();
      if (rank == 0) std::cout << "tp fixture data seed " << seed << std::endl;
      s = TrainAndSave(1, 2, static_cast<uint32_t>(seed), JoinPath(out, "tp2"),
                       JoinPath(out, "tp2_gathered.safetensors"));
    }
    if (s.ok()) s = TrainAndSave(2, 1, static_cast<uint32_t>(seed), JoinPath(out, "tp1"), "");
  }
  if (!s.ok()) std::cerr << "[rank " << rank << "] " << s << "\n";
  FinalizeMpi();
  return s.ok() ? 0 : 1;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  using namespace zeroshard;
  if (argc == 3 && std::strcmp(argv[1], "--tp2") == 0) return TensorParallelFixture(argv[2]);
  if (argc != 2) {
    std::cerr << "usage: ckpt_test_fixture_main OUT_DIR | mpirun -np 2 ckpt_test_fixture_main --tp2 OUT_DIR\n";
    return 2;
  }
  const std::string out = argv[1];
  const uint32_t values_seed = static_cast<uint32_t>(TestSeedFor("ckpt_test_fixture_main"));
  const uint32_t weights_seed = static_cast<uint32_t>(TestSeedFor("ckpt_test_fixture_main", SeedLog::kQuiet));
  std::cout << "fixture values seed " << values_seed << ", gpt2 weights seed " << weights_seed << std::endl;
  const CheckpointManifest m = testing::FixtureManifest(4, 9);
  absl::StatusOr<std::string> dir =
      testing::WriteFixture(JoinPath(out, "fixture"), m, testing::RandomFlatValues(m, values_seed));
  if (!dir.ok()) {
    std::cerr << dir.status() << "\n";
    return 1;
  }
  Gpt2Config gc;
  gc.n_layer = 1;
  gc.n_head = 2;
  gc.n_embd = 8;
  gc.vocab_size = 13;
  gc.seq_len = 4;
  auto model = BuildGpt2(gc);
  std::mt19937 rng(weights_seed);
  std::vector<std::vector<float>> storage;
  std::vector<SafetensorsTensorData> tensors;
  storage.reserve(64);
  for (const auto& unit : (*model)->units) {
    for (const ParamSpec& p : unit->params()) {
      int64_t n = 1;
      for (int64_t d : p.shape) n *= d;
      storage.emplace_back(static_cast<size_t>(n));
      for (float& x : storage.back()) x = std::normal_distribution<float>()(rng);
      tensors.push_back({p.name, DType::kF32, p.shape, storage.back().data()});
    }
  }
  absl::Status s = WriteSafetensors(JoinPath(out, "gpt2.safetensors"), tensors, {}).status();
  if (s.ok()) {
    s = WriteFileDurably(JoinPath(out, "gpt2.pbtxt"),
                         {"model { n_layer: 1 n_head: 2 n_embd: 8 vocab_size: 13 seq_len: 4 }\n"
                          "data { train_path: \"train.bin\" batch_size: 6 }\n"
                          "engine { parallel { dp: 3 } zero { stage: 2 } }\n"});
  }
  if (!s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  return 0;
}
