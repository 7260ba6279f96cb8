// The pipeline step program of one rank (docs/parallelism.md): its stage's
// chunk operations (engine/pipeline_schedule.h) compiled by
// engine/program_compiler.h into the unit actions of engine/step_program.h,
// with the transfers between stages and, per unit, the ZeRO rules of the
// data-parallel program (engine/data_parallel_program.h). A pure function of its input: the
// engine builds it at Create, `zeroshard schedule` prints and simulates it,
// tests compare it.
//
// Units and chunks. Unit indices are the model's (program.num_units is the
// model's unit count and names every unit). Chunk c owns units
// [chunk_begin[c], chunk_begin[c+1]) and runs on stage c % pp. A rank
// computes the units of its stage's chunks ("own" units) and holds a
// *mirror* of every unit of another stage that one of its units needs (its
// parameters are borrowed: GPT-2's head on the last stage reads wte from
// the embed unit on the first, so the last stage keeps a copy of the embed
// unit's flat buffer, gathers it under ZeRO-3 like its own, and
// accumulates the head's wte gradient into it). The buckets given are this
// rank's: its own units and mirrors that have gradients.
//
// Training program: for each operation of the stage's schedule, in order
// (b, e: the chunk's first and one-past-last unit; "the previous chunk"
// c − 1 and "the next" c + 1 are transfers only when on another stage):
//   F(c, mb):  units u = b..e−1: gathers (below); FORWARD(u, mb) — the first
//              one consumes the RECV_ACT(mb, unit b, peer = stage of c − 1)
//              posted earlier; right after FORWARD(e−1, mb),
//              SEND_ACT(mb, unit e−1, peer = stage of c + 1);
//   BW(c, mb) / B(c, mb): units u = e−1 down to b, skipping units with
//              `backward` false: gathers; RECOMPUTE(u, mb) when u is
//              checkpointed; BACKWARD(u, mb) (BW) or BACKWARD_INPUT(u, mb)
//              (B) — the first consumes the RECV_GRAD(mb, unit e−1, peer =
//              stage of c + 1) posted earlier; right after the backward of
//              b, SEND_GRAD(mb, unit b, peer = stage of c − 1) when unit b − 1
//              runs backward (its input gradient is needed);
//   W(c, mb):  units u = e−1 down to b (with backward): gathers;
//              BACKWARD_WEIGHT(u, mb).
// A B(c, mb) directly followed by W(c, mb) whose chunk sends no gradient
// (b = 0, or unit b − 1 without backward) is compiled as BW(c, mb): the
// split would defer nothing (ZB-H1's first stage).
// "Issued early, waited late": the RECV_* an operation consumes is posted
// right before the first compute action of the stage's previous operation
// (at the start of the program for the first), so the transfer overlaps
// that operation; an operation without compute actions posts it at its end.
//
// Gradients are reduced once per step, after their last micro-batch's
// backward: a bucket closes at the backward (BACKWARD, or BACKWARD_WEIGHT
// when split) of the writer — an own unit that runs backward and is in the
// bucket or needs one of its units — whose last such backward comes last
// in the stage's order; within one chunk that is the lowest such unit
// (BucketCloseUnits' rule, restricted to this rank's units), in the
// stage's last weight-carrying operation of that chunk. Right after it:
// REDUCE(bucket), then WAIT_REDUCE of the bucket launched before it (one
// bucket stays in flight while the next units compute). Every ZeRO stage
// (0-3) reduces this way. Buckets no own unit writes are REDUCEd after the
// last operation; then WAIT_REDUCE of everything still in flight (launch
// order) and RELEASE of every unit still gathered (unit order); the step
// plan appends BEGIN_STEP before and the optimizer phase after
// (engine/optimizer_program.h).
//
// ZeRO-3 gathers (stages 0-2 gather nothing). A GATHER is emitted only for
// a released unit, a WAIT_GATHER only for one in flight, a RELEASE for any
// not released, never any for a unit with gather_bytes 0:
//   keep_gathered_across_micro_batches (default): each unit a compute
//     action needs is gathered once per step. Before a compute action of
//     unit u: GATHER each of u's needs, then the `prefetch` units that
//     follow u's needs in the stage's order of first uses; WAIT_GATHER each
//     of u's needs in flight. Nothing is released before the end.
//   otherwise, per operation as the data-parallel builder does per pass:
//     before unit u, GATHER its needs and those of the next `prefetch`
//     units of the operation (forward: u+1..; backward: u−1.., units with
//     backward only), WAIT_GATHER u's needs in flight; after a FORWARD with
//     reshard_after_forward, RELEASE each need whose last use in the
//     chunk's forward this was; after a backward (BW, B or W), each need
//     whose last use in the chunk's backward this was. Persistent units are
//     never released before the end.
//
// Evaluation program (training false): F(c, 0) for the stage's chunks in
// chunk order, with their transfers and gathers, then RELEASE of
// everything still gathered; no backward, reductions or optimizer. Its
// micro_batches is 1.
//
// Transfers issue IssuedCollective{"pp", kSend / kRecv, 0, what}: bytes 0
// (activation shapes are unknown at build time), `what` naming the tensor
// by the unit whose output it is and the micro-batch: "act h.3 mb 2" for
// h.3's output, "grad h.3 mb 2" for its gradient — the same text on the
// sending and the receiving side.
#ifndef ZEROSHARD_ENGINE_PIPELINE_PROGRAM_H_
#define ZEROSHARD_ENGINE_PIPELINE_PROGRAM_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/data_parallel_program.h"
#include "engine/program_compiler.h"
#include "engine/pipeline_schedule.h"
#include "engine/step_program.h"

namespace zeroshard {

struct PipelineProgramInput {
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;
  PipelineShape shape;  // pp, v, m (m: engine.gradient_accumulation_steps)
  int stage = 0;        // this rank's, in [0, pp)
  // pp·v + 1 unit indices: 0, increasing, the model's unit count last.
  std::vector<int> chunk_begin;
  // Every unit of the model, by model index (needs name model indices).
  std::vector<ProgramUnit> units;
  // This rank's buckets: units of its own chunks and mirrors only.
  std::vector<ProgramBucket> buckets;
  ZeroPolicy zero;
  int prefetch = 1;
  bool keep_gathered_across_micro_batches = true;
  bool reshard_after_forward = true;  // keep_gathered_across_micro_batches false only
  bool training = true;
};

// kInvalidArgument naming the value for: a shape ValidatePipelineShape
// rejects (its message), a stage outside [0, pp), chunk_begin without
// pp·v + 1 entries or not running 0 < ... < units.size() (every chunk owns
// a unit), prefetch < 0, a need outside
// [0, units.size()), a negative gather_bytes or reduce_bytes, a unit with
// `backward` false after one with `backward` true, a bucket unit that is
// neither the rank's own nor a mirror, or in two buckets. Fills
// StepProgram::bucket_writers with the own units that write each bucket.
absl::StatusOr<StepProgram> BuildPipelineProgram(const PipelineProgramInput& in);

// The units a rank of `in.stage` holds. Precondition: `in` passes
// BuildPipelineProgram's checks of chunk_begin and needs.
using PipelineStageUnits = StageUnitSet;
PipelineStageUnits StageUnits(const PipelineProgramInput& in);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PIPELINE_PROGRAM_H_
