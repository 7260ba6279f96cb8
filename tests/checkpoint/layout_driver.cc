// Trains GPT-2 (n_head 4, n_layer 2: units embed, h.0, h.1, head; vocabulary
// 67, padded at tp 2 and 4) under mpirun for layout_roundtrip_test.sh and
// layout_fault_test.sh. Each JOB runs on the whole MPI world, in order:
//
//   layout_driver [--seed N] [--kill RANK:STEP:PHASE] JOB...
//   JOB = DP,TP,PP,ZERO[,sp]:ROOT:STEPS[:FROM]
//
// A job builds an engine at (DP, TP, PP) with ZeRO stage ZERO (sequence
// parallelism with "sp"), loads FROM's latest checkpoint when given (any
// layout), trains to STEPS and saves step STEPS under ROOT. Step s trains on
// the same global batch at any layout (RandomTokens(seed + s), cut by
// data/batch_plan.h's rule). --kill SIGKILLs world rank RANK at
// SaveOptions::fault_hook phase PHASE of the save of step STEP.
//
// Rank 0 prints "job J loss step=S bits=HEX value=V" per step, "job J
// resumed from step S (saved at dp D tp T pp P)" and "job J saved ROOT/step_S".
// Every failing rank prints "[rank R] error: CODE: MESSAGE" and exits 1.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/engine_checkpoint.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "comm/process_grid.h"
#include "core/status_macros.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "models/gpt2/gpt2_model_config.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 16;
constexpr int kAccumulation = 2;
constexpr int kPlannedSteps = 10;  // the LR schedule's length, whatever a job runs

struct Job {
  GridShape shape;
  int zero = 0;
  bool sp = false;
  std::string root, from;
  int steps = 0;
};

absl::StatusOr<Job> ParseJob(const std::string& spec) {
  const std::vector<std::string> parts = absl::StrSplit(spec, ':');
  const std::vector<std::string> grid = absl::StrSplit(parts[0], ',');
  Job job;
  if (parts.size() < 3 || parts.size() > 4 || grid.size() < 4 || grid.size() > 5 ||
      !absl::SimpleAtoi(grid[0], &job.shape.dp) || !absl::SimpleAtoi(grid[1], &job.shape.tp) ||
      !absl::SimpleAtoi(grid[2], &job.shape.pp) || !absl::SimpleAtoi(grid[3], &job.zero) ||
      (grid.size() == 5 && grid[4] != "sp") || !absl::SimpleAtoi(parts[2], &job.steps)) {
    return absl::InvalidArgumentError(absl::StrCat("bad job '", spec, "': expected DP,TP,PP,ZERO[,sp]:ROOT:STEPS[:FROM]"));
  }
  job.sp = grid.size() == 5;
  job.root = parts[1];
  if (parts.size() == 4) job.from = parts[3];
  return job;
}

TrainConfig MakeConfig(const Job& job, uint32_t seed) {
  TrainConfig t;
  ModelConfig& m = *t.mutable_model();
  m.set_n_layer(2);
  m.set_n_head(4);
  m.set_n_embd(16);
  m.set_vocab_size(67);
  m.set_seq_len(8);
  t.mutable_data()->set_batch_size(kGlobalBatch);
  t.mutable_data()->set_shuffle_seed(seed);
  t.set_steps(kPlannedSteps);
  EngineConfig& c = *t.mutable_engine();
  c.mutable_zero()->set_stage(job.zero);
  c.mutable_zero()->set_bucket_bytes(4096);
  c.set_gradient_accumulation_steps(kAccumulation);
  c.mutable_parallel()->set_dp(job.shape.dp);
  c.mutable_parallel()->set_tp(job.shape.tp);
  c.mutable_parallel()->set_pp(job.shape.pp);
  c.mutable_parallel()->set_sequence_parallel(job.sp);
  c.mutable_optimizer()->set_lr(1e-2);
  c.mutable_optimizer()->set_weight_decay(0.1);
  c.mutable_optimizer()->set_grad_clip(1.0);
  c.mutable_lr_schedule()->set_type(LrScheduleConfig::WARMUP_COSINE);
  c.mutable_lr_schedule()->set_warmup_steps(2);
  c.mutable_lr_schedule()->set_decay_steps(kPlannedSteps);
  c.mutable_lr_schedule()->set_min_lr(1e-3);
  c.mutable_device()->set_threads_per_rank(1);
  c.mutable_checkpoint()->set_dir(job.root);
  c.set_seed(11);
  return t;
}

struct Kill {
  int rank = -1, step = -1;
  std::string phase;
};

absl::Status RunJob(int index, const Job& job, uint32_t seed, const Kill& kill) {
  CommOptions options;
  options.timeout = absl::Seconds(60);
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> world, CreateMpiWorld(options));
  const int rank = world->rank();
  ASSIGN_OR_RETURN(ProcessGrid grid, ProcessGrid::Create(std::move(world), job.shape));
  const TrainConfig config = MakeConfig(job, seed);
  // The model pads its vocabulary to a multiple of tp, as the trainer's does.
  const Gpt2Config gc = Gpt2ConfigFromTrainConfig(config);
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildGpt2(gc));
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(config.engine(), &grid, std::move(model)));
  int64_t start = 0;
  if (!job.from.empty()) {
    ASSIGN_OR_RETURN(LoadedCheckpoint loaded, LoadCheckpoint(*engine, job.from));
    if (loaded.data.sequences_consumed != loaded.step * kGlobalBatch || loaded.data.shuffle_seed != seed) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint '", loaded.dir, "' has data position ",
                                                        loaded.data.sequences_consumed, " (seed ",
                                                        loaded.data.shuffle_seed, ") at step ", loaded.step));
    }
    start = loaded.step;
    if (rank == 0) {
      std::printf("job %d resumed from step %lld (saved at dp %d tp %d pp %d)\n", index,
                  static_cast<long long>(start), loaded.saved_dp, loaded.saved_tp, loaded.saved_pp);
    }
  }
  for (int64_t s = start; s < job.steps; ++s) {
    const std::vector<int32_t> tokens =
        RandomTokens(seed + static_cast<uint32_t>(s), kGlobalBatch, gc.seq_len, gc.vocab_size);
    std::vector<HostBatch> batches =
        MicroBatchesForRank(tokens, kGlobalBatch, gc.seq_len, job.shape.dp, kAccumulation, grid.dp_rank());
    ASSIGN_OR_RETURN(StepResult r, engine->TrainStep(Views(batches)));
    uint32_t bits;
    std::memcpy(&bits, &r.loss, 4);
    if (rank == 0) {
      std::printf("job %d loss step=%lld bits=%08x value=%.9g\n", index, static_cast<long long>(s + 1), bits, r.loss);
    }
  }
  SaveOptions save;
  save.fault_hook = [&](absl::string_view phase) {
    if (rank == kill.rank && job.steps == kill.step && phase == kill.phase) {
      std::fflush(stdout);
      raise(SIGKILL);
    }
  };
  RETURN_IF_ERROR(SaveCheckpoint(*engine, job.root, job.steps, Gpt2RunRecord(config),
                                 {int64_t{job.steps} * kGlobalBatch, seed}, save));
  if (rank == 0) std::printf("job %d saved %s/step_%d\n", index, job.root.c_str(), job.steps);
  std::fflush(stdout);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  uint32_t seed = 1;
  Kill kill;
  std::vector<Job> jobs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seed" && i + 1 < argc) {
      if (!absl::SimpleAtoi(argv[++i], &seed)) return 2;
    } else if (arg == "--kill" && i + 1 < argc) {
      const std::vector<std::string> k = absl::StrSplit(argv[++i], ':');
      if (k.size() != 3 || !absl::SimpleAtoi(k[0], &kill.rank) || !absl::SimpleAtoi(k[1], &kill.step)) return 2;
      kill.phase = k[2];
    } else {
      absl::StatusOr<Job> job = ParseJob(arg);
      if (!job.ok()) {
        std::fprintf(stderr, "%s\n", std::string(job.status().message()).c_str());
        return 2;
      }
      jobs.push_back(*job);
    }
  }
  if (absl::Status s = EnsureMpiInitialized(); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (size_t j = 0; j < jobs.size(); ++j) {
    absl::Status s = RunJob(static_cast<int>(j), jobs[j], seed, kill);
    if (!s.ok()) {
      std::fprintf(stderr, "[rank %d] error: %s: %s\n", rank, absl::StatusCodeToString(s.code()).c_str(),
                   std::string(s.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  const int rc = zeroshard::Main(argc, argv);
  zeroshard::FinalizeMpi();
  return rc;
}
