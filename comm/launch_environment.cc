#include "comm/launch_environment.h"

#include <cstdlib>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

const char* Lookup(const EnvironmentLookup& lookup, const char* name) {
  return lookup ? lookup(name) : std::getenv(name);
}

// The integer in [lo, hi] that `name` holds; kInvalidArgument naming it,
// its value and `expected` otherwise.
absl::StatusOr<int> ReadInt(const EnvironmentLookup& lookup, const char* name, int lo, int hi,
                            absl::string_view expected) {
  const char* value = Lookup(lookup, name);
  int n = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &n) || n < lo || n > hi) {
    return absl::InvalidArgumentError(absl::StrCat("srun task environment: ", name, "=",
                                                   value == nullptr ? "(unset)" : absl::StrCat("'", value, "'"),
                                                   ", expected ", expected));
  }
  return n;
}

}  // namespace

absl::StatusOr<LaunchEnvironment> ReadLaunchEnvironment(const EnvironmentLookup& lookup) {
  LaunchEnvironment launch;
  if (Lookup(lookup, "OMPI_COMM_WORLD_SIZE") != nullptr) {
    launch.launcher = Launcher::kMpirun;
    return launch;
  }
  // A batch script or an salloc shell has SLURM_JOB_ID but no step.
  const char* step = Lookup(lookup, "SLURM_STEP_ID");
  if (step == nullptr) return launch;
  launch.launcher = Launcher::kSrun;
  launch.step_id = step;
  const char* job = Lookup(lookup, "SLURM_JOB_ID");
  launch.job_id = job == nullptr ? "" : job;
  ASSIGN_OR_RETURN(launch.tasks, ReadInt(lookup, "SLURM_STEP_NUM_TASKS", 1, std::numeric_limits<int>::max(),
                                         "the step's task count (>= 1)"));
  ASSIGN_OR_RETURN(launch.task, ReadInt(lookup, "SLURM_PROCID", 0, launch.tasks - 1,
                                        absl::StrCat("this task's id in 0..", launch.tasks - 1,
                                                     " (SLURM_STEP_NUM_TASKS=", launch.tasks, ")")));
  const char* node = Lookup(lookup, "SLURMD_NODENAME");
  if (node == nullptr || *node == '\0') {
    return absl::InvalidArgumentError(absl::StrCat("srun task environment: SLURMD_NODENAME=",
                                                   node == nullptr ? "(unset)" : "''",
                                                   ", expected the name of the node slurmd runs this task on"));
  }
  launch.node = node;
  return launch;
}

absl::Status CheckWorldMatchesLauncher(const LaunchEnvironment& launch, int world_rank, int world_size) {
  if (launch.launcher != Launcher::kSrun || world_size == launch.tasks) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      DescribeLauncher(launch), " is MPI rank ", world_rank, " of a world of ", world_size,
      ": srun's MPI plugin did not join the step's ", launch.tasks,
      " tasks into one MPI job; launch with srun --mpi=pmix (or MpiDefault=pmix in slurm.conf)"));
}

std::string DescribeLauncher(const LaunchEnvironment& launch) {
  switch (launch.launcher) {
    case Launcher::kNone:
      return "none";
    case Launcher::kMpirun:
      return "mpirun";
    case Launcher::kSrun:
      return absl::StrCat("srun task ", launch.task, " of ", launch.tasks, " (job ", launch.job_id, " step ",
                          launch.step_id, ", node ", launch.node, ")");
  }
  return "none";
}

}  // namespace zeroshard
