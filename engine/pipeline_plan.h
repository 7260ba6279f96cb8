// PipelinePlan: every stage's StepPlan of a pipeline run side by side, for
// tools that look at the whole pipeline at once (`zeroshard schedule`, the
// pipeline benchmark). The engine on a rank plans only its own stage
// (PlanPipelineStep, engine/step_plan.h); this is that function once per
// stage, plus the schedule's per-stage operation lists and the groups each
// rank's program names (docs/parallelism.md).
#ifndef ZEROSHARD_ENGINE_PIPELINE_PLAN_H_
#define ZEROSHARD_ENGINE_PIPELINE_PLAN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine_options.h"
#include "engine/pipeline_schedule.h"
#include "engine/program_simulator.h"
#include "engine/step_plan.h"
#include "nn/model.h"

namespace zeroshard {

struct PipelinePlan {
  std::vector<StepPlan> stages;  // PlanPipelineStep of each stage
  PipelineShape shape;
  std::vector<int> chunk_begin;  // pp·v + 1 entries, the same on every stage
  bool partitioned_by_cost = false;  // options.pipeline.partition was empty
  std::vector<std::vector<ChunkOp>> schedule;  // per stage, in run order
  // Stages holding a weight another stage shares (GPT-2's first and last):
  // the embedding group of each dp rank; empty when none is shared.
  std::vector<int> tied_stages;
};

// options.pipeline describes the pipeline (stages > 1 or virtual stages);
// `micro_batch`, when known, gives the transfers their bytes
// (PlanPipelineStep). Errors: ValidatePipelineShape's and PlanPipelineStep's.
absl::StatusOr<PipelinePlan> PlanPipeline(const Model& model, const EngineOptions& options, int dp_size,
                                          const MicroBatchShape& micro_batch = {});

// Every rank of a dp x pp grid (tp 1: rank = dp_rank + dp · stage,
// comm/process_grid.h) with its stage's training program, for
// SimulatePrograms: groups "dp" (the stage's ranks), "pp" (the dp rank's
// stages in order), "world", and "embed" (the dp rank's tied stages) on
// the ranks of tied stages; gathers_params for ZeRO-3.
std::vector<SimulatedRank> PipelineSimulatedRanks(const PipelinePlan& plan, int dp, bool gathers_params);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PIPELINE_PLAN_H_
