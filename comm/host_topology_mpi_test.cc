// DetectHostTopology under a faked srun environment: hosts are named by
// Slurm's node name, and a world that is not the step is refused on every
// rank together.
#include <mpi.h>

#include "comm/host_topology.h"
#include "absl/strings/match.h"
#include "comm/status_agreement.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

LaunchEnvironment SrunStep(int tasks) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  LaunchEnvironment launch;
  launch.launcher = Launcher::kSrun;
  launch.task = rank % tasks;
  launch.tasks = tasks;
  launch.node = "slurm-node-7";
  launch.job_id = "12";
  launch.step_id = "0";
  return launch;
}

TEST(HostTopologyMpiTest, SrunHostIsSlurmsNodeName) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto topology = DetectHostTopology(SrunStep(size));
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->Describe(), "hosts 1 x " + std::to_string(size) + " ranks");
  EXPECT_EQ(topology->host_names, std::vector<std::string>{"slurm-node-7"});
  EXPECT_EQ(DetectedHostName(size - 1), "slurm-node-7");
}

TEST(HostTopologyMpiTest, MpirunHostIsTheProcessorName) {
  LaunchEnvironment mpirun;
  mpirun.launcher = Launcher::kMpirun;
  auto topology = DetectHostTopology(mpirun);
  ASSERT_TRUE(topology.ok()) << topology.status();
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  EXPECT_EQ(topology->host_names, std::vector<std::string>{std::string(name, len)});
}

TEST(HostTopologyMpiTest, WorldThatIsNotTheStepIsRefused) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto topology = DetectHostTopology(SrunStep(size + 2));
  ASSERT_FALSE(topology.ok());
  EXPECT_EQ(topology.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(topology.status().message(),
            "srun task " + std::to_string(rank) + " of " + std::to_string(size + 2) +
                " (job 12 step 0, node slurm-node-7) is MPI rank " + std::to_string(rank) + " of a world of " +
                std::to_string(size) + ": srun's MPI plugin did not join the step's " + std::to_string(size + 2) +
                " tasks into one MPI job; launch with srun --mpi=pmix (or MpiDefault=pmix in slurm.conf)");
  // Every rank stopped at the same point: the world still works.
  int one = 1, sum = 0;
  ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(sum, size);
}

TEST(HostTopologyMpiTest, OneRanksWrongLauncherStopsEveryRank) {
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size < 2) GTEST_SKIP() << "needs 2 ranks: one with a wrong launcher environment, one without";
  LaunchEnvironment mpirun;
  mpirun.launcher = Launcher::kMpirun;
  // The last rank thinks it is a task of a larger srun step.
  auto topology = DetectHostTopology(rank == size - 1 ? SrunStep(size + 1) : mpirun);
  ASSERT_FALSE(topology.ok());
  EXPECT_EQ(topology.status().code(), absl::StatusCode::kFailedPrecondition);
  if (rank == size - 1) {
    EXPECT_FALSE(IsRelayedError(topology.status()));
    EXPECT_TRUE(absl::StartsWith(topology.status().message(), "srun task ")) << topology.status();
  } else {
    EXPECT_TRUE(IsRelayedError(topology.status()));
    EXPECT_EQ(topology.status().message(), "the launcher's environment is wrong on world rank " +
                                               std::to_string(size - 1) + " (see its error); this rank (" +
                                               std::to_string(rank) + ") was fine");
  }
  int one = 1, sum = 0;
  ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(sum, size);
}

}  // namespace
}  // namespace zeroshard
