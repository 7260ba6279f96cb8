// The one step-program compiler: a stage's chunk operations (forward,
// backward or its input/weight halves, per micro-batch) expanded into the
// unit actions of engine/step_program.h, with pipeline transfers, the
// ZeRO-3 gathers and releases and the gradient reductions placed as the
// ZeRO policy (sharding/zero_policy.h) asks. Data parallelism is its
// pp = 1 case: one chunk holding every unit, operations F(m), BW(m) for
// each micro-batch (engine/data_parallel_program.h); a pipeline stage gives
// its schedule's operations (engine/pipeline_program.h). Both headers
// document the programs this produces; the optimizer phase is appended
// after it (engine/optimizer_program.h).
//
// Reduction rounds. Gradients are reduced once per round: every
// micro-batch is a round when `reduce_every_micro_batch` (data-parallel
// ACCUMULATE), else the whole step is one. In a round a bucket closes at
// the backward (BACKWARD, or BACKWARD_WEIGHT when split) of the writer (a
// unit this rank computes that runs backward and is in the bucket or needs
// one of its units) whose last such backward in the round comes last;
// within one chunk that is the lowest such unit. Right after it:
// REDUCE(bucket), then WAIT_REDUCE of the bucket launched before it in the
// round (one bucket stays in flight while the next units compute). When
// the policy reduces after the backward (data-parallel stage 1), no bucket
// closes early: at the round's end every bucket is REDUCEd in bucket
// order. At the end of a round: REDUCE of the buckets that did not close,
// then WAIT_REDUCE of everything in flight, in launch order.
//
// At the end of the program: RELEASE of every unit still gathered (unit
// order).
#ifndef ZEROSHARD_ENGINE_PROGRAM_COMPILER_H_
#define ZEROSHARD_ENGINE_PROGRAM_COMPILER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/comm_stats.h"
#include "engine/pipeline_schedule.h"
#include "engine/step_program.h"
#include "sharding/zero_policy.h"

namespace zeroshard {

struct ProgramUnit {
  std::string name;
  // Units whose parameters this unit reads (itself first when it has
  // parameters, then the owners of what it borrows), each once.
  std::vector<int> needs;
  // Stage 3: the AllGather's per-rank input bytes (shard numel x compute
  // dtype size); 0 for a unit without parameters (it is never gathered).
  int64_t gather_bytes = 0;
  // One micro-batch of its output activations in bytes (the gradient of
  // that output has as many): what a pipeline transfer across the boundary
  // after this unit carries (SEND_ACT / RECV_ACT, SEND_GRAD / RECV_GRAD).
  // 0: not known (the program then lists the transfer with 0 bytes).
  int64_t output_bytes = 0;
  bool persistent = false;    // stage 3: stays gathered for the whole step
  bool checkpointed = false;  // RECOMPUTE before its BACKWARD
  // false: no BACKWARD (a leading run of units with only frozen
  // parameters: nothing before them needs an input gradient).
  bool backward = true;
};

struct ProgramBucket {
  std::vector<int> units;  // forward order
  // The ReduceScatter's per-rank output bytes (sum of the units' shard
  // numel x reduce dtype size); 0 reduces nothing (no collective). With
  // int8 gradients the op is an AllToAll and this its per-destination part
  // (sharding/quantized_shard.h).
  int64_t reduce_bytes = 0;
  std::string name;  // "h.3" or "h.0..h.3"
  CommOp reduce_op = CommOp::kReduceScatter;
  // Hybrid sharding: the AllReduce of the reduced shard over "dp_replica"
  // (its bytes; 0: none), or with int8 replicas the AllGather of each
  // replica's packed shard (its per-rank input bytes).
  int64_t replica_bytes = 0;
  CommOp replica_op = CommOp::kAllReduce;
};

struct ProgramCompilerInput {
  // Every unit of the model, by model index.
  std::vector<ProgramUnit> units;
  // This rank's buckets: units it computes or mirrors, each in at most one.
  std::vector<ProgramBucket> buckets;
  // Chunk c = units [chunk_begin[c], chunk_begin[c + 1]) runs on stage
  // c % stages; chunks() + 1 entries from 0 to units.size().
  std::vector<int> chunk_begin;
  int stages = 1;
  int stage = 0;  // this rank's, in [0, stages)
  // This stage's operations in execution order; an operation's chunk must
  // be one of this stage's.
  std::vector<ChunkOp> ops;
  ZeroPolicy zero;
  int prefetch = 1;
  // Stage 3: gather each unit once per step and release at the end;
  // otherwise gather and release per operation (reshard_after_forward
  // releasing after the forward too).
  bool keep_gathered_across_micro_batches = false;
  bool reshard_after_forward = true;
  bool reduce_every_micro_batch = false;
  bool training = true;
  int micro_batches = 1;  // StepProgram::micro_batches

  int chunks() const { return static_cast<int>(chunk_begin.size()) - 1; }
};

// kInvalidArgument naming the value for: stage outside [0, stages),
// chunk_begin not running 0 < ... < units.size() with a multiple of
// `stages` chunks, an operation on another stage's chunk, prefetch < 0,
// micro_batches < 1, a need outside [0, units.size()), a negative
// gather_bytes or reduce_bytes, a unit with `backward` false after one with
// `backward` true, a bucket unit that this stage neither computes nor
// mirrors, or in two buckets. Fills StepProgram::bucket_writers.
absl::StatusOr<StepProgram> CompileProgram(const ProgramCompilerInput& in);

// The units a rank of `in.stage` holds. Precondition: chunk_begin and needs
// pass CompileProgram's checks.
struct StageUnitSet {
  std::vector<int> own;      // its chunks' units, ascending
  std::vector<int> mirrors;  // other stages' units its own units need, ascending
};
StageUnitSet HeldUnits(const std::vector<ProgramUnit>& units, const std::vector<int>& chunk_begin, int stages,
                       int stage);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PROGRAM_COMPILER_H_
