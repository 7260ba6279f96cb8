#include "engine/pipeline_program.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {

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
    c.ops = std::move(schedule[in.stage]);
  } else {
    for (int chunk = in.stage; chunk < chunks; chunk += pp) c.ops.push_back({ChunkOpKind::kForward, chunk, 0});
  }
  return CompileProgram(c);
}

}  // namespace zeroshard
