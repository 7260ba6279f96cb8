// The data-parallel step program, compiled by engine/program_compiler.h:
// ZeRO stages 0-3 with prefetch,
// persistence, reshard_after_forward, gradient buckets, ACCUMULATE / DEFER
// accumulation and activation checkpointing, as a list of actions
// (engine/step_program.h). A pure function of its inputs: the engine builds
// it at Create, `zeroshard schedule` prints it, tests compare it.
//
// Training program, for micro-batches m = 0..k-1:
//   forward, units u = 0..L-1:
//     stage 3: GATHER every unit u needs that is neither gathered nor in
//              flight, then the same for the next `prefetch` units' needs;
//              WAIT_GATHER each of u's needs still in flight;
//     FORWARD(u, m);
//     stage 3 with reshard_after_forward: RELEASE each need of u whose last
//              forward use this was (not persistent units);
//   backward, units u = L-1..0 (units with `backward` false are skipped):
//     stage 3: gathers as in forward, prefetching u-1..u-prefetch (never
//              a skipped unit);
//     RECOMPUTE(u, m) when u is checkpointed; BACKWARD(u, m);
//     stage 3: RELEASE each need of u whose last backward use (among the
//              units that run backward) this was (not persistent units);
//     when this micro-batch reduces (ACCUMULATE: every one; DEFER: the
//     last) and the policy does not reduce after the backward (stage 1):
//     REDUCE(b) for each bucket b that closes
//     at u, then WAIT_REDUCE of the bucket launched before it (one bucket
//     stays in flight while the next units compute);
//   end of the micro-batch's backward, when it reduces: stage 1 REDUCEs
//     every bucket (in bucket order), other stages the buckets that close
//     nowhere (no unit runs backward); then WAIT_REDUCE of everything still
//     in flight, in launch order.
// A GATHER is emitted only for a released unit, a WAIT_GATHER only for one
// in flight, a RELEASE for any not released (UnitShard's no-op rules), and
// never any for a unit with gather_bytes 0.
// Then RELEASE of every unit still gathered (unit order); the step plan
// appends BEGIN_STEP before and the optimizer phase after
// (engine/optimizer_program.h).
//
// A bucket closes at the backward of the lowest-index unit that touches any
// of its units' parameters: its own lowest unit, or an earlier unit that
// borrows one of them. So a gradient a borrower adds always lands before
// the reduction. Only units that run backward count; a bucket none of them
// touches closes at the lowest unit that runs backward (the pass's last).
//
// Evaluation program (training false): the forward of one micro-batch
// (m = 0) with the same gathers and releases, then RELEASE of everything
// still gathered; no backward, reductions or optimizer. Its
// micro_batches is 1.
#ifndef ZEROSHARD_ENGINE_DATA_PARALLEL_PROGRAM_H_
#define ZEROSHARD_ENGINE_DATA_PARALLEL_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/program_compiler.h"
#include "engine/step_program.h"
#include "sharding/zero_policy.h"

namespace zeroshard {

struct DataParallelProgramOptions {
  ZeroPolicy zero;
  int micro_batches = 1;
  bool reduce_every_micro_batch = true;  // ACCUMULATE; false: DEFER
  int prefetch = 1;
  bool reshard_after_forward = true;
  bool training = true;
};

// The pp = 1 case of engine/program_compiler.h: one chunk of every unit,
// operations F(m), BW(m) per micro-batch. kInvalidArgument naming the value
// for: micro_batches < 1, prefetch < 0, a need outside [0, L), a negative
// gather_bytes or reduce_bytes, a bucket unit outside [0, L) or in two
// buckets, a unit with `backward` false after one with `backward` true.
// A unit in no bucket is never reduced. Fills StepProgram::bucket_writers.
absl::StatusOr<StepProgram> BuildDataParallelProgram(const std::vector<ProgramUnit>& units,
                                                     const std::vector<ProgramBucket>& buckets,
                                                     const DataParallelProgramOptions& options);

// The unit at whose backward each bucket closes (see above), by bucket;
// -1 when no unit runs backward.
std::vector<int> BucketCloseUnits(const std::vector<ProgramUnit>& units, const std::vector<ProgramBucket>& buckets);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_DATA_PARALLEL_PROGRAM_H_
