#include "cli/schedule.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/data_parallel_program.h"
#include "engine/program_simulator.h"
#include "engine/step_program.h"
#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

// Stage 3, one micro-batch, prefetch 1: units a (100 gather bytes) and b
// (60), one bucket of both (80 reduce bytes) closing at a's backward, and a
// 20-byte norm all-reduce. By hand:
//   GATHER a, GATHER b, WAIT_GATHER a, FORWARD a, RELEASE a,
//   WAIT_GATHER b, FORWARD b, RELEASE b,
//   GATHER b, GATHER a, WAIT_GATHER b, BACKWARD b, RELEASE b,
//   WAIT_GATHER a, BACKWARD a, RELEASE a, REDUCE a..b, WAIT_REDUCE a..b,
//   OPTIMIZER
// so 4 gathers of 100 + 60 + 60 + 100 bytes per rank, both units gathered
// at once at the start (peak 2) and both forwards kept until the backwards.
StepProgram TwoUnitProgram() {
  std::vector<ProgramUnit> units(2);
  units[0].name = "a";
  units[0].needs = {0};
  units[0].gather_bytes = 100;
  units[1].name = "b";
  units[1].needs = {1};
  units[1].gather_bytes = 60;
  std::vector<ProgramBucket> buckets = {{{0, 1}, 80, "a..b"}};
  DataParallelProgramOptions options;
  options.stage = 3;
  options.micro_batches = 1;
  options.prefetch = 1;
  options.optimizer_collectives = {{"dp", CommOp::kAllReduce, 20, "norm, loss, overflow"}};
  absl::StatusOr<StepProgram> program = BuildDataParallelProgram(units, buckets, options);
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? *program : StepProgram();
}

Simulation Simulate(const StepProgram& program, int dp) {
  std::vector<int> members;
  for (int r = 0; r < dp; ++r) members.push_back(r);
  std::vector<SimulatedRank> ranks(dp);
  for (SimulatedRank& r : ranks) {
    r.program = program;
    r.groups = {{"dp", members}};
    r.gathers_params = true;
  }
  absl::StatusOr<Simulation> sim = SimulatePrograms(ranks);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return sim.ok() ? *sim : Simulation();
}

TEST(FormatScheduleSummaryTest, CountsCollectivesAndPrintsPredictions) {
  const StepProgram program = TwoUnitProgram();
  ASSERT_EQ(program.actions.size(), 19u) << FormatProgram(program);
  // Two ranks: an AllGather sends (n-1) x its input, a ReduceScatter (n-1)
  // x its output, an AllReduce 2(n-1)/n x its buffer.
  EXPECT_EQ(FormatScheduleSummary(program, 2, 1, Simulate(program, 2)),
            "actions by kind:\n"
            "  FORWARD                     2\n"
            "  BACKWARD                    2\n"
            "  GATHER                      4\n"
            "  WAIT_GATHER                 4\n"
            "  RELEASE                     4\n"
            "  REDUCE                      1\n"
            "  WAIT_REDUCE                 1\n"
            "  OPTIMIZER                   1\n"
            "  total                      19\n"
            "collectives per step (calls, bytes this rank sends):\n"
            "  dp AllGather                4 calls          320 bytes\n"
            "  dp ReduceScatter            1 call            80 bytes\n"
            "  dp AllReduce                1 call            20 bytes\n"
            "  control AllGather           1 call  (the batch-signature agreement starting every step; not in the "
            "program)\n"
            "prediction for rank 1 (every dp rank's program simulated, 2 ranks):\n"
            "  peak gathered units         2\n"
            "  peak kept activations       2\n"
            "  verdict: OK\n");
}

TEST(FormatScheduleSummaryTest, FailedSimulationPrintsItsErrorAndNoPredictions) {
  const StepProgram program = TwoUnitProgram();
  const absl::StatusOr<Simulation> failed =
      absl::FailedPreconditionError("deadlock: rank 0 waits at WAIT_GATHER unit=a");
  EXPECT_EQ(FormatScheduleSummary(program, 4, 0, failed),
            "actions by kind:\n"
            "  FORWARD                     2\n"
            "  BACKWARD                    2\n"
            "  GATHER                      4\n"
            "  WAIT_GATHER                 4\n"
            "  RELEASE                     4\n"
            "  REDUCE                      1\n"
            "  WAIT_REDUCE                 1\n"
            "  OPTIMIZER                   1\n"
            "  total                      19\n"
            "collectives per step (calls, bytes this rank sends):\n"
            "  dp AllGather                4 calls          960 bytes\n"
            "  dp ReduceScatter            1 call           240 bytes\n"
            "  dp AllReduce                1 call            30 bytes\n"
            "  control AllGather           1 call  (the batch-signature agreement starting every step; not in the "
            "program)\n"
            "prediction for rank 0 (every dp rank's program simulated, 4 ranks):\n"
            "  verdict: FAILED_PRECONDITION: deadlock: rank 0 waits at WAIT_GATHER unit=a\n");
}

TEST(FormatScheduleSummaryTest, OneRankMovesNothing) {
  const StepProgram program = TwoUnitProgram();
  const std::string summary = FormatScheduleSummary(program, 1, 0, Simulate(program, 1));
  EXPECT_NE(summary.find("  dp AllGather                4 calls            0 bytes\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("  dp AllReduce                1 call             0 bytes\n"), std::string::npos) << summary;
}

}  // namespace
}  // namespace zeroshard::cli
