// The step program's prologue and optimizer phase (engine/step_program.h):
// BEGIN_STEP before a training program's first action, and after its last
//   TIED_REDUCE(u)      for each tied unit with a gradient shard, unit order
//   NORM_PARTIAL(b)     for each bucket, bucket order
//   REDUCE_NORM
//   UPDATE(b), PUBLISH(b)  for each bucket in forward order (the last
//                          bucket, holding the first units, first)
//   TIED_PUBLISH(u)     for each tied unit with a gradient shard, unit order
//   SCALER_UPDATE
// Every collective of the phase is listed on the action that issues it:
// TIED_REDUCE's "embed" all-reduce of the f32 shard, REDUCE_NORM's
// all-reduce of the sums (over "world" when pipeline stages or hybrid
// sharding make dp less than the job, else "dp"), UPDATE's "dp" all-gather
// of the f32 reduced shards where the ZeRO policy all-gathers them (stage
// 0), PUBLISH's "dp" all-gather of the compute parameters where it
// publishes by all-gather (stages 1-2), TIED_PUBLISH's "embed" broadcast
// of the owner's updated compute parameters (its shard; stage 0: the whole
// buffer) into the mirror's, and on the mirror at stages 1-2 the "dp"
// all-gather that completes them. Units with an empty shard issue nothing.
// TIED_PUBLISH follows every PUBLISH, in unit order on both ends, so the
// two ends meet its broadcasts in the same order whatever their buckets.
//
// Streaming (OptimizerPhaseInput::stream, docs/offload_streaming.md): each
// unit's optimizer region, in update order (buckets in forward order, a
// bucket's units in order), is cut into chunks of chunk_elements (the last
// one shorter), chunk c staged in slot c % slots (StepProgram::chunks).
// Then:
//   * the loads of the first `slots` chunks run under forward and
//     backward: data parallelism puts LOAD(i) right after the step's i-th
//     compute action (FORWARD, BACKWARD, RECOMPUTE; spread evenly when
//     there are more loads), a pipeline stage after its first backward
//     action. No WAIT_STORE precedes them: a LOAD into a slot whose store
//     (the previous step's, drained into this one: the program is cyclic)
//     is in flight is queued behind it, and WAIT_LOAD waits both;
//   * in the phase, for each chunk of a bucket: WAIT_LOAD(c), UPDATE(b,
//     chunk c) (stage 0's all-gather of the unit's gradients on its first
//     chunk), STORE(c), then LOAD(c + slots) when there is such a chunk
//     (queued behind STORE(c); the last `slots` stores complete in the
//     next step); after the bucket's last chunk PUBLISH(b) (its all-gather
//     only: the chunks rounded their masters). A bucket without chunks keeps
//     UPDATE(b) and PUBLISH(b).
#ifndef ZEROSHARD_ENGINE_OPTIMIZER_PROGRAM_H_
#define ZEROSHARD_ENGINE_OPTIMIZER_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/step_program.h"
#include "offload/async_io.h"
#include "sharding/zero_policy.h"

namespace zeroshard {

struct OptimizerPhaseUnit {
  std::string name;
  int64_t shard_numel = 0;  // this rank's shard of the unit's flat buffer
  bool tied = false;        // held on both ends of the embedding group
  // Streaming: the unit's optimizer region (its master's elements: the
  // padded buffer at stage 0, the shard otherwise); 0 for a unit without one.
  int64_t region_numel = 0;
  int64_t padded_numel = 0;  // the whole flat buffer
  bool mirror = false;       // the tied end that does not own it (no region)
};

// The NVMe tier's streaming; off unless `slots` > 0.
struct OptimizerStreamInput {
  int slots = 0;               // engine.offload.buffer_count
  int64_t chunk_elements = 0;  // a multiple of 1024 (StreamChunkElements)
  bool pipeline = false;       // where the first loads go
  // The f32 gradient shard streams too (engine.offload.grads: NVME): each
  // chunk's piece is read in the phase (StepProgram::streams_grads).
  bool grads = false;
};

// A chunk's length is a multiple of this: kIoAlignment bytes of an f32
// buffer, so every piece of a slot and of the files stays O_DIRECT-aligned.
inline constexpr int64_t kStreamGranuleElements = kIoAlignment / 4;

// The least engine.offload.buffer_bytes that streams: one granule of every
// streamed buffer (`bytes_per_element` summed over them). The validator
// and the step plan both refuse below it.
int64_t MinStreamBufferBytes(int64_t bytes_per_element);

// The elements of one chunk: the largest multiple of kStreamGranuleElements
// whose `bytes_per_element` fit in `buffer_bytes`; 0 below
// MinStreamBufferBytes.
int64_t StreamChunkElements(int64_t buffer_bytes, int64_t bytes_per_element);

struct OptimizerPhaseInput {
  std::vector<OptimizerPhaseUnit> units;  // by unit index
  // The buckets of the program (its bucket indices), each the units it
  // updates: units this rank holds that train.
  std::vector<std::vector<int>> buckets;
  ZeroPolicy zero;
  int64_t compute_dtype_bytes = 4;
  std::string norm_group = "dp";  // "world" when dp is not the whole job
  int metrics = 0;                // the last unit's metrics (two sums each)
  OptimizerStreamInput stream;
};

// The bytes REDUCE_NORM all-reduces: [sum of squares, loss sum, loss weight,
// non-finite flag, failed allocations, (metric sum, metric weight)...] f32.
int64_t ReduceNormBytes(int metrics);

// Inserts BEGIN_STEP first and appends the optimizer phase.
void AddStepPrologueAndOptimizerPhase(const OptimizerPhaseInput& in, StepProgram* program);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_OPTIMIZER_PROGRAM_H_
