// `zeroshard schedule CONFIG [--world-size N] [--rank R] [--simulate] [--costs F,B,W] [--set PATH=VALUE ...]`: the
// training step program one rank runs (engine/step_plan.h, the plan the engine itself executes; for pp > 1
// engine/pipeline_plan.h), what it communicates, and what the simulator predicts over every rank — without running
// anything. --simulate prints each pipeline stage's timeline, bubble and peaks instead (docs/parallelism.md).
#ifndef ZEROSHARD_CLI_SCHEDULE_H_
#define ZEROSHARD_CLI_SCHEDULE_H_

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/subcommand.h"
#include "engine/program_simulator.h"
#include "engine/step_program.h"

namespace zeroshard::cli {

extern const Subcommand kSchedule;

// What `zeroshard schedule` prints after the program, for the program of
// dp rank `rank` in a dp group of `dp` ranks:
//   actions by kind (the kinds present, in ActionKind order, and a total);
//   collectives per (group, op) with CountCollectives(program, {"dp": dp}):
//     calls and the bytes this rank sends, as its CommStats counts them;
//   the control group's batch-signature AllGather, which starts every step
//     outside the program;
//   the simulation's predictions for `rank` and its verdict ("OK", or the
//     simulator's error on one line, then no predictions).
// Precondition: an ok `simulation` has an entry for `rank`.
std::string FormatScheduleSummary(const StepProgram& program, int dp, int rank,
                                  const absl::StatusOr<Simulation>& simulation);
// The same with the collectives counted for `group_sizes` and the
// prediction's line saying "(<simulated>, <N> ranks)" (pipeline programs:
// "every rank's program simulated").
std::string FormatScheduleSummary(const StepProgram& program, const std::map<std::string, int>& group_sizes, int rank,
                                  const std::string& simulated, int simulated_ranks,
                                  const absl::StatusOr<Simulation>& simulation);

// The command itself on `args` (what follows "schedule"), printing to `out`
// and `err`; returns its exit code.
int RunSchedule(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace zeroshard::cli

#endif  // ZEROSHARD_CLI_SCHEDULE_H_
