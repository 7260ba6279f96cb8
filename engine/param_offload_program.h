// Placement of the parameter shards' I/O in a step program
// (engine.offload.params: NVME, ZeRO stage 3; docs/offload_streaming.md).
//
// A "use" of a unit's shard is what needs it in a param slot:
//   * each GATHER(u): from the GATHER to its WAIT_GATHER (or a RELEASE that
//     waits it), when the gather's input is consumed;
//   * in the optimizer phase, each unit the phase rounds into: from its
//     first UPDATE (UPDATE(bucket), or its first streamed UPDATE(chunk)) to
//     its last rounding (the bucket's PUBLISH, or its last UPDATE(chunk)),
//     then STORE(u) writes the update back; a tied unit's use runs on to
//     its TIED_PUBLISH (the owner sends the shard, the mirror receives it).
// Uses take param slots greedily in program order, each the slot free the
// longest, so every LOAD goes as far ahead as the slots allow: right after
// the slot's previous use (after WAIT_STORE where that use stored), or,
// for a slot's first use in the step, right after BEGIN_STEP (the program's
// start), after WAIT_STORE of the slot's last use of the previous step (the
// program is cyclic: the phase's last stores drain into the next step).
// WAIT_LOAD goes just before the use's first action. The pool has
// max(min_slots, the most uses live at once) slots.
#ifndef ZEROSHARD_ENGINE_PARAM_OFFLOAD_PROGRAM_H_
#define ZEROSHARD_ENGINE_PARAM_OFFLOAD_PROGRAM_H_

#include <vector>

#include "engine/step_program.h"

namespace zeroshard {

struct ParamShardIoInput {
  // By unit: its parameter shard lives on the NVMe tier (a held unit with a
  // non-empty shard).
  std::vector<bool> streams;
  // By bucket of the program: the units the optimizer phase updates (empty
  // for an evaluation program).
  std::vector<std::vector<int>> buckets;
  int min_slots = 1;
};

// Inserts the LOAD / WAIT_LOAD / STORE / WAIT_STORE actions of the shards
// (param_slot set, chunk -1) and sets program->param_slots. Nothing when no
// unit streams.
void AddParamShardIo(const ParamShardIoInput& in, StepProgram* program);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PARAM_OFFLOAD_PROGRAM_H_
