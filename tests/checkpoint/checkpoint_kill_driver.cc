// Trains GPT-2 tiny under mpirun with periodic checkpoints, for
// checkpoint_kill_test.sh:
//   checkpoint_kill_driver train ROOT STEPS SAVE_EVERY [KILL_RANK KILL_STEP KILL_PHASE]
//     from scratch; SIGKILLs rank KILL_RANK at SaveOptions::fault_hook phase
//     KILL_PHASE of the save at step KILL_STEP (a rank dying mid-save);
//   checkpoint_kill_driver resume ROOT STEPS SAVE_EVERY
//     loads ROOT's latest checkpoint (any saved dp) and trains on to STEPS.
// Rank 0 prints "resumed from step N", one "loss step=S value=HEX" line per
// step (bit pattern) and "final step=N weights_crc32c=HEX" (of every
// parameter's gathered f32 bytes). Exit 0 on success, 1 on any error.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/crc32c.h"
#include "checkpoint/engine_checkpoint.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 12;

int Fail(const absl::Status& s, int rank) {
  std::fprintf(stderr, "[rank %d] error: %s\n", rank, std::string(s.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s train|resume ROOT STEPS SAVE_EVERY [KILL_RANK KILL_STEP KILL_PHASE]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], root = argv[2];
  const int steps = std::atoi(argv[3]), save_every = std::atoi(argv[4]);
  const int kill_rank = argc > 5 ? std::atoi(argv[5]) : -1;
  const int kill_step = argc > 6 ? std::atoi(argv[6]) : -1;
  const std::string kill_phase = argc > 7 ? argv[7] : "";

  CommOptions options;
  options.timeout = absl::Seconds(60);
  auto world = CreateMpiWorld(options);
  if (!world.ok()) return Fail(world.status(), -1);
  const int n = (*world)->size();
  auto grid = ProcessGrid::Create(std::move(world).value(), {n, 1, 1});
  if (!grid.ok()) return Fail(grid.status(), -1);
  const int rank = grid->dp_rank();

  Gpt2Config gc;
  gc.n_layer = 2;
  gc.n_head = 2;
  gc.n_embd = 16;
  gc.vocab_size = 67;
  gc.seq_len = 8;
  TrainConfig config;
  config.set_steps(steps);
  config.mutable_data()->set_batch_size(kGlobalBatch);
  EngineConfig& ec = *config.mutable_engine();
  ec.mutable_zero()->set_stage(3);
  ec.mutable_parallel()->set_dp(n);
  ec.mutable_optimizer()->set_lr(1e-2);
  ec.mutable_device()->set_threads_per_rank(1);
  ec.mutable_checkpoint()->set_dir(root);
  ec.mutable_checkpoint()->set_interval(save_every);
  ec.mutable_checkpoint()->set_keep_last(2);
  ec.set_seed(5);
  auto model = BuildGpt2(gc);
  if (!model.ok()) return Fail(model.status(), rank);
  auto engine = Engine::Create(ec, &grid.value(), std::move(model).value());
  if (!engine.ok()) return Fail(engine.status(), rank);
  Engine& e = **engine;

  int64_t start = 0;
  if (mode == "resume") {
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(e, root);
    if (!loaded.ok()) return Fail(loaded.status(), rank);
    start = loaded->step;
    if (rank == 0) std::printf("resumed from step %lld (saved at dp %d)\n", static_cast<long long>(start), loaded->saved_dp);
  } else if (mode != "train") {
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  for (int64_t s = start; s < steps; ++s) {
    // The same tokens for step s whatever dp or resume point.
    const std::vector<int32_t> tokens = RandomTokens(1000 + static_cast<uint32_t>(s), kGlobalBatch, gc.seq_len, gc.vocab_size);
    std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kGlobalBatch, gc.seq_len, n, 1, rank);
    absl::StatusOr<StepResult> r = e.TrainStep(Views(batches));
    if (!r.ok()) return Fail(r.status(), rank);
    uint32_t bits;
    std::memcpy(&bits, &r->loss, 4);
    if (rank == 0) std::printf("loss step=%lld value=%08x\n", static_cast<long long>(s + 1), bits);
    if (save_every > 0 && (s + 1) % save_every == 0) {
      SaveOptions save;
      save.keep_last = ec.checkpoint().keep_last();
      save.fault_hook = [&](absl::string_view phase) {
        if (rank == kill_rank && s + 1 == kill_step && phase == kill_phase) {
          std::fflush(stdout);
          raise(SIGKILL);
        }
      };
      absl::Status saved = SaveCheckpoint(e, root, s + 1, Gpt2RunRecord(config), {(s + 1) * kGlobalBatch, 0}, save);
      if (!saved.ok()) return Fail(saved, rank);
    }
  }
  uint32_t crc = 0;
  for (const std::string& name : e.ParamNames()) {
    absl::StatusOr<std::vector<float>> w = e.GatherParam(name);
    if (!w.ok()) return Fail(w.status(), rank);
    crc = Crc32cExtend(crc, w->data(), w->size() * sizeof(float));
  }
  if (rank == 0) std::printf("final step=%d weights_crc32c=%08x\n", steps, crc);
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  const int rc = zeroshard::Main(argc, argv);
  zeroshard::FinalizeMpi();
  return rc;
}
