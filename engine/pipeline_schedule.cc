#include "engine/pipeline_schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard {
namespace {

constexpr char kPp[] = "engine.parallel.pp";
constexpr char kVirtual[] = "engine.parallel.virtual_stages";
constexpr char kSchedule[] = "engine.parallel.pipeline_schedule";
constexpr char kMicroBatches[] = "engine.gradient_accumulation_steps";

std::string OpText(const ChunkOp& op) {
  return absl::StrCat(ChunkOpKindName(op.kind), " chunk ", op.chunk, " mb ", op.micro_batch);
}

ChunkOp Op(ChunkOpKind kind, int chunk, int mb) {
  ChunkOp op;
  op.kind = kind;
  op.chunk = chunk;
  op.micro_batch = mb;
  return op;
}

std::vector<std::vector<ChunkOp>> Gpipe(const PipelineShape& shape) {
  std::vector<std::vector<ChunkOp>> stages(shape.stages);
  for (int s = 0; s < shape.stages; ++s) {
    for (int mb = 0; mb < shape.micro_batches; ++mb) stages[s].push_back(Op(ChunkOpKind::kForward, s, mb));
    // Backwards in micro-batch order, like every other schedule: each
    // gradient then sums its micro-batches in the same order, so every
    // schedule gives bitwise the same weights.
    for (int mb = 0; mb < shape.micro_batches; ++mb) stages[s].push_back(Op(ChunkOpKind::kBackward, s, mb));
  }
  return stages;
}

// 1F1B on one chunk per stage. split: the backward as B then W, stage s
// running the W of micro-batch i after the B of micro-batch i + s (ZB-H1).
std::vector<std::vector<ChunkOp>> OneFOneB(const PipelineShape& shape, bool split) {
  const int p = shape.stages, m = shape.micro_batches;
  std::vector<std::vector<ChunkOp>> stages(p);
  for (int s = 0; s < p; ++s) {
    std::vector<ChunkOp>& ops = stages[s];
    const int warmup = std::min(p - s - 1, m);
    const int delay = s;
    int weights = 0;  // W's emitted
    auto backward = [&](int mb) {
      ops.push_back(Op(split ? ChunkOpKind::kBackwardInput : ChunkOpKind::kBackward, s, mb));
      if (split && mb >= delay) ops.push_back(Op(ChunkOpKind::kBackwardWeight, s, weights++));
    };
    for (int mb = 0; mb < warmup; ++mb) ops.push_back(Op(ChunkOpKind::kForward, s, mb));
    for (int i = 0; i < m - warmup; ++i) {
      ops.push_back(Op(ChunkOpKind::kForward, s, warmup + i));
      backward(i);
    }
    for (int i = m - warmup; i < m; ++i) backward(i);
    while (split && weights < m) ops.push_back(Op(ChunkOpKind::kBackwardWeight, s, weights++));
  }
  return stages;
}

// Megatron-LM's forward_backward_pipelining_with_interleaving, as the order
// of (chunk, micro-batch) operations per stage.
std::vector<std::vector<ChunkOp>> Interleaved(const PipelineShape& shape) {
  const int p = shape.stages, v = shape.virtual_stages, m = shape.micro_batches;
  const int total = m * v;
  std::vector<std::vector<ChunkOp>> stages(p);
  for (int s = 0; s < p; ++s) {
    std::vector<ChunkOp>& ops = stages[s];
    auto mb_of = [&](int k) { return (k / (p * v)) * p + k % p; };
    auto forward = [&](int k) { return Op(ChunkOpKind::kForward, ((k / p) % v) * p + s, mb_of(k)); };
    auto backward = [&](int k) { return Op(ChunkOpKind::kBackward, (v - 1 - (k / p) % v) * p + s, mb_of(k)); };
    const int warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total);
    for (int k = 0; k < warmup; ++k) ops.push_back(forward(k));
    for (int k = 0; k < total - warmup; ++k) {
      ops.push_back(forward(k + warmup));
      ops.push_back(backward(k));
    }
    for (int k = total - warmup; k < total; ++k) ops.push_back(backward(k));
  }
  return stages;
}

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// Index of a (kind slot, chunk, mb) triple: slot 0 F, 1 the input part of
// the backward (BW or B), 2 W.
int Slot(ChunkOpKind kind) {
  switch (kind) {
    case ChunkOpKind::kForward:
      return 0;
    case ChunkOpKind::kBackward:
    case ChunkOpKind::kBackwardInput:
      return 1;
    case ChunkOpKind::kBackwardWeight:
      return 2;
  }
  return 0;
}

}  // namespace

const char* PipelineScheduleName(PipelineScheduleKind kind) {
  switch (kind) {
    case PipelineScheduleKind::kGpipe:
      return "GPIPE";
    case PipelineScheduleKind::kOneFOneB:
      return "ONE_F_ONE_B";
    case PipelineScheduleKind::kInterleaved1F1B:
      return "INTERLEAVED_1F1B";
    case PipelineScheduleKind::kZeroBubbleH1:
      return "ZERO_BUBBLE_H1";
  }
  return "UNKNOWN_SCHEDULE";
}

const char* ChunkOpKindName(ChunkOpKind kind) {
  switch (kind) {
    case ChunkOpKind::kForward:
      return "F";
    case ChunkOpKind::kBackward:
      return "BW";
    case ChunkOpKind::kBackwardInput:
      return "B";
    case ChunkOpKind::kBackwardWeight:
      return "W";
  }
  return "?";
}

absl::Status ValidatePipelineShape(PipelineScheduleKind kind, const PipelineShape& shape) {
  if (shape.stages < 1) return Invalid(absl::StrCat(kPp, ": ", shape.stages, " is out of range; expected >= 1"));
  if (shape.virtual_stages < 1) {
    return Invalid(absl::StrCat(kVirtual, ": ", shape.virtual_stages, " is out of range; expected >= 1"));
  }
  if (shape.micro_batches < 1) {
    return Invalid(absl::StrCat(kMicroBatches, ": ", shape.micro_batches, " is out of range; expected >= 1"));
  }
  const char* name = PipelineScheduleName(kind);
  if (kind == PipelineScheduleKind::kInterleaved1F1B) {
    if (shape.virtual_stages == 1)
      return Invalid(absl::StrCat(kSchedule, ": ", name, " needs ", kVirtual, " > 1 (is 1)"));
    if (shape.micro_batches % shape.stages != 0) {
      return Invalid(absl::StrCat(kSchedule, ": ", name, " needs ", kMicroBatches, " (", shape.micro_batches,
                                  ") to be a multiple of ", kPp, " (", shape.stages, ")"));
    }
    return absl::OkStatus();
  }
  if (shape.virtual_stages != 1) {
    return Invalid(absl::StrCat(kVirtual, ": ", shape.virtual_stages, " needs ", kSchedule, " ",
                                PipelineScheduleName(PipelineScheduleKind::kInterleaved1F1B), " (is ", name, ")"));
  }
  if (kind == PipelineScheduleKind::kZeroBubbleH1 && shape.micro_batches < shape.stages) {
    return Invalid(absl::StrCat(kSchedule, ": ", name, " needs ", kMicroBatches, " (", shape.micro_batches,
                                ") >= ", kPp, " (", shape.stages, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<ChunkOp>>> BuildPipelineSchedule(PipelineScheduleKind kind,
                                                                        const PipelineShape& shape) {
  if (absl::Status s = ValidatePipelineShape(kind, shape); !s.ok()) return s;
  switch (kind) {
    case PipelineScheduleKind::kGpipe:
      return Gpipe(shape);
    case PipelineScheduleKind::kOneFOneB:
      return OneFOneB(shape, /*split=*/false);
    case PipelineScheduleKind::kInterleaved1F1B:
      return Interleaved(shape);
    case PipelineScheduleKind::kZeroBubbleH1:
      return OneFOneB(shape, /*split=*/true);
  }
  return Invalid("unknown pipeline schedule");
}

ChunkCosts ChunkCosts::PerUnit(const std::vector<int>& units_per_chunk) {
  ChunkCosts costs;
  for (int n : units_per_chunk) {
    costs.forward.push_back(n);
    costs.backward_input.push_back(n);
    costs.backward_weight.push_back(n);
  }
  return costs;
}

double TransferSeconds(int64_t bytes, double latency, double bytes_per_second) {
  return latency + (bytes_per_second > 0 ? static_cast<double>(bytes) / bytes_per_second : 0);
}

absl::StatusOr<ScheduleTimeline> SimulatePipelineSchedule(const std::vector<std::vector<ChunkOp>>& schedule,
                                                          const PipelineShape& shape, const ChunkCosts& costs) {
  const int p = shape.stages, chunks = shape.chunks(), m = shape.micro_batches;
  if (p < 1 || shape.virtual_stages < 1 || m < 1) {
    return Invalid(absl::StrCat("pipeline shape pp ", p, ", virtual stages ", shape.virtual_stages, ", micro-batches ",
                                m, "; expected each >= 1"));
  }
  if (static_cast<int>(schedule.size()) != p) {
    return Invalid(absl::StrCat("the schedule has ", schedule.size(), " stages, expected ", p));
  }
  for (const std::vector<double>* v : {&costs.forward, &costs.backward_input, &costs.backward_weight}) {
    if (static_cast<int>(v->size()) != chunks) {
      return Invalid(absl::StrCat("costs list ", v->size(), " chunks, expected ", chunks));
    }
    for (double c : *v) {
      if (!(c >= 0)) return Invalid(absl::StrCat("a chunk costs ", c, ", expected >= 0"));
    }
  }
  if (!costs.transfer.empty() && static_cast<int>(costs.transfer.size()) != chunks - 1) {
    return Invalid(absl::StrCat("transfer costs list ", costs.transfer.size(), " chunk boundaries, expected none or ",
                                chunks - 1));
  }
  for (double c : costs.transfer) {
    if (!(c >= 0)) return Invalid(absl::StrCat("a transfer costs ", c, ", expected >= 0"));
  }
  // Boundary c's transfer: free when chunks c and c + 1 share a stage (pp 1).
  auto transfer = [&](int c) { return costs.transfer.empty() || p == 1 ? 0.0 : costs.transfer[c]; };
  // Which backward form the schedule uses, and every operation once.
  bool fused = false, split = false;
  std::vector<int> seen(static_cast<size_t>(3) * chunks * m, 0);
  auto index = [&](int slot, int c, int mb) { return (static_cast<size_t>(slot) * chunks + c) * m + mb; };
  for (int s = 0; s < p; ++s) {
    for (const ChunkOp& op : schedule[s]) {
      if (op.chunk < 0 || op.chunk >= chunks || op.micro_batch < 0 || op.micro_batch >= m) {
        return Invalid(absl::StrCat("stage ", s, " runs ", OpText(op), ", expected chunk in [0, ", chunks,
                                    ") and mb in [0, ", m, ")"));
      }
      if (op.chunk % p != s) {
        return Invalid(absl::StrCat("stage ", s, " runs ", OpText(op), ", which belongs to stage ", op.chunk % p));
      }
      if (op.kind == ChunkOpKind::kBackward) fused = true;
      if (op.kind == ChunkOpKind::kBackwardInput || op.kind == ChunkOpKind::kBackwardWeight) split = true;
      if (++seen[index(Slot(op.kind), op.chunk, op.micro_batch)] > 1) {
        return Invalid(absl::StrCat("stage ", s, " runs ", OpText(op), " twice"));
      }
    }
  }
  if (fused && split) {
    return Invalid("the schedule mixes fused backwards (BW) with split ones (B, W); expected one or the other");
  }
  for (int c = 0; c < chunks; ++c) {
    for (int mb = 0; mb < m; ++mb) {
      for (int slot = 0; slot < (split ? 3 : 2); ++slot) {
        if (seen[index(slot, c, mb)] == 1) continue;
        const ChunkOpKind kind = slot == 0   ? ChunkOpKind::kForward
                                 : slot == 2 ? ChunkOpKind::kBackwardWeight
                                 : split     ? ChunkOpKind::kBackwardInput
                                             : ChunkOpKind::kBackward;
        return Invalid(absl::StrCat(OpText(Op(kind, c, mb)), " is missing from stage ", c % p));
      }
    }
  }

  // As soon as possible: each stage in list order, an operation once the
  // stage is free and what it needs has ended.
  std::vector<double> end(seen.size(), -1);
  ScheduleTimeline t;
  t.stages.assign(p, {});
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0);
  // What `op` waits for that has not ended; none: {-1}.
  auto missing = [&](const ChunkOp& op) -> ChunkOp {
    const int c = op.chunk, mb = op.micro_batch;
    if (op.kind == ChunkOpKind::kForward) {
      if (c > 0 && end[index(0, c - 1, mb)] < 0) return Op(ChunkOpKind::kForward, c - 1, mb);
    } else if (op.kind == ChunkOpKind::kBackwardWeight) {
      if (end[index(1, c, mb)] < 0) return Op(ChunkOpKind::kBackwardInput, c, mb);
    } else {
      if (end[index(0, c, mb)] < 0) return Op(ChunkOpKind::kForward, c, mb);
      if (c + 1 < chunks && end[index(1, c + 1, mb)] < 0) return Op(op.kind, c + 1, mb);
    }
    return Op(ChunkOpKind::kForward, -1, -1);
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < schedule[s].size()) {
        const ChunkOp& op = schedule[s][next[s]];
        if (missing(op).chunk >= 0) break;
        const int c = op.chunk, mb = op.micro_batch;
        double start = free_at[s], duration = 0;
        switch (op.kind) {
          case ChunkOpKind::kForward:
            if (c > 0) start = std::max(start, end[index(0, c - 1, mb)] + transfer(c - 1));
            duration = costs.forward[c];
            break;
          case ChunkOpKind::kBackwardWeight:
            start = std::max(start, end[index(1, c, mb)]);
            duration = costs.backward_weight[c];
            break;
          default:
            start = std::max(start, end[index(0, c, mb)]);
            if (c + 1 < chunks) start = std::max(start, end[index(1, c + 1, mb)] + transfer(c));
            duration = costs.backward_input[c];
            if (op.kind == ChunkOpKind::kBackward) duration += costs.backward_weight[c];
            break;
        }
        const double finish = start + duration;
        end[index(Slot(op.kind), c, mb)] = finish;
        free_at[s] = finish;
        t.stages[s].push_back(TimedOp{op, start, finish});
        ++next[s];
        progress = true;
      }
    }
  }
  std::vector<std::string> stuck;
  for (int s = 0; s < p; ++s) {
    if (next[s] == schedule[s].size()) continue;
    const ChunkOp& op = schedule[s][next[s]];
    const ChunkOp need = missing(op);
    stuck.push_back(
        absl::StrCat("stage ", s, " waits at ", OpText(op), " for ", OpText(need), " (stage ", need.chunk % p, ")"));
  }
  if (!stuck.empty()) return absl::FailedPreconditionError(absl::StrCat("deadlock: ", absl::StrJoin(stuck, "; ")));

  t.busy.assign(p, 0);
  t.peak_in_flight.assign(p, 0);
  for (int s = 0; s < p; ++s) {
    int in_flight = 0;
    for (const TimedOp& op : t.stages[s]) {
      t.busy[s] += op.end - op.start;
      t.makespan = std::max(t.makespan, op.end);
      if (op.op.kind == ChunkOpKind::kForward) {
        t.peak_in_flight[s] = std::max(t.peak_in_flight[s], ++in_flight);
      } else if (op.op.kind != ChunkOpKind::kBackwardInput) {
        --in_flight;
      }
    }
  }
  double idle = 0;
  for (int s = 0; s < p; ++s) {
    t.bubble.push_back(t.makespan > 0 ? (t.makespan - t.busy[s]) / t.makespan : 0);
    idle += t.makespan - t.busy[s];
  }
  t.overall_bubble = t.makespan > 0 ? idle / (p * t.makespan) : 0;
  return t;
}

std::string DrawTimeline(const ScheduleTimeline& timeline, double unit) {
  if (!(unit > 0)) unit = 1;
  auto cell = [&](double time) { return static_cast<int64_t>(std::llround(time / unit)); };
  const int64_t width = cell(timeline.makespan);
  const int label = static_cast<int>(absl::StrCat(std::max<size_t>(timeline.stages.size(), 1) - 1).size());
  std::string out;
  for (size_t s = 0; s < timeline.stages.size(); ++s) {
    std::string row(static_cast<size_t>(std::max<int64_t>(width, 0)), '.');
    for (const TimedOp& op : timeline.stages[s]) {
      const int64_t from = std::max<int64_t>(cell(op.start), 0), to = std::min(cell(op.end), width);
      if (to <= from) continue;
      const char kind = op.op.kind == ChunkOpKind::kForward          ? 'F'
                        : op.op.kind == ChunkOpKind::kBackwardWeight ? 'W'
                                                                     : 'B';
      std::string text(1, kind);
      const std::string mb = absl::StrCat(op.op.micro_batch);
      if (static_cast<int64_t>(mb.size()) < to - from) text += mb;
      text.resize(static_cast<size_t>(to - from), static_cast<char>(std::tolower(kind)));
      row.replace(static_cast<size_t>(from), text.size(), text);
    }
    const std::string number = absl::StrCat(s);
    absl::StrAppend(&out, "stage ", std::string(label - number.size(), ' '), number, " |", row, "|\n");
  }
  return out;
}

}  // namespace zeroshard
