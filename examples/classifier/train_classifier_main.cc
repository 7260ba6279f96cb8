// examples/classifier/train_classifier: trains the classifier example on
// every rank of an MPI job.
//
//   mpirun -np 3 bazel-bin/examples/classifier/train_classifier --config examples/configs/classifier_zero3.pbtxt
//
// Flags: --config FILE (required; its header names
// zeroshard.ClassifierTrainConfig), --set PATH=VALUE (repeatable config
// override), --steps N (optimizer steps of this job). Exit status 2 for
// invalid flags or config, 1 for other errors.
#include <iostream>

#include "core/args.h"
#include "comm/mpi_env.h"
#include "examples/classifier/classifier_trainer.h"

namespace {

constexpr char kUsage[] = "usage: train_classifier --config FILE.pbtxt [--set PATH=VALUE ...] [--steps N]\n";

// The flags, or kInvalidArgument saying what is wrong with them.
absl::StatusOr<zeroshard::ClassifierFlags> ParseFlags(int argc, char** argv, bool* help) {
  absl::StatusOr<zeroshard::ParsedArgs> args =
      zeroshard::ParseArgs(argc, argv, 1, {{"config"}, {"set", true, true}, {"steps"}, {"help", false}});
  if (!args.ok()) return args.status();
  if (!args->positional.empty()) return absl::InvalidArgumentError("unexpected argument " + args->positional[0]);
  *help = args->Has("help");
  zeroshard::ClassifierFlags flags;
  flags.config_path = args->Get("config");
  if (flags.config_path.empty() && !*help) return absl::InvalidArgumentError("--config is required");
  flags.overrides = args->GetAll("set");
  absl::StatusOr<long long> steps = args->GetInt("steps", -1);
  if (!steps.ok() || (args->Has("steps") && *steps < 0)) {
    return absl::InvalidArgumentError("--steps: expected a non-negative integer, got '" + args->Get("steps") + "'");
  }
  flags.steps = *steps;
  return flags;
}

int Main(int argc, char** argv) {
  bool help = false;
  absl::StatusOr<zeroshard::ClassifierFlags> flags = ParseFlags(argc, argv, &help);
  if (flags.ok() && help) {
    std::cout << kUsage;
    return 0;
  }
  absl::Status status = flags.status();
  if (status.ok()) {
    status = zeroshard::RunClassifierTraining(*flags, std::cout);
  } else {
    // Every rank has the same bad flags; MPI lets one of them say so.
    zeroshard::EnsureMpiInitialized().IgnoreError();
  }
  // An error every rank hits is printed once, by the rank it came from,
  // before MPI_Finalize: mpirun kills the job once another rank exits 1.
  if (zeroshard::ShouldReportError(status)) {
    std::cerr << "train_classifier: " << status.message() << "\n" << (flags.ok() ? "" : kUsage) << std::flush;
  }
  zeroshard::FinalizeMpi();
  if (!status.ok()) {
    return status.code() == absl::StatusCode::kInvalidArgument || status.code() == absl::StatusCode::kNotFound ? 2 : 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
