// The engine's observer events (engine/observer.h): the step's start and
// end around RunTrainStep, each action's start, waits and end around
// RunAction, and the gradient events of the optimizer phase.
#include <algorithm>
#include <array>
#include <chrono>

#include "core/status_macros.h"
#include "engine/engine_impl.h"

namespace zeroshard {
namespace {

using Clock = std::chrono::steady_clock;

// The StepTimings fields that add up time blocked, by WaitKind.
std::array<double, 5> Waits(const StepTimings& t) {
  return {t.gather_wait, t.reduce_wait, t.pipeline_wait_forward, t.pipeline_wait_backward, t.publish_wait};
}

}  // namespace

const char* WaitKindName(WaitKind kind) {
  switch (kind) {
    case WaitKind::kGather:
      return "gather";
    case WaitKind::kReduce:
      return "reduce";
    case WaitKind::kPipelineForward:
      return "pipeline_forward";
    case WaitKind::kPipelineBackward:
      return "pipeline_backward";
    case WaitKind::kOptimizer:
      return "optimizer";
  }
  return "unknown";
}

void EngineImpl::AddObserver(EngineObserver* observer) {
  if (observer == nullptr || std::find(observers_.begin(), observers_.end(), observer) != observers_.end()) return;
  observers_.push_back(observer);
}

void EngineImpl::RemoveObserver(EngineObserver* observer) {
  observers_.erase(std::remove(observers_.begin(), observers_.end(), observer), observers_.end());
}

absl::StatusOr<StepResult> EngineImpl::TrainStep(absl::Span<const Batch> micro_batches) {
  if (observers_.empty()) return RunTrainStep(micro_batches);
  const StepEvent event{attempts_, step_};
  Notify([&](EngineObserver& o) { o.OnStepStart(event); });
  absl::StatusOr<StepResult> result = RunTrainStep(micro_batches);
  if (result.ok()) Notify([&](EngineObserver& o) { o.OnStepEnd(event, *result); });
  return result;
}

absl::Status EngineImpl::RunObservedAction(const Action& action, int index, RunContext* run) {
  ActionEvent event;
  event.attempt = attempts_;  // SCALER_UPDATE counts the attempt: read it before
  event.action = &action;
  event.index = index;
  for (const IssuedCollective& c : action.issues) event.bytes += c.bytes_per_rank;
  Notify([&](EngineObserver& o) { o.OnActionStart(event); });
  const StepTimings none;
  const std::array<double, 5> before = Waits(run->timings == nullptr ? none : *run->timings);
  const Clock::time_point t0 = Clock::now();
  RETURN_IF_ERROR(RunAction(action, run));
  event.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::array<double, 5> after = Waits(run->timings == nullptr ? none : *run->timings);
  for (size_t k = 0; k < after.size(); ++k) {
    const double waited = after[k] - before[k];
    if (waited <= 0) continue;
    event.wait_seconds += waited;
    const WaitEvent wait{event.attempt, &action, static_cast<WaitKind>(k), waited};
    Notify([&](EngineObserver& o) { o.OnWait(wait); });
  }
  Notify([&](EngineObserver& o) { o.OnActionEnd(event); });
  return absl::OkStatus();
}

void EngineImpl::NotifyGradients(void (EngineObserver::*event)(const GradientEvent&), int64_t attempt) {
  if (observers_.empty()) return;
  for (int u = 0; u < num_units(); ++u) NotifyGradient(event, attempt, u);
}

void EngineImpl::NotifyGradient(void (EngineObserver::*event)(const GradientEvent&), int64_t attempt, int unit) {
  if (observers_.empty() || regions_[unit] < 0) return;
  const GradientEvent grad{attempt, unit, shards_[unit]->grad_shard(), plan_.layouts[unit].shard_numel()};
  Notify([&](EngineObserver& o) { (o.*event)(grad); });
}

}  // namespace zeroshard
