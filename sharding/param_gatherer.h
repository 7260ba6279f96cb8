// ParamGatherer: stage 3's just-in-time gathering of unit parameters.
//
// A unit i "needs" itself and the owners of the parameters it borrows
// (GPT-2's head needs "embed" for the tied wte). Forward walks units 0..L-1,
// backward L-1..0. At each unit the gatherer:
//   Acquire: issues the all-gathers of what the unit needs (if not already
//            gathered or in flight), then those of the next `prefetch` units
//            of the pass, then waits for the unit's own;
//   After:   releases each needed unit whose last use in this pass this was,
//            unless it is persistent (numel < persistence_threshold: kept
//            until ReleaseAll at the end of the step) or, after forward,
//            reshard_after_forward is off (kept until its backward).
// So a non-persistent unit is gathered once per pass (twice per micro-batch
// with resharding), including a tied owner, which stays gathered from its
// first to its last use in a pass. With stages 0-2 every call is a no-op.
//
// Bound on what is gathered at once (asserted by tests): the units needed by
// the current unit and the next `prefetch` ones, plus persistent units, plus
// tied owners held across the pass. Thread-compatible.
#ifndef ZEROSHARD_SHARDING_PARAM_GATHERER_H_
#define ZEROSHARD_SHARDING_PARAM_GATHERER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sharding/unit_shard.h"

namespace zeroshard {

struct GatherOptions {
  int prefetch = 1;
  int64_t persistence_threshold = 0;
  bool reshard_after_forward = true;
};

class ParamGatherer {
 public:
  // `units` in forward order; needs[i] lists the units unit i reads (itself
  // first). kInvalidArgument for prefetch < 0 or a bad unit index.
  static absl::StatusOr<std::unique_ptr<ParamGatherer>> Create(std::vector<UnitShard*> units,
                                                               std::vector<std::vector<int>> needs,
                                                               const GatherOptions& options);

  absl::Status AcquireForward(int unit) { return Acquire(unit, /*forward=*/true); }
  absl::Status AfterForward(int unit);
  absl::Status AcquireBackward(int unit) { return Acquire(unit, /*forward=*/false); }
  absl::Status AfterBackward(int unit);
  // Releases everything (end of step or of an evaluation).
  absl::Status ReleaseAll();

  bool persistent(int unit) const { return persistent_[unit]; }
  const std::vector<int>& needs(int unit) const { return needs_[unit]; }
  // Most units gathered or in flight at once, since creation.
  int peak_live_units() const { return peak_live_; }

 private:
  ParamGatherer() = default;
  absl::Status Acquire(int unit, bool forward);
  void CountLive();

  std::vector<UnitShard*> units_;
  std::vector<std::vector<int>> needs_;
  GatherOptions options_;
  bool active_ = false;  // stage 3
  std::vector<bool> persistent_;
  std::vector<int> last_forward_use_;   // per unit: highest i needing it
  std::vector<int> last_backward_use_;  // per unit: lowest i needing it
  int peak_live_ = 0;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_PARAM_GATHERER_H_
