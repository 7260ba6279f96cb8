#include "cli/run.h"

#include <iostream>

#include "cli/supervisor.h"
#include "cli/supervisor_args.h"

namespace zeroshard::cli {
namespace {

constexpr char kUsage[] =
    "usage: zeroshard run --np N [--hostfile F] [--max-restarts R] [--min-np M] -- TRAINER ARGS...\n"
    "\n"
    "Runs TRAINER under mpirun (srun when SLURM_JOB_ID is set) on N ranks and\n"
    "restarts it after a rank failure, a watchdog abort or a preemption (exit\n"
    "75) from the newest checkpoint under the config's engine.checkpoint.dir\n"
    "that verifies, adding --resume (the supervisor owns it). With --hostfile,\n"
    "the file is read again before each restart; fewer slots than N restart at\n"
    "the largest dp of at least M ranks (default N), with gradient accumulation\n"
    "raised to keep the global batch. Stops after R restarts (default 3) with\n"
    "the last cause. Exits 0 when the trainer does, 1 when it gives up, 2 on\n"
    "bad usage. docs/resilience_supervisor.md.\n";

int Run(int argc, char** argv) {
  absl::StatusOr<SupervisorArgs> args = ParseSupervisorArgs(argc, argv);
  if (!args.ok()) {
    std::cerr << "zeroshard run: " << args.status().message() << "\n" << kUsage;
    return 2;
  }
  absl::Status done = Supervise(*args, std::cerr);
  if (!done.ok()) {
    std::cerr << "zeroshard run: " << done.message() << "\n";
    return absl::IsAborted(done) ? 1 : 2;
  }
  return 0;
}

}  // namespace

const Subcommand kRun = {"run", "run a trainer under mpirun, restarting it from checkpoints", kUsage, &Run};

}  // namespace zeroshard::cli
