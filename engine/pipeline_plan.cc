#include "engine/pipeline_plan.h"

#include <algorithm>
#include <utility>

#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<PipelinePlan> PlanPipeline(const Model& model, const EngineOptions& options, int dp_size,
                                          const MicroBatchShape& micro_batch) {
  const PipelineOptions& pipe = options.pipeline;
  PipelinePlan plan;
  plan.shape = {pipe.stages, pipe.virtual_stages, options.accumulation_steps};
  RETURN_IF_ERROR(ValidatePipelineShape(pipe.schedule, plan.shape));
  plan.partitioned_by_cost = pipe.partition.empty();
  for (int s = 0; s < pipe.stages; ++s) {
    ASSIGN_OR_RETURN(StepPlan stage, PlanPipelineStep(model, options, dp_size, s, micro_batch));
    plan.stages.push_back(std::move(stage));
  }
  plan.chunk_begin = plan.stages[0].chunk_begin;
  ASSIGN_OR_RETURN(plan.schedule, BuildPipelineSchedule(pipe.schedule, plan.shape));
  for (int s = 0; s < pipe.stages; ++s) {
    const std::vector<UnitPlan>& units = plan.stages[s].units;
    if (std::any_of(units.begin(), units.end(), [](const UnitPlan& u) { return u.tied; })) {
      plan.tied_stages.push_back(s);
    }
  }
  return plan;
}

std::vector<SimulatedRank> PipelineSimulatedRanks(const PipelinePlan& plan, int dp, bool gathers_params) {
  const int pp = static_cast<int>(plan.stages.size());
  std::vector<SimulatedRank> ranks(static_cast<size_t>(dp) * pp);
  for (int s = 0; s < pp; ++s) {
    const bool tied = std::find(plan.tied_stages.begin(), plan.tied_stages.end(), s) != plan.tied_stages.end();
    std::vector<int> computed;
    for (size_t u = 0; u < plan.stages[s].units.size(); ++u) {
      if (plan.stages[s].units[u].computed) computed.push_back(static_cast<int>(u));
    }
    for (int d = 0; d < dp; ++d) {
      SimulatedRank& r = ranks[d + dp * s];
      r.program = plan.stages[s].train;
      r.units = computed;
      r.gathers_params = gathers_params;
      for (int e = 0; e < dp; ++e) r.groups["dp"].push_back(e + dp * s);
      for (int t = 0; t < pp; ++t) r.groups["pp"].push_back(d + dp * t);
      for (int w = 0; w < dp * pp; ++w) r.groups["world"].push_back(w);
      if (tied) {
        for (int t : plan.tied_stages) r.groups["embed"].push_back(d + dp * t);
      }
    }
  }
  return ranks;
}

}  // namespace zeroshard
