// Step time of a layout priced with measured costs (engine/cost_profile.h,
// docs/simulator.md), before anything runs.
//
// Data parallel (pp 1): a timed walk of the rank's train program with a
// compute lane and one communication lane, the engine's progress thread:
//   * FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT and RECOMPUTE take
//     the unit's profiled time times `compute_scale` on the compute lane
//     (a split action of a profile without a split: half the fused
//     backward; a fused one of a split profile: input + weight);
//   * GATHER, REDUCE and PUBLISH queue their collectives on the comm lane
//     (each starts when the lane is free and the compute lane has issued
//     it) and return; WAIT_GATHER, WAIT_REDUCE and a RELEASE of a unit in
//     flight block the compute lane until theirs end;
//   * any other action's collectives (TIED_REDUCE, REDUCE_NORM, stage 0's
//     UPDATE) run synchronously once both lanes are free;
//   * UPDATE costs the profile's seconds per element times the elements it
//     updates (the bucket's master shards, whole units at stage 0, or its
//     streamed chunk);
//   * the step ends when both lanes are done. LOAD / STORE (the NVMe tier)
//     and BEGIN_STEP's control agreement are not priced.
// `host`: the cores the layout's ranks share; work (seconds on a
// dedicated core) runs at host.Rate(false) on a lane alone and at
// host.Rate(true) while both lanes of the rank run, all ranks alike. The
// default, no contention.
// A collective on group g of n ranks costs CollectiveSeconds on g's link:
// the profile's fit for g, else its "dp" fit (one host's ranks share one
// transport), else free.
//
// Pipeline (pp > 1): the schedule's timed dry run (SimulatePipelineSchedule)
// with each chunk costing the sum of its units' profiled times and each
// stage boundary the activation's transfer on the "pp" link (else "dp");
// then the slowest stage's optimizer phase, walked as above, with any
// reduction left after its last backward priced as exposed.
#ifndef ZEROSHARD_ENGINE_STEP_TIME_MODEL_H_
#define ZEROSHARD_ENGINE_STEP_TIME_MODEL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine_options.h"
#include "engine/pipeline_plan.h"
#include "engine/cost_profile.h"
#include "engine/step_plan.h"
#include "proto/cost_profile.pb.h"

namespace zeroshard {

struct StepTimePrediction {
  double step_seconds = 0;
  double compute_seconds = 0;    // forward, backward, recompute
  double optimizer_seconds = 0;  // the updates
  double comm_seconds = 0;       // collectives priced, hidden or not
  // Time the compute lane waited for collectives (and, in a pipeline, the
  // schedule's idle time before the optimizer).
  double exposed_seconds = 0;
  double bubble_fraction = 0;  // pipeline: the schedule's overall bubble; 0 otherwise
  // What the prediction left out or substituted, one phrase each, e.g.
  // "group 'pp' priced with the 'dp' link".
  std::vector<std::string> notes;
};

// The per-unit compute of a layout relative to the profiled run: its
// micro-batch elements over the profile's (1 when either is unknown),
// times the profile's tp over the layout's.
double ComputeScale(const CostProfile& profile, int64_t micro_batch_elements, int tp);

// `group_sizes`: the ranks of each group the program names ("dp", and
// "dp_replica", "world" under hybrid sharding). kNotFound naming the unit
// and the profile's source for a unit the profile lacks.
absl::StatusOr<StepTimePrediction> PredictStepTime(const StepPlan& plan, const EngineOptions& options,
                                                   const std::map<std::string, int>& group_sizes,
                                                   double compute_scale, const CostProfile& profile,
                                                   const CoreShare& host = {});

// The pipeline's step; kNotFound as above, the schedule simulation's errors.
absl::StatusOr<StepTimePrediction> PredictPipelineStepTime(const PipelinePlan& plan, const EngineOptions& options,
                                                           int dp, double compute_scale, const CostProfile& profile,
                                                           const CoreShare& host = {});

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_STEP_TIME_MODEL_H_
