#include "core/local_ranks.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

constexpr const char* kLauncherVars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_STEP_TASKS_PER_NODE",
                                         "SLURM_NODEID", "SLURM_NTASKS_PER_NODE"};

class LocalRanksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* var : kLauncherVars) unsetenv(var);
  }
  void TearDown() override { SetUp(); }
};

TEST(SlurmTasksOnNodeTest, ReadsTheCompressedList) {
  EXPECT_EQ(SlurmTasksOnNode("4", 0), 4);
  EXPECT_EQ(SlurmTasksOnNode("2(x3),1", 0), 2);
  EXPECT_EQ(SlurmTasksOnNode("2(x3),1", 2), 2);
  EXPECT_EQ(SlurmTasksOnNode("2(x3),1", 3), 1);
  EXPECT_EQ(SlurmTasksOnNode("3,5(x2)", 2), 5);
}

TEST(SlurmTasksOnNodeTest, RefusesMalformedListsAndNodesOutsideThem) {
  EXPECT_EQ(SlurmTasksOnNode("2(x3),1", 4), std::nullopt);
  EXPECT_EQ(SlurmTasksOnNode("2(x3),1", -1), std::nullopt);
  EXPECT_EQ(SlurmTasksOnNode("", 0), std::nullopt);
  EXPECT_EQ(SlurmTasksOnNode("2(x3", 0), std::nullopt);
  EXPECT_EQ(SlurmTasksOnNode("0", 0), std::nullopt);
  EXPECT_EQ(SlurmTasksOnNode("two", 0), std::nullopt);
}

TEST_F(LocalRanksTest, NoLauncherSaysNothing) { EXPECT_EQ(LocalRanksFromEnvironment(), std::nullopt); }

TEST_F(LocalRanksTest, MpirunsLocalSizeWinsOverSlurm) {
  setenv("SLURM_STEP_TASKS_PER_NODE", "4", 1);
  setenv("SLURM_NODEID", "0", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  EXPECT_EQ(LocalRanksFromEnvironment(), 2);
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  setenv("MPI_LOCALNRANKS", "3", 1);
  EXPECT_EQ(LocalRanksFromEnvironment(), 3);
}

TEST_F(LocalRanksTest, SrunTaskReadsItsNodesEntry) {
  setenv("SLURM_STEP_TASKS_PER_NODE", "3(x2),1", 1);
  setenv("SLURM_NODEID", "2", 1);
  setenv("SLURM_NTASKS_PER_NODE", "8", 1);
  EXPECT_EQ(LocalRanksFromEnvironment(), 1);
  setenv("SLURM_NODEID", "1", 1);
  EXPECT_EQ(LocalRanksFromEnvironment(), 3);
}

TEST_F(LocalRanksTest, FallsBackToNtasksPerNode) {
  setenv("SLURM_NTASKS_PER_NODE", "4(x2)", 1);
  EXPECT_EQ(LocalRanksFromEnvironment(), 4);
  setenv("SLURM_NTASKS_PER_NODE", "junk", 1);
  EXPECT_EQ(LocalRanksFromEnvironment(), std::nullopt);
}

}  // namespace
}  // namespace zeroshard
