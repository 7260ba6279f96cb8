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
//   * pipeline transfers: a RECV_* only posts the receive; the compute
//     action it feeds — FORWARD(unit, mb) for RECV_ACT(mb, unit),
//     BACKWARD or BACKWARD_INPUT(unit, mb) for RECV_GRAD(mb, unit) —
//     waits for the matching SEND_* (same pair of stages, micro-batch, kind
//     and chunk boundary: SEND_ACT of u feeds RECV_ACT of u+1, SEND_GRAD of
//     u feeds RECV_GRAD of u-1), sent in any order; a SEND_* never waits. A
//     rank's stage is its position in its "pp" group, and peer_stage
//     indexes that group. A FORWARD whose unit below is another rank's must
//     have a RECV_ACT posted, a backward whose unit above is another rank's
//     a RECV_GRAD; one RECV per (kind, micro-batch, unit) at a time;
//   * per rank, in program order: a unit's parameters are gathered and
//     waited (stage 3 programs) before it computes; each (micro-batch,
//     unit) runs FORWARD once and BACKWARD once (or BACKWARD_INPUT and
//     BACKWARD_WEIGHT once each), its forward after the forward of the unit
//     below it and its backward after its forward and after the backward
//     of the unit above it in the same micro-batch (when this rank computes
//     that unit); a RECOMPUTE falls between them; GATHER only of a released
//     unit, WAIT_GATHER only of one in flight, RELEASE only of one that is
//     not released; REDUCE of a bucket follows a backward of every unit in
//     StepProgram::bucket_writers since its previous REDUCE, no backward of
//     them follows its last REDUCE, and it is waited before the optimizer
//     phase; per bucket NORM_PARTIAL, then (after REDUCE_NORM, which
//     follows every NORM_PARTIAL) UPDATE, then PUBLISH, each once;
//     TIED_PUBLISH after REDUCE_NORM;
//     SCALER_UPDATE after every PUBLISH; BEGIN_STEP only first;
//   * the NVMe tier's streaming, per rank, with the program taken as cyclic
//     (run twice: the last stores of a step drain into the next): a slot
//     is LOADed only once its previous chunk is STOREd (a LOAD while that
//     store is in flight is queued behind it; the store completes at the
//     loaded chunk's WAIT_LOAD or its own WAIT_STORE, and an UPDATE into the
//     slot before then is refused); WAIT_LOAD waits a LOAD in flight;
//     UPDATE(chunk) follows WAIT_LOAD(chunk), STORE(chunk) its UPDATE;
//     WAIT_STORE waits a STORE
//     in flight (or, on the first step, none); every chunk is loaded,
//     updated and stored once a step, and a bucket with chunks counts as
//     updated (for its PUBLISH) after its last chunk's UPDATE; with the
//     gradient shards streamed (StepProgram::streams_grads) a chunk reads
//     its piece at its LOAD when that is in the optimizer phase, else at its
//     WAIT_LOAD, and that read must be in the phase (every reduction
//     stored) and after its unit's TIED_REDUCE, if any;
//   * the parameter shards' I/O (param_slot set; cyclic too): a param slot
//     is LOADed only when its previous use is finished (no LOAD in flight,
//     the GATHER that read it waited, its STORE waited); a GATHER follows
//     WAIT_LOAD of its unit into a slot still holding it; a STORE writes a
//     slot holding its unit; no LOAD of a unit between the update that
//     rounds into it and its STORE (the next step's loads see the stored
//     shard); each stored unit is stored once a step;
//   * no rank is left waiting when nothing can move (a deadlock names every
//     stuck rank, the action it waits at and what for; a consumer of a
//     transfer also says at which action the sender would issue the SEND,
//     or that it never does);
//   * at the end no REDUCE is unwaited, no unit gathered, no activation
//     kept, no SEND unconsumed, no RECV unconsumed, and every unit the
//     program forwards at all is forwarded for every micro-batch.
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
  // Units this rank computes (a pipeline stage's own units, not its
  // mirrors); empty: every unit.
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
// a "pp" group or whose unit crosses no boundary (SEND_ACT of the last
// unit, RECV_ACT of the first, ...).
absl::StatusOr<Simulation> SimulatePrograms(const std::vector<SimulatedRank>& ranks);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PROGRAM_SIMULATOR_H_
