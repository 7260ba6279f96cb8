// Which launcher started this process, read from its environment: an
// `srun` task (Slurm's task id, task count and node name for the step) or a
// rank of `mpirun`. MPI's world is the engine's world; under srun it must
// be Slurm's step, or each task would train alone as a world of one.
#ifndef ZEROSHARD_COMM_LAUNCH_ENVIRONMENT_H_
#define ZEROSHARD_COMM_LAUNCH_ENVIRONMENT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zeroshard {

enum class Launcher {
  kNone,    // neither: a singleton, or a launcher we do not read
  kMpirun,  // Open MPI's mpirun/orted set OMPI_COMM_WORLD_SIZE before exec
  kSrun,    // a task of a Slurm job step (SLURM_STEP_ID), without mpirun
};

struct LaunchEnvironment {
  Launcher launcher = Launcher::kNone;
  // kSrun only: SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURMD_NODENAME,
  // SLURM_JOB_ID and SLURM_STEP_ID.
  int task = -1;
  int tasks = -1;
  std::string node;
  std::string job_id;
  std::string step_id;
};

// Returns the value of an environment variable, nullptr when unset.
using EnvironmentLookup = std::function<const char*(const char*)>;

// The launcher from `lookup` (the process environment by default). mpirun
// wins over Slurm's variables: mpirun inside an allocation starts its
// daemons with srun, and its ranks inherit that step's SLURM_* variables.
// kInvalidArgument naming the variable, its value and the expected range
// when an srun task's SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURMD_NODENAME
// is missing or malformed.
absl::StatusOr<LaunchEnvironment> ReadLaunchEnvironment(const EnvironmentLookup& lookup = {});

// OK unless srun started the process and MPI's world size is not the
// step's task count (srun's MPI plugin did not join the tasks into one MPI
// job): kFailedPrecondition naming both and the fix. Every rank of such a
// world sees the same sizes, so all of them fail together.
absl::Status CheckWorldMatchesLauncher(const LaunchEnvironment& launch, int world_rank, int world_size);

// "srun task 2 of 4 (job 12 step 0, node n1)", "mpirun" or "none".
std::string DescribeLauncher(const LaunchEnvironment& launch);

}  // namespace zeroshard

#endif  // ZEROSHARD_COMM_LAUNCH_ENVIRONMENT_H_
