#include "engine/optimizer_program.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

Action Make(ActionKind kind, int unit = -1, int bucket = -1, std::vector<IssuedCollective> issues = {}) {
  Action a;
  a.kind = kind;
  a.unit = unit;
  a.bucket = bucket;
  a.issues = std::move(issues);
  return a;
}

}  // namespace

int64_t ReduceNormBytes(int metrics) { return (5 + 2 * static_cast<int64_t>(metrics)) * 4; }

void AddStepPrologueAndOptimizerPhase(const OptimizerPhaseInput& in, StepProgram* program) {
  std::vector<Action>& actions = program->actions;
  actions.insert(actions.begin(), Make(ActionKind::kBeginStep));
  const int L = static_cast<int>(in.units.size());
  std::vector<bool> updated(L, false);
  for (const std::vector<int>& bucket : in.buckets) {
    for (int u : bucket) updated[u] = true;
  }
  for (int u = 0; u < L; ++u) {
    const OptimizerPhaseUnit& unit = in.units[u];
    if (!updated[u] || !unit.tied || unit.shard_numel == 0) continue;
    actions.push_back(Make(ActionKind::kTiedReduce, u, -1,
                           {{"embed", CommOp::kAllReduce, unit.shard_numel * 4, absl::StrCat("tied grads ", unit.name)}}));
  }
  const int buckets = static_cast<int>(in.buckets.size());
  for (int b = 0; b < buckets; ++b) actions.push_back(Make(ActionKind::kNormPartial, -1, b));
  actions.push_back(
      Make(ActionKind::kReduceNorm, -1, -1, {{in.norm_group, CommOp::kAllReduce, ReduceNormBytes(in.metrics),
                                              "norm, loss, overflow"}}));
  // Forward order (buckets are formed from the last unit back): the next
  // step's forward needs the first units first.
  for (int b = buckets - 1; b >= 0; --b) {
    std::vector<IssuedCollective> grads, params;
    for (int u : in.buckets[b]) {
      const OptimizerPhaseUnit& unit = in.units[u];
      if (unit.shard_numel == 0) continue;
      if (in.zero.all_gathers_reduced_grads()) {
        grads.push_back({"dp", CommOp::kAllGather, unit.shard_numel * 4, absl::StrCat("grads ", unit.name)});
      }
      if (in.zero.publishes_by_all_gather()) {
        params.push_back({"dp", CommOp::kAllGather, unit.shard_numel * in.compute_dtype_bytes,
                          absl::StrCat("params ", unit.name)});
      }
    }
    actions.push_back(Make(ActionKind::kUpdate, -1, b, std::move(grads)));
    actions.push_back(Make(ActionKind::kPublish, -1, b, std::move(params)));
  }
  actions.push_back(Make(ActionKind::kScalerUpdate));
}

}  // namespace zeroshard
