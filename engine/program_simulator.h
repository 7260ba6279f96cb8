// Dry run of every rank's step program before anything runs
// (docs/architecture.md, "The step program").
//
// The simulator walks all programs together, one rank at a time as far as
// it can go, the way the executors would run them:
//   * a collective completes once every member of its group has reached it;
//     a group's collectives must appear in the same order, with the same op
//     and bytes, on every member. GATHER, REDUCE and SEND_* issue theirs
//     without waiting (WAIT_GATHER, a RELEASE of a unit in flight and
//     WAIT_REDUCE wait for them); any other action waits for each of its
//     own in turn. Send/Recv ops are left to the next rule;
//   * a RECV_* waits for the matching SEND_* (same pair of stages, the same
//     micro-batch and kind), in any order. A rank's stage is its position in
//     its "pp" group, and peer_stage indexes that group;
//   * per rank, in program order: a unit's parameters are gathered and
//     waited (stage 3 programs) before it computes; each (micro-batch,
//     unit) runs FORWARD once and BACKWARD once (or BACKWARD_INPUT and
//     BACKWARD_WEIGHT once each), its forward after the forward of the unit
//     below it and its backward after its forward and after the backward
//     of the unit above it in the same micro-batch (when this rank computes
//     that unit); a RECOMPUTE falls between them; GATHER only of a released
//     unit, WAIT_GATHER only of one in flight, RELEASE only of one that is
//     not released; REDUCE of a bucket follows a backward of every unit in
//     StepProgram::bucket_writers since its previous REDUCE, and is waited
//     before OPTIMIZER;
//   * no rank is left waiting when nothing can move (a deadlock names the
//     ranks and the actions they wait at);
//   * at the end no REDUCE is unwaited, no unit gathered, no activation
//     kept and no SEND unreceived.
// The gather rule checks the computing unit's own parameters (not those it
// borrows), and only for units the program GATHERs somewhere: a unit never
// gathered has no parameters.
// From the walk come per-rank predictions the engine also measures: the
// most units gathered or in flight at once, the most (micro-batch, unit)
// activations kept at once (saved for backward or kept as a checkpointed
// input; FORWARD of a unit with no backward anywhere in the program, as in
// an evaluation, keeps nothing), and the collectives per group
// (CountCollectives with the sizes of the rank's groups).
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
  // Whether compute actions must be preceded by gathers (ZeRO-3 programs).
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
// rule for the first violation met in the walk; kFailedPrecondition naming
// every stuck rank and what it waits for on a deadlock. kInvalidArgument
// for malformed input: groups that members list differently, an index out
// of range, a collective on a group the rank is not in, a transfer without
// a "pp" group.
absl::StatusOr<Simulation> SimulatePrograms(const std::vector<SimulatedRank>& ranks);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PROGRAM_SIMULATOR_H_
