// Dry run of every rank's step program before anything runs
// (docs/architecture.md, "The step program").
//
// The simulator walks all programs together, one rank at a time as far as
// it can go, the way the executors would run them:
//   * a collective completes once every member of its group has reached it;
//     a group's collectives must appear in the same order, with the same op
//     and bytes, on every member;
//   * a RECV_* waits for the matching SEND_* (same pair of stages, the same
//     micro-batch and kind);
//   * per rank, in program order: a unit's parameters are gathered and
//     waited (stage 3 programs) before it computes; each (micro-batch,
//     unit) runs FORWARD once and BACKWARD once (or BACKWARD_INPUT and
//     BACKWARD_WEIGHT once each), its backward after its forward and after
//     the backward of the unit above it in the same micro-batch; a
//     RECOMPUTE falls between them; REDUCE of a bucket follows the backward
//     of every unit in it, and is waited before OPTIMIZER;
//   * no rank is left waiting when nothing can move (a deadlock names the
//     ranks and the actions they wait at).
// From the walk come per-rank predictions the engine also measures: the
// most units gathered or in flight at once, the most (micro-batch, unit)
// activations kept at once (saved for backward or kept as a checkpointed
// input), and the collectives per group.
#ifndef ZEROSHARD_ENGINE_PROGRAM_SIMULATOR_H_
#define ZEROSHARD_ENGINE_PROGRAM_SIMULATOR_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/step_program.h"

namespace zeroshard {

// Which ranks share each group: for every rank, its group name -> the list
// of world ranks in that group (group-rank order), e.g. "dp" -> {0, 1, 2}.
struct SimulatedRank {
  StepProgram program;
  std::map<std::string, std::vector<int>> groups;
  // Whether FORWARD must be preceded by gathers (ZeRO-3 programs).
  bool gathers_params = false;
  // Units this rank computes (a pipeline stage's units); empty: every unit.
  std::vector<int> units;
};

struct RankPrediction {
  int peak_gathered_units = 0;     // gathered or in flight at once
  int peak_kept_activations = 0;   // (micro-batch, unit) entries saved or kept at once
  int actions = 0;
  std::map<ActionKind, int> actions_by_kind;
  CollectivesByGroup collectives;
};

struct Simulation {
  std::vector<RankPrediction> ranks;  // by world rank
};

// kFailedPrecondition naming the rank, the action (FormatAction) and the
// rule for the first violation; kFailedPrecondition naming every stuck
// rank and what it waits for on a deadlock.
absl::StatusOr<Simulation> SimulatePrograms(const std::vector<SimulatedRank>& ranks);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PROGRAM_SIMULATOR_H_
