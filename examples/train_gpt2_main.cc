// examples/train_gpt2: trains GPT-2 with zeroshard on every rank of an MPI job.
//
//   mpirun -np 4 bazel-bin/examples/train_gpt2 --config examples/configs/demo_zero3.pbtxt
//
// Flags: --config FILE (required), --set PATH=VALUE (repeatable config
// override), --steps N (total optimizer steps; a resumed run continues to
// N), --resume (from engine.checkpoint.dir's latest), --init_from PATH (a
// checkpoint dir or a .safetensors file), --eval_only. Testing only:
// --testing_slow_rank R:MS makes world rank R compute MS milliseconds more
// per step (the straggler report's test); --testing_fail_async_write R:STEP
// fails world rank R's asynchronous checkpoint write of STEP. Exit codes: 0 done, 1 failed, 2
// bad usage or config, 75 preempted after a checkpoint (resumable;
// docs/resilience.md).
#include <iostream>

#include "absl/strings/numbers.h"
#include "core/args.h"
#include "comm/mpi_env.h"
#include "examples/gpt2_trainer.h"
#include "examples/preemption.h"

namespace {

constexpr char kUsage[] =
    "usage: train_gpt2 --config FILE.pbtxt [--set PATH=VALUE ...] [--steps N] [--resume]\n"
    "                  [--init_from CHECKPOINT_DIR|FILE.safetensors] [--eval_only]\n";

int Main(int argc, char** argv) {
  absl::StatusOr<zeroshard::ParsedArgs> args = zeroshard::ParseArgs(
      argc, argv, 1, {{"config"}, {"set", true, true}, {"steps"}, {"eval_only", false}, {"resume", false},
                      {"init_from"}, {"testing_slow_rank"}, {"testing_fail_async_write"}, {"help", false}});
  if (!args.ok() || !args->positional.empty()) {
    std::cerr << "train_gpt2: " << (args.ok() ? "unexpected argument " + args->positional[0] : std::string(args.status().message()))
              << "\n" << kUsage;
    return 2;
  }
  if (args->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  zeroshard::TrainerFlags flags;
  flags.config_path = args->Get("config");
  if (flags.config_path.empty()) {
    std::cerr << "train_gpt2: --config is required\n" << kUsage;
    return 2;
  }
  flags.overrides = args->GetAll("set");
  flags.eval_only = args->Has("eval_only");
  flags.resume = args->Has("resume");
  flags.init_from = args->Get("init_from");
  absl::StatusOr<long long> steps = args->GetInt("steps", -1);
  if (!steps.ok() || (args->Has("steps") && *steps < 0)) {
    std::cerr << "train_gpt2: --steps: expected a non-negative integer, got '" << args->Get("steps") << "'\n";
    return 2;
  }
  flags.steps = *steps;
  if (args->Has("testing_slow_rank")) {
    const std::string v = args->Get("testing_slow_rank");
    const size_t colon = v.find(':');
    int rank = -1;
    double ms = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(v.substr(0, colon), &rank) ||
        !absl::SimpleAtod(v.substr(colon + 1), &ms) || rank < 0 || !(ms >= 0)) {
      std::cerr << "train_gpt2: --testing_slow_rank: expected RANK:MILLISECONDS, got '" << v << "'\n";
      return 2;
    }
    flags.slow_rank = rank;
    flags.slow_rank_ms = ms;
  }
  if (args->Has("testing_fail_async_write")) {
    const std::string v = args->Get("testing_fail_async_write");
    const size_t colon = v.find(':');
    int rank = -1;
    int64_t step = -1;
    if (colon == std::string::npos || !absl::SimpleAtoi(v.substr(0, colon), &rank) ||
        !absl::SimpleAtoi(v.substr(colon + 1), &step) || rank < 0 || step < 1) {
      std::cerr << "train_gpt2: --testing_fail_async_write: expected RANK:STEP, got '" << v << "'\n";
      return 2;
    }
    flags.fail_async_write_rank = rank;
    flags.fail_async_write_step = step;
  }

  zeroshard::TrainerOutcome outcome;
  absl::Status status = zeroshard::RunGpt2Training(flags, std::cout, &outcome);
  // An error every rank hits is printed once, by the rank it came from,
  // before MPI_Finalize: mpirun kills the job once another rank exits 1.
  if (zeroshard::ShouldReportError(status)) std::cerr << "train_gpt2: " << status.message() << std::endl;
  zeroshard::FinalizeMpi();
  if (!status.ok()) {
    return status.code() == absl::StatusCode::kInvalidArgument || status.code() == absl::StatusCode::kNotFound ? 2 : 1;
  }
  return outcome.preempted ? zeroshard::kExitPreempted : 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
