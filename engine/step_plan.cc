#include "engine/step_plan.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/data_parallel_program.h"

namespace zeroshard {
namespace {

absl::Status DescribeUnits(const Model& model, int dp_size, StepPlan* plan) {
  const int L = static_cast<int>(model.units.size());
  for (int u = 0; u < L; ++u) {
    const Unit& unit = *model.units[u];
    std::vector<FlatParamDecl> decls;
    for (const ParamSpec& p : unit.params()) {
      ASSIGN_OR_RETURN(std::vector<int64_t> local, LocalShape(p, /*tp_size=*/1));
      decls.push_back({p.name, std::move(local)});
    }
    ASSIGN_OR_RETURN(FlatParamLayout layout, FlatParamLayout::Create(unit.name(), u, std::move(decls), dp_size));
    plan->layouts.push_back(std::move(layout));
    UnitPlan info;
    info.has_params = !unit.params().empty();
    info.trainable = !info.has_params || unit.params().front().trainable;
    if (info.has_params) info.needs.push_back(u);
    plan->units.push_back(std::move(info));
  }
  for (int u = 0; u < L; ++u) {
    for (const std::string& name : model.units[u]->borrowed_params()) {
      ASSIGN_OR_RETURN(ParamLocation loc, model.FindParam(name));
      const FlatParamInfo& info = plan->layouts[loc.unit].params()[loc.param];
      plan->units[u].borrowed.push_back({loc.unit, info.offset, info.shape});
      std::vector<int>& needs = plan->units[u].needs;
      if (std::find(needs.begin(), needs.end(), loc.unit) == needs.end()) needs.push_back(loc.unit);
    }
  }
  // A leading run of units that train nothing (frozen or no parameters, no
  // trainable borrowed ones) needs no backward, and the first unit after it
  // no input gradient.
  bool upstream_trains = false;
  for (int u = 0; u < L; ++u) {
    UnitPlan& info = plan->units[u];
    info.input_grad = upstream_trains;
    bool trains = info.has_params && info.trainable;
    for (const UnitPlan::Borrowed& b : info.borrowed) trains |= plan->units[b.owner].trainable;
    upstream_trains |= trains;
    info.backward = upstream_trains;
  }
  if (L > 0) plan->metric_names = model.units[L - 1]->metric_names();
  return absl::OkStatus();
}

absl::Status ResolveCheckpointedUnits(const Model& model, const ActivationCheckpointingOptions& ac, StepPlan* plan) {
  const int L = static_cast<int>(plan->units.size());
  std::vector<bool> checkpointed(L, false);
  for (int u = 0; u < L; ++u) {
    checkpointed[u] = ac.policy == CheckpointPolicy::kEveryUnit || (ac.policy == CheckpointPolicy::kEveryKth && u % ac.k == 0);
  }
  // The automatic policies leave the last unit alone: its backward runs
  // right after its forward, so dropping its activations would free nothing
  // at the peak and cost a forward (GPT-2's head: the V-wide logits GEMM).
  if (ac.policy != CheckpointPolicy::kNamed) {
    if (L > 0) checkpointed[L - 1] = false;
  } else {
    for (const std::string& name : ac.units) {
      int found = -1;
      for (int u = 0; u < L; ++u) {
        if (model.units[u]->name() == name) found = u;
      }
      if (found < 0) {
        return absl::InvalidArgumentError(absl::StrCat("engine.activation_checkpointing.units: '", name,
                                                       "' is not a unit of the model (", L, " units, first '",
                                                       L > 0 ? model.units[0]->name() : std::string(), "')"));
      }
      checkpointed[found] = true;
    }
  }
  // A unit without a backward keeps nothing for one.
  for (int u = 0; u < L; ++u) plan->units[u].checkpointed = checkpointed[u] && plan->units[u].backward;
  return absl::OkStatus();
}

// Staging slot of each bucket: walking the program, a REDUCE takes the
// lowest slot no bucket in flight holds, and its WAIT_REDUCE frees it.
std::vector<int> StagingSlots(const StepProgram& program, int num_buckets) {
  std::vector<int> slot_of(num_buckets, 0);
  std::vector<bool> busy;
  for (const Action& a : program.actions) {
    if (a.kind == ActionKind::kReduce) {
      int s = 0;
      while (s < static_cast<int>(busy.size()) && busy[s]) ++s;
      if (s == static_cast<int>(busy.size())) busy.push_back(false);
      busy[s] = true;
      slot_of[a.bucket] = s;
    } else if (a.kind == ActionKind::kWaitReduce) {
      busy[slot_of[a.bucket]] = false;
    }
  }
  return slot_of;
}

}  // namespace

std::vector<IssuedCollective> OptimizerCollectives(const StepPlan& plan, const EngineOptions& options) {
  std::vector<IssuedCollective> issues;
  // [sumsq, loss sum, loss weight, non-finite flag, failed allocations,
  //  (metric sum, metric weight)...] in f32.
  const int64_t sums = 5 + 2 * static_cast<int64_t>(plan.metric_names.size());
  issues.push_back({"dp", CommOp::kAllReduce, sums * 4, "norm, loss, overflow"});
  const int64_t c = static_cast<int64_t>(DTypeSize(options.compute_dtype));
  const int L = static_cast<int>(plan.units.size());
  auto updated = [&](int u) {
    return plan.units[u].has_params && plan.units[u].trainable && plan.layouts[u].shard_numel() > 0;
  };
  for (int u = 0; u < L; ++u) {
    if (options.stage == 0 && updated(u)) {
      issues.push_back({"dp", CommOp::kAllGather, plan.layouts[u].shard_numel() * 4,
                        absl::StrCat("grads ", plan.layouts[u].unit_name())});
    }
  }
  for (int u = 0; u < L; ++u) {
    if ((options.stage == 1 || options.stage == 2) && updated(u)) {
      issues.push_back({"dp", CommOp::kAllGather, plan.layouts[u].shard_numel() * c,
                        absl::StrCat("params ", plan.layouts[u].unit_name())});
    }
  }
  return issues;
}

absl::StatusOr<StepPlan> PlanDataParallelStep(const Model& model, const EngineOptions& options, int dp_size) {
  RETURN_IF_ERROR(model.Validate());
  StepPlan plan;
  RETURN_IF_ERROR(DescribeUnits(model, dp_size, &plan));
  RETURN_IF_ERROR(ResolveCheckpointedUnits(model, options.checkpointing, &plan));
  const int L = static_cast<int>(plan.units.size());
  std::vector<const FlatParamLayout*> with_grads(L, nullptr);
  for (int u = 0; u < L; ++u) {
    if (plan.units[u].has_params && plan.units[u].trainable) with_grads[u] = &plan.layouts[u];
  }
  plan.buckets = FormGradBuckets(with_grads, options.bucket_bytes, options.reduce_dtype);

  const int64_t c = static_cast<int64_t>(DTypeSize(options.compute_dtype));
  const int64_t r = static_cast<int64_t>(DTypeSize(options.reduce_dtype));
  std::vector<ProgramUnit> units(L);
  for (int u = 0; u < L; ++u) {
    ProgramUnit& p = units[u];
    p.name = plan.layouts[u].unit_name();
    p.needs = plan.units[u].needs;
    p.gather_bytes = plan.units[u].has_params ? plan.layouts[u].shard_numel() * c : 0;
    p.persistent = plan.layouts[u].numel() < options.gather.persistence_threshold;
    p.checkpointed = plan.units[u].checkpointed;
    p.backward = plan.units[u].backward;
  }
  std::vector<ProgramBucket> buckets;
  for (const GradBucket& b : plan.buckets) buckets.push_back({b.units, b.shard_numel * r, b.label});
  DataParallelProgramOptions o;
  o.stage = options.stage;
  o.micro_batches = options.accumulation_steps;
  o.reduce_every_micro_batch = options.reduce_mode == ReduceMode::kAccumulate;
  o.prefetch = options.gather.prefetch;
  o.reshard_after_forward = options.gather.reshard_after_forward;
  o.optimizer_collectives = OptimizerCollectives(plan, options);
  ASSIGN_OR_RETURN(plan.train, BuildDataParallelProgram(units, buckets, o));
  o.training = false;
  o.optimizer_collectives.clear();
  ASSIGN_OR_RETURN(plan.eval, BuildDataParallelProgram(units, buckets, o));
  plan.staging_slots = StagingSlots(plan.train, static_cast<int>(plan.buckets.size()));
  return plan;
}

}  // namespace zeroshard
