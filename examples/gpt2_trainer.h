// The GPT-2 training job behind examples/train_gpt2: config, MPI world,
// process grid, engine, data, the step loop, evaluation and metrics.
// Every rank runs RunGpt2Training; rank 0 prints progress.
#ifndef ZEROSHARD_EXAMPLES_GPT2_TRAINER_H_
#define ZEROSHARD_EXAMPLES_GPT2_TRAINER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zeroshard {

struct TrainerFlags {
  std::string config_path;
  std::vector<std::string> overrides;  // --set PATH=VALUE, in order
  bool eval_only = false;              // print the validation loss and exit
  bool resume = false;                 // continue from engine.checkpoint.dir's latest checkpoint
  std::string init_from;               // weights from a checkpoint dir or a .safetensors file
  int64_t steps = -1;                  // total optimizer steps; -1: the config's
  // Testing only: world rank slow_rank spends slow_rank_ms more in each
  // step's first action (counted as compute; -1: none).
  int slow_rank = -1;
  double slow_rank_ms = 0;
  // Testing only: world rank fail_async_write_rank's asynchronous write of
  // step fail_async_write_step fails (-1: none).
  int fail_async_write_rank = -1;
  int64_t fail_async_write_step = -1;
};

// Collective over MPI_COMM_WORLD. Errors that every rank sees alike (a bad
// config, a missing token file) come back on every rank; progress and the
// final summary go to `out` on rank 0.
// How a training job that returned OK ended.
struct TrainerOutcome {
  // A preemption signal stopped the job before its last step, after its
  // checkpoint committed (exit kExitPreempted, examples/preemption.h).
  bool preempted = false;
};

absl::Status RunGpt2Training(const TrainerFlags& flags, std::ostream& out, TrainerOutcome* outcome = nullptr);

}  // namespace zeroshard

#endif  // ZEROSHARD_EXAMPLES_GPT2_TRAINER_H_
