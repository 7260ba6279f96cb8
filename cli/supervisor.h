// `zeroshard run`: keeps a training job going through rank failures,
// watchdog aborts and preemptions (docs/resilience_supervisor.md). Each
// attempt is one mpirun (srun under SLURM) in its own process group; a
// failed attempt's group is killed and the job restarts from the newest
// checkpoint that verifies, at the largest layout the hosts still hold.
#ifndef ZEROSHARD_CLI_SUPERVISOR_H_
#define ZEROSHARD_CLI_SUPERVISOR_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/supervisor_args.h"

namespace zeroshard::cli {

// The trainer's exit code for "preempted, resumable".
inline constexpr int kPreemptedExitCode = 75;

// A data-parallel layout for `available` ranks: the largest dp' dividing
// the config's dp with dp' * tp * pp <= available, gradient accumulation
// scaled by dp / dp' so the global batch stays. kFailedPrecondition naming
// both when dp' * tp * pp falls below min_np.
struct Layout {
  int dp = 1;
  int accumulation = 1;
  int world = 1;
};
absl::StatusOr<Layout> LayoutForRanks(int dp, int tp, int pp, int accumulation, int available, int min_np);

// What mpirun's output says about an attempt: the first failure it names
// ("rank 1 exit code 2", "rank 1 signal 9 (Killed)", "rank 0 watchdog abort:
// MESSAGE", "rank 2 MPI_Abort error code 3"; empty when none), followed by
// "(... step N was not saved)" when a failed checkpoint save ended it, and
// the last training step the trainer's progress lines reached (-1: none).
struct AttemptReport {
  std::string cause;
  int64_t last_step = -1;
};
AttemptReport ScanTrainerOutput(const std::string& output);

// The cause of a failed attempt: the output's, else its exit status's
// ("exit code 75 (preempted)", "signal 9").
std::string FailureCause(const AttemptReport& report, int exit_code, int signal);

// The launcher's argv for one attempt: mpirun (srun when SLURM_JOB_ID is
// set) with -np, --hostfile, --allow-run-as-root as root, --oversubscribe
// when np exceeds `cores`; then the trainer.
std::vector<std::string> LaunchCommand(const SupervisorArgs& args, int np, int cores, bool root, bool slurm,
                                       const std::vector<std::string>& trainer);

// Removes the `.tmp_step_*` directories under root (checkpoint/checkpoint_root.h:
// a save that its attempt's end cut short) and returns their names. Between
// attempts only, when no rank writes: a leftover would hold its space until
// the next commit, which on a nearly full disk then fails every attempt.
absl::StatusOr<std::vector<std::string>> RemoveAbandonedSaves(const std::string& root);

// Runs the job to its end: OK when an attempt exits 0; kAborted naming the
// last cause after max_restarts restarts; restarts are logged to `log`,
// one line each.
absl::Status Supervise(const SupervisorArgs& args, std::ostream& log);

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_SUPERVISOR_H_
