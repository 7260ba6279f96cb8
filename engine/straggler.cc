#include "engine/straggler.h"

#include <algorithm>
#include <vector>

#include "core/status_macros.h"

namespace zeroshard {

double ComputeMs(const StepTimings& t) {
  const double waits =
      t.gather_wait + t.reduce_wait + t.pipeline_wait_forward + t.pipeline_wait_backward + t.publish_wait;
  return std::max(0.0, t.total - waits) * 1e3;
}

void ComputeTimeObserver::OnStepEnd(const StepEvent&, const StepResult& result) { ms_ += ComputeMs(result.timings); }

double ComputeTimeObserver::TakeMs() {
  const double ms = ms_;
  ms_ = 0;
  return ms;
}

absl::StatusOr<StragglerReport> ShareComputeTimes(Communicator& group, double compute_ms) {
  const float mine = static_cast<float>(compute_ms);
  std::vector<float> all(static_cast<size_t>(group.size()));
  RETURN_IF_ERROR(group.AllGather(&mine, all.data(), 1, DType::kF32)->Wait());
  return SlowestOf(std::vector<double>(all.begin(), all.end()));
}

}  // namespace zeroshard
