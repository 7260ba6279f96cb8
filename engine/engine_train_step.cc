// The facade's training step: the step's span and trace window and the
// observers' step events around the executor's run of the train program.
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "comm/status_agreement.h"
#include "core/stopwatch.h"
#include "engine/engine_impl.h"
#include "engine/memory_plan.h"

namespace zeroshard {

absl::StatusOr<StepResult> EngineImpl::TrainStep(absl::Span<const Batch> micro_batches) {
  if (res_.observers.empty()) return RunTrainStep(micro_batches);
  const StepEvent event{state_->attempts(), state_->step()};
  res_.Notify([&](EngineObserver& o) { o.OnStepStart(event); });
  absl::StatusOr<StepResult> result = RunTrainStep(micro_batches);
  if (result.ok()) res_.Notify([&](EngineObserver& o) { o.OnStepEnd(event, *result); });
  return result;
}

absl::StatusOr<StepResult> EngineImpl::RunTrainStep(absl::Span<const Batch> micro_batches) {
  RETURN_IF_ERROR(res_.CheckUsable());
  SteadyClock::time_point start = SteadyClock::now();
  StepResult result;
  // Closes (and is recorded) before the window may close below.
  std::optional<TraceScope> step_span;
  if (res_.timeline != nullptr && res_.timeline->recording()) {
    // Named after the optimizer step it makes (a skipped attempt repeats it).
    // The micro-batch's first tensor's elements (tokens for a language
    // model): a cost profile scales compute by it (docs/simulator.md).
    const int64_t elements =
        micro_batches.empty() || micro_batches[0].empty() ? 0 : micro_batches[0].tensors()[0].view.numel();
    step_span.emplace(res_.timeline.get(), "step", "step", absl::StrCat(state_->step() + 1),
                      std::initializer_list<TraceArg>{{"step", state_->step() + 1}, {"micro_batch_elements", elements}});
  }
  RunContext run;
  run.host_batches = micro_batches;
  run.batches = micro_batches;
  run.training = true;
  run.result = &result;
  run.timings = &result.timings;
  absl::Status s = executor_->RunProgram(res_.plan.train, &run);
  if (state_->offload() != nullptr || state_->param_store() != nullptr) {
    const OffloadIoDelta io = state_->TakeIo();
    result.io.read_bytes = io.read_bytes;
    result.io.write_bytes = io.write_bytes;
    result.io.busy_seconds = io.busy_seconds;
  }
  if (!s.ok()) {
    // Before BEGIN_STEP's agreement nothing ran on any rank.
    if (run.started) res_.broken = s;
    return s;
  }
  if (ChecksMeasuredPeakRss()) {
    // Every rank stops together when one ran past its limit (the plan
    // missed something), rather than the host's OOM killer stopping one.
    const absl::Status local = CheckMeasuredPeakRss(res_.comms.control->rank(), MeasuredPeakRss(), memory_limit_,
                                                    res_.options.memory_limit_bytes > 0);
    s = AgreeAcrossRanksSharingError(*res_.comms.control, local, "the memory limit check");
    if (!s.ok()) {
      res_.broken = s;
      return s;
    }
  }
  step_span.reset();
  if (res_.timeline != nullptr && res_.timeline->recording()) {
    ++traced_steps_;
    if (trace_steps_ > 0 && traced_steps_ >= trace_steps_) res_.timeline->set_recording(false);
  }
  result.timings.total = SecondsSince(start);
  return result;
}

bool EngineImpl::ChecksMeasuredPeakRss() const {
  return memory_limit_ > 0 && (res_.options.memory_limit_bytes > 0 || res_.options.offload.any_nvme());
}

absl::StatusOr<EvalResult> EngineImpl::Evaluate(const Batch& batch) {
  // The NVMe tier's last stores finish first; an error there fails the
  // next training step on every rank (SCALER_UPDATE's agreement), not this
  // rank's evaluation alone.
  state_->DrainIo().IgnoreError();
  return evaluator_->Evaluate(batch);
}

absl::StatusOr<std::vector<float>> EngineImpl::GatherParam(absl::string_view name) {
  return evaluator_->GatherParam(name);
}

}  // namespace zeroshard
