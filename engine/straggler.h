// The straggler report (docs/metrics.md, "straggler"): every rank's compute
// time over a logging interval — its steps' time minus the time it was
// blocked in collectives, so a rank that waits for a slow one does not look
// slow itself — shared with one small collective, and the slowest rank
// against the median. A trainer adds up its rank's compute time with a
// ComputeTimeObserver on the engine (engine/observer.h).
#ifndef ZEROSHARD_ENGINE_STRAGGLER_H_
#define ZEROSHARD_ENGINE_STRAGGLER_H_

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "engine/engine.h"
#include "engine/observer.h"
#include "engine/straggler_report.h"

namespace zeroshard {

// A step's compute milliseconds: total minus the waits StepTimings records
// (gathers, reductions, pipeline transfers, the optimizer's collectives).
double ComputeMs(const StepTimings& t);

// Adds up ComputeMs of every training step the engine completes (skipped
// ones included), for the rank's share of a logging interval.
class ComputeTimeObserver : public EngineObserver {
 public:
  void OnStepEnd(const StepEvent& step, const StepResult& result) override;
  // The milliseconds since the last call (or since it was added), and a
  // fresh count.
  double TakeMs();

 private:
  double ms_ = 0;
};

// Collective over `group` (host memory; every rank calls it at the same
// steps): one all-gather of each rank's compute milliseconds.
absl::StatusOr<StragglerReport> ShareComputeTimes(Communicator& group, double compute_ms);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_STRAGGLER_H_
