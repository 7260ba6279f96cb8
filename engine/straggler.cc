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

absl::StatusOr<StragglerReport> ShareComputeTimes(Communicator& group, double compute_ms) {
  const float mine = static_cast<float>(compute_ms);
  std::vector<float> all(static_cast<size_t>(group.size()));
  RETURN_IF_ERROR(group.AllGather(&mine, all.data(), 1, DType::kF32)->Wait());
  StragglerReport r;
  for (int i = 0; i < group.size(); ++i) {
    if (all[i] > all[r.slowest_rank]) r.slowest_rank = i;
  }
  r.slowest_ms = all[r.slowest_rank];
  std::vector<float> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  r.median_ms = n % 2 == 1 ? sorted[n / 2] : 0.5 * (double{sorted[n / 2 - 1]} + sorted[n / 2]);
  return r;
}

}  // namespace zeroshard
