// PipelinePlan: what a pipeline-parallel run derives from a model and its
// options before anything exists (docs/parallelism.md) — the partition
// into chunks, each stage's schedule, own and mirrored units, gradient
// buckets, optimizer collectives and step programs. A pure function, like
// StepPlan (engine/step_plan.h) for data parallelism, whose layouts and
// unit roles it reuses; `zeroshard schedule` prints and simulates it. The
// engine does not run pipelines yet (EngineOptionsFromConfig rejects
// pp > 1): the optimizer collectives below are what its OPTIMIZER must
// issue once it does.
#ifndef ZEROSHARD_ENGINE_PIPELINE_PLAN_H_
#define ZEROSHARD_ENGINE_PIPELINE_PLAN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine_options.h"
#include "engine/pipeline_program.h"
#include "engine/pipeline_schedule.h"
#include "engine/program_simulator.h"
#include "engine/step_plan.h"
#include "engine/step_program.h"
#include "nn/model.h"
#include "proto/config.pb.h"

namespace zeroshard {

struct PipelinePlanOptions {
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;
  int stages = 1;          // pp
  int virtual_stages = 1;  // v
  // Units per chunk (pp·v entries); empty: PartitionByCost over UnitCosts.
  std::vector<int> partition;
  bool keep_gathered_across_micro_batches = true;
};

// engine.parallel's pipeline fields.
PipelinePlanOptions PipelinePlanOptionsFromConfig(const ParallelConfig& parallel);

struct PipelineStagePlan {
  PipelineStageUnits units;  // own and mirrored
  std::vector<ProgramBucket> buckets;
  std::vector<IssuedCollective> optimizer_collectives;
  StepProgram train;
  StepProgram eval;
};

struct PipelinePlan {
  StepPlan data_parallel;          // layouts and unit roles (its programs are data parallelism's)
  std::vector<double> unit_costs;  // UnitCosts
  bool partitioned_by_cost = false;
  PipelineShape shape;
  std::vector<int> chunk_begin;                // pp·v + 1 entries
  std::vector<std::vector<ChunkOp>> schedule;  // per stage
  std::vector<PipelineStagePlan> stages;       // per stage (the same on each of its dp ranks)
  // Stages holding a unit another stage mirrors or a mirror (GPT-2's first
  // and last): the "embed" group, one per dp rank; empty when no
  // parameter is shared across stages.
  std::vector<int> tied_stages;
};

// What the automatic partition weighs: the parameters each unit reads (its
// own and those it borrows), a stand-in for its compute that counts an
// embedding table like a weight matrix.
std::vector<double> UnitCosts(const StepPlan& plan);

// Per stage, its optimizer collectives, in order:
//   tied stages: an AllReduce over "embed" of each shared unit's f32
//     gradient shard ("tied grads embed"), summing the owner's and the
//     mirrors' gradients before the update;
//   the norm's AllReduce over "world" (every stage's shards; the sums
//     StepPlan's OptimizerCollectives counts);
//   stage 0: an AllGather of each held trainable unit's f32 gradient shard
//     over "dp"; stages 1-2: of its parameters in the compute dtype.
// kUnimplemented when shared units are held by different sets of stages.
// Errors: PlanDataParallelStep's, ValidatePipelineShape's, a partition that
// has not pp·v entries each >= 1 summing to the units, pp·v above the
// units, BuildPipelineProgram's.
absl::StatusOr<PipelinePlan> PlanPipelineStep(const Model& model, const EngineOptions& options,
                                              const PipelinePlanOptions& pipeline, int dp_size);

// Every rank of a dp x pp grid (tp 1: rank = dp_rank + dp · stage,
// comm/process_grid.h) with its stage's training program, for
// SimulatePrograms: groups "dp" (the stage's ranks), "pp" (the dp rank's
// stages in order), "world", and "embed" (the dp rank's tied stages) on
// the ranks of tied stages; gathers_params for ZeRO-3.
std::vector<SimulatedRank> PipelineSimulatedRanks(const PipelinePlan& plan, int dp, bool gathers_params);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_PIPELINE_PLAN_H_
