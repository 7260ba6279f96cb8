// StepPlan: what the engine derives from a model and its options before any
// buffer or communicator exists — per-unit layouts and roles, gradient
// buckets, and the train and evaluation step programs. A pure function of
// (model, options, dp size), so `zeroshard schedule` prints exactly the
// program a run executes.
#ifndef ZEROSHARD_ENGINE_STEP_PLAN_H_
#define ZEROSHARD_ENGINE_STEP_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine_options.h"
#include "engine/step_program.h"
#include "nn/model.h"
#include "sharding/flat_param_layout.h"
#include "sharding/grad_reducer.h"

namespace zeroshard {

struct UnitPlan {
  bool has_params = false;
  bool trainable = true;  // its own parameters (true without any)
  // Units whose parameters it reads: itself first when it has any, then the
  // owners of what it borrows, each once.
  std::vector<int> needs;
  // A parameter of another unit that it reads, in borrowed_params() order.
  struct Borrowed {
    int owner = 0;
    int64_t offset = 0;  // in the owner's flat buffer
    std::vector<int64_t> shape;
  };
  std::vector<Borrowed> borrowed;
  bool backward = true;      // false in a leading run of units that train nothing
  bool input_grad = true;    // whether anything before it needs d/d(its input)
  bool checkpointed = false;  // activations recomputed before its backward
};

struct StepPlan {
  std::vector<FlatParamLayout> layouts;  // by unit, laid out for dp ranks
  std::vector<UnitPlan> units;
  std::vector<GradBucket> buckets;
  std::vector<std::string> metric_names;  // the last unit's
  StepProgram train;
  StepProgram eval;
  // Per bucket, the staging slot its reduce-scatter uses (buckets in flight
  // at once use different slots).
  std::vector<int> staging_slots;
};

// Errors: the model fails Model::Validate, a NAMED checkpointing unit does
// not exist (kInvalidArgument naming engine.activation_checkpointing.units),
// a layout cannot be made.
absl::StatusOr<StepPlan> PlanDataParallelStep(const Model& model, const EngineOptions& options, int dp_size);

// What OPTIMIZER issues for `plan` under `options` (the program builder's
// optimizer_collectives).
std::vector<IssuedCollective> OptimizerCollectives(const StepPlan& plan, const EngineOptions& options);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_STEP_PLAN_H_
