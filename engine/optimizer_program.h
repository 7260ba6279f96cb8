// The step program's prologue and optimizer phase (engine/step_program.h):
// BEGIN_STEP before a training program's first action, and after its last
//   TIED_REDUCE(u)      for each tied unit with a gradient shard, unit order
//   NORM_PARTIAL(b)     for each bucket, bucket order
//   REDUCE_NORM
//   UPDATE(b), PUBLISH(b)  for each bucket in forward order (the last
//                          bucket, holding the first units, first)
//   SCALER_UPDATE
// Every collective of the phase is listed on the action that issues it:
// TIED_REDUCE's "embed" all-reduce of the f32 shard, REDUCE_NORM's
// all-reduce of the sums (over "world" when pipeline stages or hybrid
// sharding make dp less than the job, else "dp"), UPDATE's "dp" all-gather
// of the f32 reduced shards where the ZeRO policy all-gathers them (stage
// 0), PUBLISH's "dp" all-gather of the compute parameters where it
// publishes by all-gather (stages 1-2). Units with an empty shard issue
// nothing.
#ifndef ZEROSHARD_ENGINE_OPTIMIZER_PROGRAM_H_
#define ZEROSHARD_ENGINE_OPTIMIZER_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/step_program.h"
#include "sharding/zero_policy.h"

namespace zeroshard {

struct OptimizerPhaseUnit {
  std::string name;
  int64_t shard_numel = 0;  // this rank's shard of the unit's flat buffer
  bool tied = false;        // held on both ends of the embedding group
};

struct OptimizerPhaseInput {
  std::vector<OptimizerPhaseUnit> units;  // by unit index
  // The buckets of the program (its bucket indices), each the units it
  // updates: units this rank holds that train.
  std::vector<std::vector<int>> buckets;
  ZeroPolicy zero;
  int64_t compute_dtype_bytes = 4;
  std::string norm_group = "dp";  // "world" when dp is not the whole job
  int metrics = 0;                // the last unit's metrics (two sums each)
};

// The bytes REDUCE_NORM all-reduces: [sum of squares, loss sum, loss weight,
// non-finite flag, failed allocations, (metric sum, metric weight)...] f32.
int64_t ReduceNormBytes(int metrics);

// Inserts BEGIN_STEP first and appends the optimizer phase.
void AddStepPrologueAndOptimizerPhase(const OptimizerPhaseInput& in, StepProgram* program);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_OPTIMIZER_PROGRAM_H_
