// The optimizer phase's host-offload path (docs/offload.md, "Host offload on
// GPU"): UPDATE on the CPU over the masters and state in pinned host
// memory, with the reduced gradients fetched there, and PUBLISH ordering the
// compute stream after the pushed parameters.
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/optimizer_phase.h"
#include "kernels/scale.h"

namespace zeroshard {

// Stages 1-3: each unit's shard was fetched at its WAIT_REDUCE (a tied unit
// now, after TIED_REDUCE); the unscale and clip multiply runs on the host
// copy, the device shard stays as reduced unless observers look at it.
absl::Status OptimizerPhase::UpdateOnHost(int bucket, StepResult* result, OptimizerPhaseState* phase_state) {
  OptimizerPhaseState& phase = *phase_state;
  if (!phase.update) return absl::OkStatus();
  HostOffload& host = *state_->host_offload();
  std::vector<int> units;
  for (int u : res_->plan.buckets[bucket].units) {
    const int r = state_->optimizer_region(u);
    if (r < 0) continue;
    UnitShard& shard = *state_->unit_shard(u);
    if (!host.grads_fetched(r)) RETURN_IF_ERROR(host.FetchGrads(r, shard.grad_shard()));
    RETURN_IF_ERROR(host.WaitGrads(r));
    const int64_t n = res_->plan.layouts[u].shard_numel();
    if (phase.rescale && n > 0) {
      RETURN_IF_ERROR(
          kernels::ScaleInPlace(state_->host_kernels(), host.grads(r), n, DType::kF32, phase.factor, nullptr));
      // The observers' final gradient is the device shard's (its copy is
      // done, so the multiply cannot race it).
      if (!res_->observers.empty() && res_->device() != Device::kCpu) {
        RETURN_IF_ERROR(
            kernels::ScaleInPlace(res_->compute.kernels, shard.grad_shard(), n, DType::kF32, phase.factor, nullptr));
      } else if (!res_->observers.empty()) {
        RETURN_IF_ERROR(
            kernels::ScaleInPlace(state_->host_kernels(), shard.grad_shard(), n, DType::kF32, phase.factor, nullptr));
      }
    }
    NotifyGradient(&EngineObserver::OnFinalGradient, state_->attempts(), u);
    units.push_back(u);
  }
  return StepOnHost(bucket, units, result);
}

absl::Status OptimizerPhase::StepOnHost(int bucket, absl::Span<const int> units, StepResult* result) {
  HostOffload& host = *state_->host_offload();
  int64_t elements = 0;
  for (int u : units) elements += host.numel(state_->optimizer_region(u));
  TraceScope span(res_->timeline.get(), "optimizer", "update", {}, {{"bucket", bucket}, {"elements", elements}});
  const int kinds = host.state_kinds();
  for (int u : units) {
    const int r = state_->optimizer_region(u);
    std::vector<void*> states;
    for (int k = 0; k < kinds; ++k) states.push_back(host.state(r, k));
    // The whole region as one chunk: the bits of StepRegions.
    RETURN_IF_ERROR(state_->optimizer().StepChunk(r, 0, host.numel(r), host.master(r), host.grads(r), states,
                                                  result->lr, state_->step()));
    RETURN_IF_ERROR(state_->PushHostParams(u));
  }
  return absl::OkStatus();
}

// Stage 0: the all-gathered f32 gradients (already unscaled and clipped on
// the device) go to the host now, then the CPU step.
absl::Status OptimizerPhase::StepGatheredOnHost(int bucket, absl::Span<const int> units,
                                                absl::Span<const float* const> grads, StepResult* result) {
  HostOffload& host = *state_->host_offload();
  for (size_t i = 0; i < units.size(); ++i) {
    RETURN_IF_ERROR(host.FetchGrads(state_->optimizer_region(units[i]), grads[i]));
  }
  for (int u : units) RETURN_IF_ERROR(host.WaitGrads(state_->optimizer_region(u)));
  return StepOnHost(bucket, units, result);
}

absl::Status OptimizerPhase::OrderHostParams(int bucket) {
  for (int u : res_->plan.buckets[bucket].units) {
    const int r = state_->optimizer_region(u);
    if (r >= 0) RETURN_IF_ERROR(state_->host_offload()->OrderParams(r));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
