// The straggler report (docs/metrics.md, "straggler"): every rank's compute
// time over a logging interval — its steps' time minus the time it was
// blocked in collectives, so a rank that waits for a slow one does not look
// slow itself — shared with one small collective, and the slowest rank
// against the median.
#ifndef ZEROSHARD_ENGINE_STRAGGLER_H_
#define ZEROSHARD_ENGINE_STRAGGLER_H_

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "engine/engine.h"
#include "engine/straggler_report.h"

namespace zeroshard {

// A step's compute milliseconds: total minus the waits StepTimings records
// (gathers, reductions, pipeline transfers, the optimizer's collectives).
double ComputeMs(const StepTimings& t);

// Collective over `group` (host memory; every rank calls it at the same
// steps): one all-gather of each rank's compute milliseconds.
absl::StatusOr<StragglerReport> ShareComputeTimes(Communicator& group, double compute_ms);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_STRAGGLER_H_
