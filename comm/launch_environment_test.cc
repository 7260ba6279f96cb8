#include "comm/launch_environment.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// A faked process environment.
EnvironmentLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// What slurmstepd exports to task 2 of a 4-task step (srun -n 4).
std::map<std::string, std::string> SrunTask() {
  return {{"SLURM_JOB_ID", "12"},         {"SLURM_STEP_ID", "0"},       {"SLURM_PROCID", "2"},
          {"SLURM_STEP_NUM_TASKS", "4"},  {"SLURM_NTASKS", "4"},        {"SLURMD_NODENAME", "n1"},
          {"SLURM_LOCALID", "2"},         {"SLURM_STEP_NUM_NODES", "1"}};
}

TEST(LaunchEnvironmentTest, SrunTaskReadsSlurmsIdsAndNode) {
  auto launch = ReadLaunchEnvironment(FakeEnv(SrunTask()));
  ASSERT_TRUE(launch.ok()) << launch.status();
  EXPECT_EQ(launch->launcher, Launcher::kSrun);
  EXPECT_EQ(launch->task, 2);
  EXPECT_EQ(launch->tasks, 4);
  EXPECT_EQ(launch->node, "n1");
  EXPECT_EQ(launch->job_id, "12");
  EXPECT_EQ(launch->step_id, "0");
  EXPECT_EQ(DescribeLauncher(*launch), "srun task 2 of 4 (job 12 step 0, node n1)");
}

TEST(LaunchEnvironmentTest, MpirunWinsOverInheritedSlurmVariables) {
  // mpirun in an allocation starts orted with srun: its ranks inherit the
  // daemons' step (one task per node), which is not the MPI job.
  auto vars = SrunTask();
  vars["SLURM_STEP_NUM_TASKS"] = "2";
  vars["SLURM_PROCID"] = "1";
  vars["OMPI_COMM_WORLD_SIZE"] = "16";
  auto launch = ReadLaunchEnvironment(FakeEnv(vars));
  ASSERT_TRUE(launch.ok()) << launch.status();
  EXPECT_EQ(launch->launcher, Launcher::kMpirun);
  EXPECT_EQ(DescribeLauncher(*launch), "mpirun");
  EXPECT_TRUE(CheckWorldMatchesLauncher(*launch, 5, 16).ok());
}

TEST(LaunchEnvironmentTest, AllocationWithoutStepIsNotSrun) {
  // An salloc shell or a batch script: a job, no step (sbatch sets SLURM_PROCID=0).
  auto launch = ReadLaunchEnvironment(FakeEnv({{"SLURM_JOB_ID", "12"}, {"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}}));
  ASSERT_TRUE(launch.ok()) << launch.status();
  EXPECT_EQ(launch->launcher, Launcher::kNone);
  EXPECT_TRUE(CheckWorldMatchesLauncher(*launch, 0, 1).ok());
  auto empty = ReadLaunchEnvironment(FakeEnv({}));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(DescribeLauncher(*empty), "none");
}

TEST(LaunchEnvironmentTest, WorldMustBeTheStep) {
  auto launch = ReadLaunchEnvironment(FakeEnv(SrunTask()));
  ASSERT_TRUE(launch.ok()) << launch.status();
  EXPECT_TRUE(CheckWorldMatchesLauncher(*launch, 2, 4).ok());
  // srun --mpi=none under an MPI that starts singletons: four worlds of one.
  const absl::Status st = CheckWorldMatchesLauncher(*launch, 0, 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "srun task 2 of 4 (job 12 step 0, node n1) is MPI rank 0 of a world of 1: srun's MPI plugin did not "
            "join the step's 4 tasks into one MPI job; launch with srun --mpi=pmix (or MpiDefault=pmix in "
            "slurm.conf)");
}

TEST(LaunchEnvironmentTest, MalformedSrunVariablesAreNamed) {
  struct Case {
    const char* name;
    const char* value;  // nullptr: unset
    const char* want;
  };
  const Case cases[] = {
      {"SLURM_STEP_NUM_TASKS", nullptr,
       "srun task environment: SLURM_STEP_NUM_TASKS=(unset), expected the step's task count (>= 1)"},
      {"SLURM_STEP_NUM_TASKS", "0",
       "srun task environment: SLURM_STEP_NUM_TASKS='0', expected the step's task count (>= 1)"},
      {"SLURM_STEP_NUM_TASKS", "4(x2)",
       "srun task environment: SLURM_STEP_NUM_TASKS='4(x2)', expected the step's task count (>= 1)"},
      {"SLURM_PROCID", "4",
       "srun task environment: SLURM_PROCID='4', expected this task's id in 0..3 (SLURM_STEP_NUM_TASKS=4)"},
      {"SLURM_PROCID", "-1",
       "srun task environment: SLURM_PROCID='-1', expected this task's id in 0..3 (SLURM_STEP_NUM_TASKS=4)"},
      {"SLURM_PROCID", nullptr,
       "srun task environment: SLURM_PROCID=(unset), expected this task's id in 0..3 (SLURM_STEP_NUM_TASKS=4)"},
      {"SLURMD_NODENAME", "",
       "srun task environment: SLURMD_NODENAME='', expected the name of the node slurmd runs this task on"},
      {"SLURMD_NODENAME", nullptr,
       "srun task environment: SLURMD_NODENAME=(unset), expected the name of the node slurmd runs this task on"},
  };
  for (const Case& c : cases) {
    auto vars = SrunTask();
    if (c.value == nullptr) {
      vars.erase(c.name);
    } else {
      vars[c.name] = c.value;
    }
    auto launch = ReadLaunchEnvironment(FakeEnv(vars));
    ASSERT_FALSE(launch.ok()) << c.name << "=" << (c.value ? c.value : "(unset)");
    EXPECT_EQ(launch.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(launch.status().message(), c.want);
  }
}

TEST(LaunchEnvironmentTest, DefaultLookupReadsTheProcessEnvironment) {
  // The test binary runs under neither launcher's step unless set here.
  setenv("SLURM_STEP_ID", "3", 1);
  setenv("SLURM_JOB_ID", "77", 1);
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_STEP_NUM_TASKS", "1", 1);
  setenv("SLURMD_NODENAME", "node-x", 1);
  unsetenv("OMPI_COMM_WORLD_SIZE");
  auto launch = ReadLaunchEnvironment();
  for (const char* v : {"SLURM_STEP_ID", "SLURM_JOB_ID", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURMD_NODENAME"}) {
    unsetenv(v);
  }
  ASSERT_TRUE(launch.ok()) << launch.status();
  EXPECT_EQ(DescribeLauncher(*launch), "srun task 0 of 1 (job 77 step 3, node node-x)");
}

}  // namespace
}  // namespace zeroshard
