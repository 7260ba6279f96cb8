#include "engine/pipeline_program.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

// A B whose input gradient no stage waits for (the first chunk, or one
// below which no unit runs backward), followed at once by its own W, runs
// as one BW: splitting it defers nothing and costs a second pass over the
// kept activations, the weight inputs' buffers and copies. Bitwise the
// same (Unit::BackwardInput + BackwardWeight == Backward).
std::vector<ChunkOp> JoinAdjacentSplits(const PipelineProgramInput& in, const std::vector<ChunkOp>& ops) {
  std::vector<ChunkOp> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    const ChunkOp& op = ops[i];
    const int first = in.chunk_begin[op.chunk];
    // (CompileProgram rejects a chunk_begin out of range afterwards.)
    const bool sends_nothing =
        first <= 0 || (first <= static_cast<int>(in.units.size()) && !in.units[first - 1].backward);
    if (op.kind == ChunkOpKind::kBackwardInput && sends_nothing && i + 1 < ops.size() &&
        ops[i + 1] == ChunkOp{ChunkOpKind::kBackwardWeight, op.chunk, op.micro_batch}) {
      out.push_back({ChunkOpKind::kBackward, op.chunk, op.micro_batch});
      ++i;
      continue;
    }
    out.push_back(op);
  }
  return out;
}

}  // namespace

PipelineStageUnits StageUnits(const PipelineProgramInput& in) {
  return HeldUnits(in.units, in.chunk_begin, in.shape.stages, in.stage);
}

absl::StatusOr<StepProgram> BuildPipelineProgram(const PipelineProgramInput& in) {
  RETURN_IF_ERROR(ValidatePipelineShape(in.schedule, in.shape));
  const int pp = in.shape.stages, chunks = in.shape.chunks();
  if (in.stage < 0 || in.stage >= pp) {
    return absl::InvalidArgumentError(absl::StrCat("stage is ", in.stage, ", expected in [0, ", pp, ")"));
  }
  if (static_cast<int>(in.chunk_begin.size()) != chunks + 1) {
    return absl::InvalidArgumentError(absl::StrCat("chunk_begin has ", in.chunk_begin.size(),
                                                   " entries, expected pp x virtual stages + 1 = ", chunks + 1));
  }
  ProgramCompilerInput c;
  c.units = in.units;
  c.buckets = in.buckets;
  c.chunk_begin = in.chunk_begin;
  c.stages = pp;
  c.stage = in.stage;
  c.zero = in.zero;
  c.prefetch = in.prefetch;
  c.keep_gathered_across_micro_batches = in.keep_gathered_across_micro_batches;
  c.reshard_after_forward = in.reshard_after_forward;
  c.reduce_every_micro_batch = false;  // once per step, after the last micro-batch
  c.training = in.training;
  c.micro_batches = in.shape.micro_batches;
  if (in.training) {
    ASSIGN_OR_RETURN(std::vector<std::vector<ChunkOp>> schedule, BuildPipelineSchedule(in.schedule, in.shape));
    c.ops = JoinAdjacentSplits(in, schedule[in.stage]);
  } else {
    for (int chunk = in.stage; chunk < chunks; chunk += pp) c.ops.push_back({ChunkOpKind::kForward, chunk, 0});
  }
  return CompileProgram(c);
}

}  // namespace zeroshard
