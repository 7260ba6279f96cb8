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
// Schedules (m micro-batches, stage s of pp, v chunks per stage):
//   GPIPE             every forward, then every backward, both in
//                     micro-batch order (so each gradient sums its
//                     micro-batches in the order every schedule does). Any
//                     m >= 1, v = 1. Peak
//                     in flight: m.
//   ONE_F_ONE_B       stage s runs w = min(pp − s − 1, m) warm-up forwards,
//                     then alternates one forward and one backward, then
//                     drains the backwards. At most w + 1 <= pp − s
//                     micro-batches in flight. Any m >= 1, v = 1.
//   INTERLEAVED_1F1B  Megatron's virtual pipeline
//                     (forward_backward_pipelining_with_interleaving):
//                     the stage's k-th forward runs chunk
//                     ((k / pp) % v)·pp + s on micro-batch
//                     (k / (pp·v))·pp + k % pp, its k-th backward chunk
//                     (v − 1 − (k / pp) % v)·pp + s on the same micro-batch
//                     formula; min((pp − s − 1)·2 + (v − 1)·pp, m·v)
//                     warm-up forwards, then 1F1B over (chunk, mb), then the
//                     remaining backwards. v > 1, m a multiple of pp.
//   ZERO_BUBBLE_H1    1F1B with the backward split into B (input gradient)
//                     and W (weight gradient), the zero-bubble paper's
//                     ZB-H1: the same pp − s − 1 warm-up forwards, then F B
//                     pairs where stage s runs the W of micro-batch i right
//                     after the B of micro-batch i + s (the last stage
//                     defers its W's the most: pp − 1 slots); the W's still
//                     deferred at the end fill the cooldown's bubbles. Every
//                     stage holds at most pp micro-batches, 1F1B's peak
//                     (stage 0's). v = 1, m >= pp.
// Bubble with equal unit costs (T_F = T_B = T_W per unit, equal chunks),
// exactly, per stage and overall: (p − 1)/(m + p − 1) for GPIPE and
// ONE_F_ONE_B, (p − 1)/(v·m + p − 1) interleaved; ZB-H1 idles
// (p − 1)(T_F + T_B − T_W) per stage (m >= p), a third of 1F1B's
// (p − 1)(T_F + T_B + T_W) when the three are equal: a bubble of
// (p − 1)/(3m + p − 1).
#ifndef ZEROSHARD_ENGINE_PIPELINE_SCHEDULE_H_
#define ZEROSHARD_ENGINE_PIPELINE_SCHEDULE_H_

#include <cstdint>
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
  bool operator==(const ChunkOp& o) const { return kind == o.kind && chunk == o.chunk && micro_batch == o.micro_batch; }
};

// kInvalidArgument with the config field's name for a shape the schedule
// does not accept (m is engine.gradient_accumulation_steps), e.g.
//   engine.parallel.pp: 0 is out of range; expected >= 1
//   engine.parallel.virtual_stages: 2 needs engine.parallel.pipeline_schedule INTERLEAVED_1F1B (is ONE_F_ONE_B)
//   engine.parallel.pipeline_schedule: INTERLEAVED_1F1B needs engine.parallel.virtual_stages > 1 (is 1)
//   engine.parallel.pipeline_schedule: INTERLEAVED_1F1B needs engine.gradient_accumulation_steps (6) to be a
//     multiple of engine.parallel.pp (4)
//   engine.parallel.pipeline_schedule: ZERO_BUBBLE_H1 needs engine.gradient_accumulation_steps (2) >=
//     engine.parallel.pp (4)
// pp = 1 is a valid degenerate pipeline (one stage, no bubble).
absl::Status ValidatePipelineShape(PipelineScheduleKind kind, const PipelineShape& shape);

// Per stage (index = stage), its operations in the order it runs them:
// every (chunk of the stage, micro-batch) exactly once per kind the
// schedule uses (F and BW; F, B and W for ZERO_BUBBLE_H1).
// ValidatePipelineShape's errors.
absl::StatusOr<std::vector<std::vector<ChunkOp>>> BuildPipelineSchedule(PipelineScheduleKind kind,
                                                                        const PipelineShape& shape);

// Cost of one operation of each chunk (index = chunk), in any time unit.
struct ChunkCosts {
  std::vector<double> forward;
  std::vector<double> backward_input;   // B
  std::vector<double> backward_weight;  // W; a fused backward costs B + W
  // Per chunk boundary c (between chunks c and c + 1, pp·v − 1 entries, or
  // empty for none): the time chunk c's output takes to reach chunk c + 1's
  // stage and its gradient to come back (TransferSeconds of their bytes).
  // Only a boundary between two stages pays it.
  std::vector<double> transfer;
  // Equal costs: every unit costs 1 for each of F, B and W, so a chunk of n
  // units costs n.
  static ChunkCosts PerUnit(const std::vector<int>& units_per_chunk);
};

// A pipeline transfer of `bytes` priced as latency + bytes / bandwidth
// (bytes per second; <= 0: free).
double TransferSeconds(int64_t bytes, double latency, double bytes_per_second);

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
  // Per stage: most (chunk, micro-batch) pairs whose forward ran and whose
  // backward (W, when split) had not finished, at any time — the stage's
  // peak of kept activations in chunks (micro-batches when v = 1).
  std::vector<int> peak_in_flight;
};

// Runs the schedule with as-soon-as-possible timing: each stage runs its
// list in order, an operation starting when the stage is free and its
// dependencies (above) have ended, plus the boundary's transfer time when
// the dependency is on another stage.
// kFailedPrecondition naming the stuck stages, their next operations and
// what each waits for when the lists deadlock, e.g.
//   deadlock: stage 0 waits at BW chunk 0 mb 0 for BW chunk 1 mb 0 (stage 1); stage 1 waits at ...
// kInvalidArgument when `schedule` does not have shape.stages lists, the
// costs do not have shape.chunks() entries (negative costs too), the
// transfers neither none nor shape.chunks() − 1 (or one negative), an
// operation is out of range, missing, repeated or on the wrong stage, or
// fused (BW) and split (B, W) backwards are mixed.
absl::StatusOr<ScheduleTimeline> SimulatePipelineSchedule(const std::vector<std::vector<ChunkOp>>& schedule,
                                                          const PipelineShape& shape, const ChunkCosts& costs);

// One line per stage, one character per `unit` of time (an operation spans
// the characters from round(start / unit) to round(end / unit)): the
// operation's kind (F, B, W; a fused backward as B), then its micro-batch
// number when it fits, then the kind in lower case for the rest; '.' for
// idle, e.g. GPipe at pp 2, m 4 with F = 1, BW = 2 and unit 0.5:
//   stage 0 |F0F1F2F3......B3bbB2bbB1bbB0bb|
//   stage 1 |..F0F1F2F3B3bbB2bbB1bbB0bb....|
// Stage numbers are right-aligned to the widest. unit <= 0 counts as 1.
std::string DrawTimeline(const ScheduleTimeline& timeline, double unit = 1.0);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PIPELINE_SCHEDULE_H_
