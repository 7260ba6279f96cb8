// Engine: trains a Model with ZeRO stages 0-3 over the dp communicator
// (DESIGN.md §6). The engine owns the order of unit calls: it gathers
// parameters before a unit runs (stage 3), releases them after, launches
// gradient reductions as units finish their backward, and runs the sharded
// optimizer.
//
// One TrainStep, for k = gradient_accumulation_steps micro-batches:
//   for each micro-batch: forward units 0..L-1, backward L-1..0 with d(loss)/
//     d(mean loss) = scale/k (scale: the loss scale, 1 unless f16);
//     reductions (ReduceScatter kAvg over dp in the reduce dtype, bucketed by
//     GradReducer) per micro-batch (ACCUMULATE) or after the last (DEFER):
//     stages 0, 2, 3 launch a bucket as soon as its last unit's backward ends
//     and finish it while the next bucket's units compute; stage 1 reduces at
//     the end of the micro-batch's backward;
//   then one AllReduce(sum) over dp of [local sum of squares of the gradient
//   shard / scale^2, local mean loss, local non-finite flag 0/1]: the flag,
//   not raw values, decides overflow (MPI's MAX with NaN is order-dependent);
//   dp is the only group while tp = pp = 1, so this one all-reduce covers
//   "every group" (with tp/pp it must run on the world communicator);
//   if any rank flagged, or the norm is not finite, the step is skipped: no
//   weight, optimizer state or step counter changes; otherwise the shard is
//   multiplied once by min(1, clip/(norm+1e-6))/scale (nothing at scale 1
//   without clipping), the optimizer runs on the f32 master region and the
//   parameters are published, rounded to the compute dtype (stage 0: full
//   copy; stages 1-2: in-place AllGather; stage 3: shard copy); finally the
//   loss scaler moves (sharding/loss_scaler.h) and may stop the run at its
//   floor (kFailedPrecondition, on every rank).
// Stage 0 all-reduces as ReduceScatter + AllGather of the gradients, so every
// stage sums in the same order: for one dp size all stages give bitwise equal
// weights (f32, bf16 and f16 alike), and a run is bitwise repeatable.
//
// Precision (DESIGN.md §7): parameters, activations and full gradients are in
// the compute dtype (f32, bf16, f16); units accumulate in f32 inside their
// kernels; master weights, optimizer state and the reduced gradient shard are
// f32. Gathers move compute-dtype shards, so a unit is cast once per publish,
// never per use.
//
// Activation checkpointing: a checkpointed unit's Forward output feeds the
// next unit as usual but its SavedActivations are dropped and its input is
// kept (kActivations); right before its backward, after its parameters are
// acquired (gathered under stage 3), the engine calls Forward again on the
// kept input and uses the rebuilt SavedActivations. The kernels are
// deterministic, so weights are bitwise those of no checkpointing. The
// automatic policies never pick the last unit (its backward follows its
// forward at once: nothing to save).
//
// Batches: each rank passes its own k micro-batches (B, T) of inputs and
// targets. Which global sequences go where is data/batch_plan.h's rule
// (sequence j of the step -> micro-batch j/(dp·B), rank (j/B)%dp, row j%B).
//
// Errors are returned on every rank alike: Create compares model and config
// fingerprints across dp ranks; TrainStep/Evaluate agree on the batch shapes
// with one small AllReduce before any other collective; GatherParam checks
// the name locally (every rank has the same names) before communicating.
// A failure inside a unit's Forward/Backward on one rank only (e.g. a token
// >= V on that rank) cannot be agreed on; the comm watchdog bounds it. After
// any failure past the batch agreement the engine refuses further calls
// (kFailedPrecondition quoting the failure): its buffers and the ranks'
// collective sequences may be half done.
//
// Thread-compatible: one thread drives an Engine. Not copyable.
#ifndef ZEROSHARD_ENGINE_ENGINE_H_
#define ZEROSHARD_ENGINE_ENGINE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/process_grid.h"
#include "core/memory_tracker.h"
#include "core/timeline.h"
#include "engine/engine_options.h"
#include "engine/trace_writer.h"
#include "nn/model.h"
#include "proto/config.pb.h"
#include "sharding/flat_param_layout.h"
#include "sharding/grad_reducer.h"
#include "sharding/loss_scaler.h"
#include "sharding/lr_schedule.h"
#include "sharding/param_gatherer.h"
#include "sharding/sharded_optimizer.h"
#include "sharding/unit_shard.h"

namespace zeroshard {

// Wall-clock seconds of one step's phases on this rank.
struct StepTimings {
  double forward = 0;        // unit forwards, gathers included
  double backward = 0;       // unit backwards, gathers and reduction launches included
  double gather_wait = 0;    // blocked waiting for parameter all-gathers (stage 3)
  double reduce_wait = 0;    // blocked waiting for gradient reduce-scatters
  double optimizer = 0;      // norm all-reduce, clipping, update, parameter publication
  double publish_wait = 0;   // blocked in the optimizer phase's collectives (norm, gathers)
  double total = 0;
};

struct StepResult {
  int64_t step = 0;        // optimizer steps taken so far (a skipped step does not count)
  float loss = 0;          // mean over the global batch
  float grad_norm = 0;     // global L2 norm before clipping
  float lr = 0;            // rate this step used (or would have used, if skipped)
  bool skipped = false;    // overflow or non-finite norm: no weight, optimizer state or step changed
  bool overflow = false;   // some dp rank had a non-finite gradient element (after scaling)
  double loss_scale = 1;       // the scale this step's backward used (1 unless f16 compute)
  double next_loss_scale = 1;  // the scale after this step's update (the next step's)
  int64_t skipped_steps = 0;   // steps skipped so far, this one included
  int64_t overflows = 0;       // overflowing steps so far (the loss scaler's count)
  int64_t tokens = 0;      // tokens in the global batch
  StepTimings timings;
};

class Engine {
 public:
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Collective over grid->dp(). The grid must outlive the engine. Errors:
  // the model is invalid or the config unusable (kInvalidArgument /
  // kUnimplemented naming the field), or the dp ranks were given different
  // models or configs (kFailedPrecondition, on every rank).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config, ProcessGrid* grid,
                                                        std::unique_ptr<Model> model);
  // The same over an explicit dp communicator (which must outlive the engine).
  static absl::StatusOr<std::unique_ptr<Engine>> CreateWithCommunicator(const EngineConfig& config,
                                                                        Communicator* dp,
                                                                        std::unique_ptr<Model> model);

  // One optimizer step over this rank's micro-batches (exactly
  // gradient_accumulation_steps of them, all (B, T) i32 on the CPU, the same
  // B and T on every rank). kInvalidArgument on every rank if any rank's
  // batch is malformed.
  absl::StatusOr<StepResult> TrainStep(absl::Span<const TokenBatch> micro_batches);

  // Mean loss over every rank's batch (forward only, no update).
  absl::StatusOr<float> Evaluate(const TokenBatch& batch);

  // The full f32 master value of parameter `name` (collective: every rank
  // calls it). kNotFound, on every rank, for an unknown name.
  absl::StatusOr<std::vector<float>> GatherParam(absl::string_view name);

  const EngineOptions& options() const { return options_; }
  const Model& model() const { return *model_; }
  int num_units() const { return static_cast<int>(layouts_.size()); }
  const FlatParamLayout& layout(int unit) const { return layouts_[unit]; }
  // Every parameter name, owned ones, in unit and declaration order.
  std::vector<std::string> ParamNames() const;
  int64_t step() const { return step_; }
  // The loss scaler (checkpoint save/restore of its state).
  LossScaler& loss_scaler() { return *scaler_; }
  // Units whose activations are recomputed (activation checkpointing).
  const std::vector<bool>& checkpointed_units() const { return checkpointed_; }

  // Test hook: called on every rank after the step's gradient reduction and
  // before the overflow check, once per unit, with the count of steps
  // attempted before this one (skipped ones included), the unit, and this
  // rank's f32 reduced (still scaled) gradient shard. Tests poison it.
  using GradHook = std::function<void(int64_t attempt, int unit, float* grad_shard, int64_t numel)>;
  void SetGradHookForTesting(GradHook hook) { grad_hook_ = std::move(hook); }
  // For checkpoint loading (checkpoint/engine_checkpoint.h): the optimizer
  // whose state buffers it fills, and the counters it restores: optimizer
  // steps (AdamW bias correction and the LR schedule continue from them) and
  // skipped steps (StepResult::skipped_steps continues).
  ShardedOptimizer& optimizer() { return *optimizer_; }
  void RestoreCounters(int64_t step, int64_t skipped_steps) {
    step_ = step;
    skipped_steps_ = skipped_steps;
    attempts_ = step + skipped_steps;
  }
  int64_t skipped_steps() const { return skipped_steps_; }
  // The dp communicator (checkpoint save/load run their collectives on it).
  Communicator& dp() { return *dp_; }

  // Timeline trace (engine.logging.trace_path; docs/metrics.md): from
  // Create on, the engine records its first engine.logging.trace_steps
  // TrainSteps (0: every one) — each unit's forward, backward and
  // recomputation, gathers and reductions with when they ran, waits, the
  // optimizer, and memory per category. Null without a trace_path. Callers
  // may add spans of their own (evaluation, checkpoints) while it records,
  // from the thread that drives the engine.
  Timeline* timeline() { return timeline_.get(); }
  // The recorded window is complete and WriteTrace has not run yet.
  bool trace_due() const {
    return timeline_ != nullptr && !trace_written_ && trace_steps_ > 0 && traced_steps_ >= trace_steps_;
  }
  // Collective over dp: writes every rank's events as one Chrome trace to
  // trace_path (engine/trace_writer.h) and stops recording. Once written,
  // later calls return the first result without communicating.
  // kFailedPrecondition without a trace_path, or on a rank whose engine is
  // unusable after a failed step (do not call it then: stop the job).
  absl::StatusOr<TraceFileInfo> WriteTrace();

  // Bytes per category; see sharding/unit_shard.h for what each holds.
  const MemoryTracker& memory() const { return tracker_; }
  MemoryTracker& memory() { return tracker_; }
  // Counters of the dp communicator (including Create's fingerprint check).
  CommStats comm_stats() const { return dp_->Stats(); }
  // Most stage-3 units gathered or in flight at once so far.
  int peak_gathered_units() const { return gatherer_->peak_live_units(); }
  const ParamGatherer& gatherer() const { return *gatherer_; }
  const GradReducer& reducer() const { return *reducer_; }
  UnitShard& unit_shard(int unit) { return *shards_[unit]; }

 private:
  Engine() = default;
  absl::Status Init(const EngineConfig& config);
  absl::Status CheckFingerprints(const EngineConfig& config, const absl::Status& local);
  absl::Status InitParams();
  absl::Status ResolveCheckpointedUnits();
  absl::Status AgreeOnBatch(absl::Span<const TokenBatch> batches);
  absl::Status ParamViews(int unit, std::vector<TensorView>* params, std::vector<TensorView>* grads);
  absl::Status ForwardPass(const TokenBatch& batch, bool training, std::vector<Buffer>* outs,
                           std::vector<std::unique_ptr<SavedActivations>>* saved, float* loss, StepTimings* t);
  absl::Status BackwardPass(const TokenBatch& batch, bool reduce, std::vector<std::unique_ptr<SavedActivations>>* saved,
                            StepTimings* t);
  absl::Status RunStep(absl::Span<const TokenBatch> micro_batches, StepResult* result);
  absl::Status FinishStep(float local_loss, StepResult* result);
  // engine.logging.trace_path/trace_steps; on dp rank 0, whether the
  // trace's directory is writable (so a run fails at Create, not at its end).
  absl::Status InitTrace(const LoggingConfig& logging);
  // A "memory" counter sample of every category's current bytes.
  void TraceMemory();
  // A collective of the optimizer phase and what it moves, for WaitAll.
  struct IssuedWork {
    std::chrono::steady_clock::time_point issued;
    UnitShard* shard;
    int64_t bytes;
    std::unique_ptr<Work> work;
  };
  // Waits for each in order, drawing "<what> <unit>" on the timeline.
  absl::Status WaitAll(std::vector<IssuedWork>& works, absl::string_view what);
  // kFailedPrecondition quoting broken_ once a failure left collectives or
  // buffers half done (a unit's error, a collective's error).
  absl::Status CheckUsable() const;

  EngineOptions options_;
  Communicator* dp_ = nullptr;
  std::unique_ptr<Model> model_;
  MemoryTracker tracker_;
  // Before the shards and the reducer, which point to it: destroyed after them.
  std::unique_ptr<Timeline> timeline_;
  ComputeContext compute_;
  std::vector<FlatParamLayout> layouts_;
  // Per unit: (owner unit, offset in owner's flat buffer, shape) of each
  // borrowed parameter, in borrowed_params() order.
  struct Borrowed {
    int owner = 0;
    int64_t offset = 0;
    std::vector<int64_t> shape;
  };
  std::vector<std::vector<Borrowed>> borrowed_;
  std::vector<std::unique_ptr<UnitShard>> shards_;
  std::unique_ptr<ParamGatherer> gatherer_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<ShardedOptimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  int64_t step_ = 0;
  std::unique_ptr<LossScaler> scaler_;
  int64_t skipped_steps_ = 0;
  int64_t attempts_ = 0;
  GradHook grad_hook_;
  // Per unit: whether its activations are recomputed, and (during a step)
  // the input kept for the recomputation (kActivations).
  std::vector<bool> checkpointed_;
  std::vector<Buffer> kept_inputs_;
  absl::Status broken_;
  std::string trace_path_;
  int64_t trace_steps_ = 0;
  int64_t traced_steps_ = 0;
  bool trace_written_ = false;
  absl::StatusOr<TraceFileInfo> trace_result_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_ENGINE_H_
