#include "engine/pipeline_plan.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/pipeline_partition.h"
#include "sharding/grad_reducer.h"

namespace zeroshard {
namespace {

PipelineScheduleKind KindOf(ParallelConfig::PipelineSchedule s) {
  switch (s) {
    case ParallelConfig::GPIPE:
      return PipelineScheduleKind::kGpipe;
    case ParallelConfig::INTERLEAVED_1F1B:
      return PipelineScheduleKind::kInterleaved1F1B;
    case ParallelConfig::ZERO_BUBBLE_H1:
      return PipelineScheduleKind::kZeroBubbleH1;
    default:
      return PipelineScheduleKind::kOneFOneB;
  }
}

// The data-parallel builder's units, as PlanDataParallelStep makes them.
std::vector<ProgramUnit> ProgramUnits(const StepPlan& plan, const EngineOptions& options) {
  const int64_t c = static_cast<int64_t>(DTypeSize(options.compute_dtype));
  std::vector<ProgramUnit> units(plan.units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    ProgramUnit& p = units[u];
    p.name = plan.layouts[u].unit_name();
    p.needs = plan.units[u].needs;
    p.gather_bytes = plan.units[u].has_params ? plan.layouts[u].shard_numel() * c : 0;
    p.persistent = plan.layouts[u].numel() < options.gather.persistence_threshold;
    p.checkpointed = plan.units[u].checkpointed;
    p.backward = plan.units[u].backward;
  }
  return units;
}

bool Trainable(const StepPlan& plan, int u) { return plan.units[u].has_params && plan.units[u].trainable; }

}  // namespace

PipelinePlanOptions PipelinePlanOptionsFromConfig(const ParallelConfig& parallel) {
  PipelinePlanOptions o;
  o.schedule = KindOf(parallel.pipeline_schedule());
  o.stages = parallel.pp();
  o.virtual_stages = parallel.virtual_stages();
  o.partition.assign(parallel.pp_partition().begin(), parallel.pp_partition().end());
  return o;
}

std::vector<double> UnitCosts(const StepPlan& plan) {
  std::vector<double> costs;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    double reads = static_cast<double>(plan.layouts[u].numel());
    for (const UnitPlan::Borrowed& b : plan.units[u].borrowed) {
      double n = 1;
      for (int64_t d : b.shape) n *= static_cast<double>(d);
      reads += n;
    }
    costs.push_back(reads);
  }
  return costs;
}

absl::StatusOr<PipelinePlan> PlanPipelineStep(const Model& model, const EngineOptions& options,
                                              const PipelinePlanOptions& pipeline, int dp_size) {
  PipelinePlan plan;
  ASSIGN_OR_RETURN(plan.data_parallel, PlanDataParallelStep(model, options, dp_size));
  const StepPlan& dp = plan.data_parallel;
  const int n = static_cast<int>(dp.units.size());
  plan.shape.stages = pipeline.stages;
  plan.shape.virtual_stages = pipeline.virtual_stages;
  plan.shape.micro_batches = options.accumulation_steps;
  RETURN_IF_ERROR(ValidatePipelineShape(pipeline.schedule, plan.shape));
  const int chunks = plan.shape.chunks();
  if (chunks > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("pp x virtual stages = ", chunks, " chunks exceed the model's ", n, " units"));
  }
  plan.unit_costs = UnitCosts(dp);
  std::vector<int> sizes = pipeline.partition;
  if (sizes.empty()) {
    sizes = PartitionByCost(plan.unit_costs, chunks);
    plan.partitioned_by_cost = true;
  }
  int sum = 0;
  for (int s : sizes) {
    if (s < 1)
      return absl::InvalidArgumentError(absl::StrCat("a chunk of ", s, " units in the partition, expected >= 1"));
    sum += s;
  }
  if (static_cast<int>(sizes.size()) != chunks || sum != n) {
    return absl::InvalidArgumentError(absl::StrCat("the partition has ", sizes.size(), " chunks of ", sum,
                                                   " units, expected ", chunks, " of the model's ", n));
  }
  plan.chunk_begin = {0};
  for (int s : sizes) plan.chunk_begin.push_back(plan.chunk_begin.back() + s);
  ASSIGN_OR_RETURN(plan.schedule, BuildPipelineSchedule(pipeline.schedule, plan.shape));

  PipelineProgramInput in;
  in.schedule = pipeline.schedule;
  in.shape = plan.shape;
  in.chunk_begin = plan.chunk_begin;
  in.units = ProgramUnits(dp, options);
  in.zero_stage = options.stage;
  in.prefetch = options.gather.prefetch;
  in.keep_gathered_across_micro_batches = pipeline.keep_gathered_across_micro_batches;
  in.reshard_after_forward = options.gather.reshard_after_forward;

  // Shared units: owned by one stage, mirrored by others.
  std::vector<PipelineStageUnits> held(pipeline.stages);
  std::vector<std::set<int>> holders(n);  // by unit: stages holding it, when mirrored anywhere
  for (int s = 0; s < pipeline.stages; ++s) {
    in.stage = s;
    held[s] = StageUnits(in);
    for (int u : held[s].mirrors) holders[u].insert(s);
  }
  std::vector<int> shared;
  std::set<int> tied;
  for (int u = 0; u < n; ++u) {
    if (holders[u].empty()) continue;
    holders[u].insert(
        (std::upper_bound(plan.chunk_begin.begin(), plan.chunk_begin.end(), u) - plan.chunk_begin.begin() - 1) %
        pipeline.stages);
    if (!tied.empty() && std::set<int>(holders[u]) != tied) {
      return absl::UnimplementedError(absl::StrCat("unit ", dp.layouts[u].unit_name(),
                                                   " is shared by other stages than an earlier shared unit; one "
                                                   "\"embed\" group holds them all"));
    }
    tied = holders[u];
    shared.push_back(u);
  }
  plan.tied_stages.assign(tied.begin(), tied.end());

  const int64_t c = static_cast<int64_t>(DTypeSize(options.compute_dtype));
  const int64_t r = static_cast<int64_t>(DTypeSize(options.reduce_dtype));
  const std::vector<IssuedCollective> dp_collectives = OptimizerCollectives(dp, options);
  for (int s = 0; s < pipeline.stages; ++s) {
    PipelineStagePlan stage;
    stage.units = held[s];
    std::vector<int> mine = held[s].own;
    mine.insert(mine.end(), held[s].mirrors.begin(), held[s].mirrors.end());
    std::sort(mine.begin(), mine.end());
    std::vector<const FlatParamLayout*> with_grads(n, nullptr);
    for (int u : mine) {
      if (Trainable(dp, u)) with_grads[u] = &dp.layouts[u];
    }
    for (const GradBucket& b : FormGradBuckets(with_grads, options.bucket_bytes, options.reduce_dtype)) {
      stage.buckets.push_back({b.units, b.shard_numel * r, b.label});
    }
    if (tied.count(s)) {
      for (int u : shared) {
        if (!Trainable(dp, u)) continue;
        stage.optimizer_collectives.push_back({"embed", CommOp::kAllReduce, dp.layouts[u].shard_numel() * 4,
                                               absl::StrCat("tied grads ", dp.layouts[u].unit_name())});
      }
    }
    IssuedCollective norm = dp_collectives.front();  // the sums' AllReduce
    norm.group = "world";
    stage.optimizer_collectives.push_back(norm);
    for (int u : mine) {
      if (!Trainable(dp, u) || dp.layouts[u].shard_numel() == 0) continue;
      if (options.stage == 0) {
        stage.optimizer_collectives.push_back({"dp", CommOp::kAllGather, dp.layouts[u].shard_numel() * 4,
                                               absl::StrCat("grads ", dp.layouts[u].unit_name())});
      } else if (options.stage == 1 || options.stage == 2) {
        stage.optimizer_collectives.push_back({"dp", CommOp::kAllGather, dp.layouts[u].shard_numel() * c,
                                               absl::StrCat("params ", dp.layouts[u].unit_name())});
      }
    }
    in.stage = s;
    in.buckets = stage.buckets;
    in.optimizer_collectives = stage.optimizer_collectives;
    in.training = true;
    ASSIGN_OR_RETURN(stage.train, BuildPipelineProgram(in));
    in.training = false;
    in.optimizer_collectives.clear();
    ASSIGN_OR_RETURN(stage.eval, BuildPipelineProgram(in));
    plan.stages.push_back(std::move(stage));
  }
  return plan;
}

std::vector<SimulatedRank> PipelineSimulatedRanks(const PipelinePlan& plan, int dp, bool gathers_params) {
  const int pp = static_cast<int>(plan.stages.size());
  std::vector<SimulatedRank> ranks(static_cast<size_t>(dp) * pp);
  for (int s = 0; s < pp; ++s) {
    const bool tied = std::find(plan.tied_stages.begin(), plan.tied_stages.end(), s) != plan.tied_stages.end();
    for (int d = 0; d < dp; ++d) {
      SimulatedRank& r = ranks[d + dp * s];
      r.program = plan.stages[s].train;
      r.units = plan.stages[s].units.own;
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
