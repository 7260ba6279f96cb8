// Pipeline schedules (docs/parallelism.md): per pipeline stage, the order of
// its chunks' forward and backward operations over the step's
// micro-batches, and a timed dry run of them.
//
// The model's units are cut into pp · v chunks of consecutive units; chunk c
// runs on stage c % pp (round-robin: with v > 1 virtual stages each stage
// owns v chunks, Megatron's interleaving). Chunk c's forward of a
// micro-batch needs chunk c − 1's forward of it; its backward needs chunk
// c + 1's backward and its own forward; a split backward's weight part
// (W) needs its input part (B).
//
// Schedules:
//   GPIPE             every forward (micro-batch order), then every
//                     backward (reverse order). Any m >= 1, v = 1.
//   ONE_F_ONE_B       stage s runs min(pp − s − 1, m) warm-up forwards, then
//                     alternates one forward and one backward, then drains
//                     the backwards. At most pp − s micro-batches in flight.
//                     Any m >= 1, v = 1.
//   INTERLEAVED_1F1B  Megatron's virtual pipeline: chunks of each stage in
//                     groups of pp micro-batches, 1F1B over (chunk, mb).
//                     v > 1, m a multiple of pp.
//   ZERO_BUBBLE_H1    1F1B with the backward split into B (input gradient)
//                     and W (weight gradient); W is deferred into the
//                     bubbles, keeping 1F1B's peak activations (the
//                     zero-bubble paper's ZB-H1). v = 1, m >= pp.
// Bubble with equal unit costs (T_F = T_B = T_W per unit, equal chunks):
// (p − 1)/(m + p − 1) for GPIPE and ONE_F_ONE_B, (p − 1)/(v·m + p − 1)
// interleaved; ZB-H1's idle time per stage is (p − 1)(T_F + T_B − T_W), a
// third of 1F1B's (p − 1)(T_F + T_B + T_W) when the three are equal.
#ifndef ZEROSHARD_ENGINE_PIPELINE_SCHEDULE_H_
#define ZEROSHARD_ENGINE_PIPELINE_SCHEDULE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zeroshard {

enum class PipelineScheduleKind { kGpipe, kOneFOneB, kInterleaved1F1B, kZeroBubbleH1 };
// "GPIPE", "ONE_F_ONE_B", "INTERLEAVED_1F1B", "ZERO_BUBBLE_H1" (the config's names).
const char* PipelineScheduleName(PipelineScheduleKind kind);

struct PipelineShape {
  int stages = 1;          // pp
  int virtual_stages = 1;  // v: chunks per stage
  int micro_batches = 1;   // m
  int chunks() const { return stages * virtual_stages; }
};

// kForward: F; kBackward: B and W together (schedules without a split);
// kBackwardInput: B; kBackwardWeight: W.
enum class ChunkOpKind { kForward, kBackward, kBackwardInput, kBackwardWeight };
const char* ChunkOpKindName(ChunkOpKind kind);  // "F", "BW", "B", "W"

struct ChunkOp {
  ChunkOpKind kind = ChunkOpKind::kForward;
  int chunk = 0;
  int micro_batch = 0;
  bool operator==(const ChunkOp& o) const {
    return kind == o.kind && chunk == o.chunk && micro_batch == o.micro_batch;
  }
};

// kInvalidArgument with the config field's name for a shape the schedule
// does not accept, e.g. "engine.parallel.pipeline_schedule: INTERLEAVED_1F1B
// needs engine.gradient_accumulation_steps (6) to be a multiple of
// engine.parallel.pp (4)".
absl::Status ValidatePipelineShape(PipelineScheduleKind kind, const PipelineShape& shape);

// Per stage (index = stage), its operations in the order it runs them:
// every (chunk of the stage, micro-batch) exactly once per kind the
// schedule uses.
absl::StatusOr<std::vector<std::vector<ChunkOp>>> BuildPipelineSchedule(PipelineScheduleKind kind,
                                                                        const PipelineShape& shape);

// Cost of one operation of each chunk (index = chunk), in any time unit.
struct ChunkCosts {
  std::vector<double> forward;
  std::vector<double> backward_input;   // B
  std::vector<double> backward_weight;  // W; a fused backward costs B + W
  // Equal costs: every unit costs 1 for each of F, B and W, so a chunk of n
  // units costs n.
  static ChunkCosts PerUnit(const std::vector<int>& units_per_chunk);
};

struct TimedOp {
  ChunkOp op;
  double start = 0;
  double end = 0;
};

struct ScheduleTimeline {
  std::vector<std::vector<TimedOp>> stages;  // per stage, in run order
  double makespan = 0;                       // end of the last operation
  std::vector<double> busy;                  // per stage: sum of op durations
  // Per stage: (makespan − busy) / makespan; overall: over all stages.
  std::vector<double> bubble;
  double overall_bubble = 0;
  // Per stage: most micro-batches whose forward ran and whose backward (W,
  // when split) had not finished, at any time.
  std::vector<int> peak_in_flight;
};

// Runs the schedule with as-soon-as-possible timing: each stage runs its
// list in order, an operation starting when the stage is free and its
// dependencies (above) have ended; transfers take no time.
// kFailedPrecondition naming the stuck stages and their next operations
// when the lists deadlock; kInvalidArgument when an operation is missing,
// repeated or on the wrong stage.
absl::StatusOr<ScheduleTimeline> SimulatePipelineSchedule(const std::vector<std::vector<ChunkOp>>& schedule,
                                                          const PipelineShape& shape, const ChunkCosts& costs);

// One line per stage, one character per `unit` of time: the operation's
// kind (F, B, W; a fused backward as B) followed by its micro-batch digit
// where it fits, '.' for idle, e.g.
//   stage 0 |F0F1F2F3....B3B2B1B0|
std::string DrawTimeline(const ScheduleTimeline& timeline, double unit = 1.0);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PIPELINE_SCHEDULE_H_
