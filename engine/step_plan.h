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
  // Selectively checkpointed: its forward keeps only what its selective form
  // keeps (Unit::SupportsSelectiveCheckpointing) and its backward recomputes
  // the rest; never also `checkpointed`.
  bool selective = false;
  // Pipeline: this rank runs the unit (it is in one of the stage's chunks);
  // holds its state (runs it, or keeps a mirror copy of a unit on another
  // stage whose parameters one of its units borrows); and whether the
  // unit's weight is shared with another stage (held on both ends of the
  // embedding group: gradients summed over it before the update). With
  // pp = 1 every unit is computed and held, none tied.
  // A mirror keeps the compute parameters and their gradient only: the
  // master and the optimizer state stay on the owning stage, which sends
  // the updated parameters over the embedding group (TIED_PUBLISH).
  bool computed = true;
  bool held = true;
  bool mirror = false;  // held but computed on another stage
  bool tied = false;
  int stage = 0;        // the pipeline stage that computes it

  // Whether this rank keeps the unit's master: held and not a mirror (a
  // frozen unit's too).
  bool keeps_master() const { return held && !mirror; }
  // Whether it also keeps optimizer state (an optimizer region): a master
  // of a trainable unit with parameters.
  bool optimized() const { return keeps_master() && trainable && has_params; }
  // Whether this rank has the unit's gradients (a mirror's included).
  bool has_grads() const { return held && trainable && has_params; }
};

struct StepPlan {
  std::vector<FlatParamLayout> layouts;  // by unit, laid out for dp ranks
  std::vector<UnitPlan> units;
  // Pipeline: stages, this rank's stage, and chunk c = units
  // [chunk_begin[c], chunk_begin[c + 1]) on stage c % stages.
  int stages = 1;
  int stage = 0;
  std::vector<int> chunk_begin;
  // Over the units this rank holds that train.
  std::vector<GradBucket> buckets;
  std::vector<std::string> metric_names;  // the last unit's
  StepProgram train;
  StepProgram eval;
  // Per bucket, the staging slot its reduce-scatter uses (buckets in flight
  // at once use different slots).
  std::vector<int> staging_slots;
};

// The staging slot of each of `num_buckets` buckets of `program`: a REDUCE
// takes the lowest free slot; its WAIT_REDUCE frees it, or, for a bucket
// whose REDUCE lists a "dp_replica" all-reduce (hybrid sharding), the next
// WAIT_REDUCE does unless no other bucket is in flight, as GradReducer
// completes replica all-reduces (sharding/grad_reducer.h).
std::vector<int> StagingSlots(const StepProgram& program, int num_buckets);

// Errors: the model fails Model::Validate, a NAMED checkpointing unit does
// not exist (kInvalidArgument naming engine.activation_checkpointing.units),
// a layout cannot be made.
absl::StatusOr<StepPlan> PlanDataParallelStep(const Model& model, const EngineOptions& options, int dp_size);

// A micro-batch's shape, when the planner knows it: `rows` of
// `sequence_length` tokens (rows 0: not known).
struct MicroBatchShape {
  int64_t rows = 0;
  int64_t sequence_length = 1;
};

// The plan of pipeline stage `stage` (options.pipeline.stages > 1, or
// virtual stages): chunks from options.pipeline.partition or by cost, the
// stage's units and mirrors, and its pipeline step programs. Also
// kInvalidArgument for a partition that does not fit the model, or a unit
// borrowing from another stage unless it is the last stage borrowing from
// the first (the embedding group's tie). With `micro_batch` known, each
// transfer lists the bytes of the activation (or its gradient) it carries,
// the unit's EstimateOutputActivationBytes (a tp rank's rows of it under
// sequence parallelism); otherwise, or where the unit does not estimate,
// 0 bytes.
absl::StatusOr<StepPlan> PlanPipelineStep(const Model& model, const EngineOptions& options, int dp_size, int stage,
                                          const MicroBatchShape& micro_batch = {});

// PlanDataParallelStep or PlanPipelineStep, as options ask.
// The bytes per optimizer-region element the NVMe tier streams (4 for the
// master, each optimizer state kind's bytes, 4 for the gradient shard at
// stages 2-3), 0 when nothing streams (docs/offload_streaming.md).
int64_t StreamedBytesPerElement(const EngineOptions& options);
// engine.offload.grads: NVME (stages 2-3): the bytes of each of the two
// grad staging buffers, the largest bucket's units' shards (f32) each
// rounded up with AlignIo; 0 when the gradients do not stream.
int64_t GradStagingBytes(const StepPlan& plan, const EngineOptions& options);

// engine.offload.params: NVME at stage 3: by unit, the bytes of the rank's
// compute-dtype shard that live in the params file (0 for a unit not held
// or with an empty shard); empty when parameters do not stream.
std::vector<int64_t> StreamedParamShardBytes(const StepPlan& plan, const EngineOptions& options);
// The param slots the parameter shards' store allocates at stage 3: the
// most either program uses (at least 1), as if engine.offload.params were
// NVME when it is not (the memory planner's floor); 0 below stage 3.
int ParamShardSlots(const StepPlan& plan, const EngineOptions& options);

absl::StatusOr<StepPlan> PlanStep(const Model& model, const EngineOptions& options, int dp_size, int stage);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_STEP_PLAN_H_
