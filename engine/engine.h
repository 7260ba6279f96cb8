// Engine: trains a Model with ZeRO stages 0-3 over the data-parallel group
// (docs/architecture.md, docs/sharding.md). This header, with
// engine/state_view.h and engine/observer.h, is the whole contract: a
// trainer trains, evaluates and reads counters; a checkpoint saves and
// loads through the state view and the plan queries; tools and tests watch
// and inject faults through observers. The implementation
// (engine/engine_impl.h) is private to //engine.
//
// One TrainStep runs the step program built at Create
// (engine/data_parallel_program.h): for each of the
// gradient_accumulation_steps micro-batches, forward then backward over the
// units, with the gathers, releases and gradient reductions of the ZeRO
// stage placed between them, then the optimizer. Loss and gradients are
// those of the global mean Σ loss sum / Σ loss weight over every rank and
// micro-batch (nn/unit.h): micro-batches with different numbers of valid
// tokens weigh correctly. Gradient clipping, the overflow check (f16 loss
// scaling: a step with a non-finite gradient changes nothing and is counted
// as skipped) and the norm span the whole data-parallel group.
//
// Numerics (docs/sharding.md): for one dp size the four stages give bitwise
// equal weights, and a run is bitwise repeatable.
//
// Errors come back on every rank alike with the same code: Create agrees on
// the model, the config and its own allocations; TrainStep and Evaluate
// agree on the batches' signatures (names, dtypes, shapes) and on the
// step's staging buffers in the one small collective that starts them;
// GatherParam agrees on its buffer before gathering. A failure inside a
// unit's Forward/Backward on one rank only cannot be agreed on; the comm
// watchdog bounds it. After a failure past the start of a step the engine
// refuses further calls (kFailedPrecondition quoting it): the ranks'
// collective sequences may be half done.
//
// Thread-compatible: one thread drives an Engine. Not copyable.
#ifndef ZEROSHARD_ENGINE_ENGINE_H_
#define ZEROSHARD_ENGINE_ENGINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "comm/comm_stats.h"
#include "comm/communicator.h"
#include "comm/process_grid.h"
#include "core/memory_tracker.h"
#include "core/timeline.h"
#include "engine/engine_options.h"
#include "engine/memory_plan.h"
#include "engine/step_plan.h"
#include "engine/step_program.h"
#include "engine/trace_writer.h"
#include "nn/model.h"
#include "proto/engine_config.pb.h"
#include "sharding/flat_param_layout.h"
#include "sharding/grad_reducer.h"
#include "sharding/loss_scaler.h"

namespace zeroshard {

// Wall-clock seconds of one step's phases on this rank.
struct StepTimings {
  double forward = 0;       // FORWARD actions and the gathers among them
  double backward = 0;      // RECOMPUTE/BACKWARD actions, their gathers, reduction launches and waits
  double gather_wait = 0;   // blocked waiting for parameter all-gathers (stage 3)
  double reduce_wait = 0;   // blocked waiting for gradient reduce-scatters
  // Pipeline stages: blocked for a neighbour's activations (within forward)
  // or gradients (within backward). A stage's idle time in the schedule is
  // these plus the wait for its sends to drain after the last action
  // (within total only).
  double pipeline_wait_forward = 0;
  double pipeline_wait_backward = 0;
  double optimizer = 0;     // norm all-reduce, clipping, update, parameter publication
  double publish_wait = 0;  // blocked in the optimizer phase's collectives (norm, gathers)
  double total = 0;
};

// A metric the last unit declares (Unit::metric_names), as Σsum / Σweight.
struct NamedMetric {
  std::string name;
  double value = 0;
};

// The NVMe tier's I/O during one step (docs/offload_streaming.md); zeros
// without it.
struct StepIo {
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
  double busy_seconds = 0;  // wall time with a request in flight
};

struct StepResult {
  int64_t step = 0;          // optimizer steps taken so far (a skipped step does not count)
  float loss = 0;            // Σ loss sum / Σ loss weight over the global batch
  double loss_weight = 0;    // Σ loss weight (tokens or examples the loss covers)
  std::vector<NamedMetric> metrics;
  float grad_norm = 0;       // global L2 norm of the mean's gradient, before clipping
  float lr = 0;              // rate this step used (or would have used, if skipped)
  bool skipped = false;      // overflow or non-finite norm: no weight, optimizer state or step changed
  bool overflow = false;     // some rank had a non-finite gradient element (after scaling)
  double loss_scale = 1;       // the scale this step's backward used (1 unless f16 compute)
  double next_loss_scale = 1;  // the scale after this step's update (the next step's)
  int64_t skipped_steps = 0;   // steps skipped so far, this one included
  int64_t overflows = 0;       // overflowing steps so far (the loss scaler's count)
  int64_t rows = 0;            // rows (sequences, examples) in the global batch
  StepTimings timings;
  StepIo io;
};

struct EvalResult {
  float loss = 0;  // Σ loss sum / Σ loss weight over every rank's batch
  double loss_weight = 0;
  std::vector<NamedMetric> metrics;
};

// Counters a trainer or benchmark reads after steps.
struct EngineStats {
  int64_t step = 0;           // optimizer steps taken
  int64_t skipped_steps = 0;  // steps skipped (overflow)
  int peak_gathered_units = 0;    // most units gathered or in flight at once (stage 3)
  int peak_kept_activations = 0;  // most (micro-batch, unit) activations kept at once
};

// This rank's place in the job. The dp group is shard groups × replicas
// (hybrid sharding, docs/parallelism.md; without it one shard group of all
// of dp and one replica).
struct EngineCoordinates {
  int dp_rank = 0;             // in all of dp (the grid's)
  int dp_size = 1;
  int shard_rank = 0;          // in the group ZeRO shards over
  int shard_size = 1;
  int replica_rank = 0;        // in the replica group (ranks holding the same shard)
  int replicas = 1;
  // In the dp-wide layout checkpoints are written in: shard_rank ·
  // replicas + replica_rank (dp_rank without hybrid sharding).
  int checkpoint_dp_rank = 0;
  int tp_rank = 0;
  int tp_size = 1;
  int stage = 0;               // pipeline stage
  int stages = 1;
};

class EngineObserver;   // engine/observer.h
class EngineStateView;  // engine/state_view.h

class Engine {
 public:
  virtual ~Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Collective over the grid's dp group; the grid must outlive the engine.
  // Errors: the model is invalid or the config unusable (kInvalidArgument /
  // kUnimplemented naming the field), the ranks were given different models
  // or configs (kFailedPrecondition), an allocation failed on some rank
  // (kResourceExhausted) — on every rank.
  // `observers` (not owned, outliving the engine) are added before
  // anything else, so they also see Create's events (OnBeforeAllocation).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config, ProcessGrid* grid,
                                                        std::unique_ptr<Model> model,
                                                        const std::vector<EngineObserver*>& observers = {});
  // The same over one data-parallel communicator, which then also carries
  // the engine's control traffic (it must outlive the engine and work on the
  // engine's device: kInvalidArgument naming both otherwise).
  static absl::StatusOr<std::unique_ptr<Engine>> CreateWithCommunicator(
      const EngineConfig& config, Communicator* dp, std::unique_ptr<Model> model,
      const std::vector<EngineObserver*>& observers = {});

  // One optimizer step over this rank's micro-batches: exactly
  // gradient_accumulation_steps of them, host tensors, micro-batch m with
  // the same signature on every rank. kInvalidArgument on every rank if any
  // rank's batches are malformed or differ.
  virtual absl::StatusOr<StepResult> TrainStep(absl::Span<const Batch> micro_batches) = 0;

  // Loss and metrics over every rank's batch (forward only, no update).
  virtual absl::StatusOr<EvalResult> Evaluate(const Batch& batch) = 0;

  // The full f32 master value of parameter `name` in the shape users see
  // (every tp slice in place, vocabulary padding dropped; collective: every
  // rank calls it). kNotFound, on every rank, for an unknown name.
  virtual absl::StatusOr<std::vector<float>> GatherParam(absl::string_view name) = 0;

  virtual const Model& model() const = 0;
  // Every parameter name, owned ones, in unit and declaration order.
  virtual std::vector<std::string> ParamNames() const = 0;
  virtual EngineStats stats() const = 0;
  // Bytes per category (docs/sharding.md says what each holds).
  virtual const MemoryTracker& memory() const = 0;
  virtual MemoryTracker& memory() = 0;
  // The rank's memory plan as Engine::Create checked it (no activations:
  // it does not know the micro-batch shape) and the limit it was checked
  // against (docs/offload.md, "The memory planner").
  virtual const MemoryPlan& memory_plan() const = 0;
  virtual int64_t memory_limit() const = 0;
  // Counters of the dp data communicator (including Create's collectives);
  // under hybrid sharding the shard and the replica group's summed.
  virtual CommStats comm_stats() const = 0;
  // Counters of every data communicator this rank has, by group: "dp" (or,
  // under hybrid sharding, "dp_shard" and "dp_replica"), and
  // "tp", "pp", "embed" and "world" (the step's world-wide sums: norm,
  // overflow flag, loss) where the layout has them; when dp is the whole job
  // "world" is dp itself and counted there. Control traffic is not counted.
  // A step's comm_bytes is the sum over groups of bytes_sent.
  virtual std::map<std::string, CommStats> comm_stats_by_group() const = 0;
  // The world ranks of each group comm_stats_by_group names, in group-rank
  // order (ProcessGrid::WorldRanksOf); empty lists when the engine was made
  // over one communicator (CreateWithCommunicator). With the host topology
  // they say which groups' bytes cross hosts (InterHostBytesSent,
  // comm/host_topology.h).
  virtual std::map<std::string, std::vector<int>> comm_group_world_ranks() const = 0;

  // Timeline trace (engine.logging.trace_path; docs/metrics.md): from
  // Create on, the engine records its first engine.logging.trace_steps
  // TrainSteps (0: every one) — each action of the step program with when
  // its collectives ran, waits, the optimizer, and memory per category.
  // Null without a trace_path. Callers may add spans of their own
  // (evaluation, checkpoints) while it records, from the driving thread.
  virtual Timeline* timeline() = 0;
  // The recorded window is complete and WriteTrace has not run yet.
  virtual bool trace_due() const = 0;
  // Collective over dp: writes every rank's events as one Chrome trace to
  // trace_path (engine/trace_writer.h) and stops recording. Once written,
  // later calls return the first result without communicating.
  // kFailedPrecondition without a trace_path, or on a rank whose engine is
  // unusable after a failed step (do not call it then: stop the job).
  virtual absl::StatusOr<TraceFileInfo> WriteTrace() = 0;

  // Observers (engine/observer.h): not owned; each must outlive the engine
  // or be removed first. Adding one twice adds it once; removing one that
  // is not there does nothing.
  virtual void AddObserver(EngineObserver* observer) = 0;
  virtual void RemoveObserver(EngineObserver* observer) = 0;

  // This rank's training state per unit and kind, readable and writable
  // (engine/state_view.h). Valid as long as the engine.
  virtual EngineStateView& state() = 0;
  virtual const EngineStateView& state() const = 0;

  // The plan and layout, fixed at Create. The plan (engine/step_plan.h)
  // holds each unit's flat layout over the shard group and role (trainable,
  // checkpointed, which pipeline stage computes and holds it), the gradient
  // buckets and the train and evaluation step programs this rank runs.
  virtual const EngineOptions& options() const = 0;
  virtual const StepPlan& plan() const = 0;
  int num_units() const { return static_cast<int>(plan().layouts.size()); }
  const FlatParamLayout& layout(int unit) const { return plan().layouts[unit]; }
  bool trainable(int unit) const { return plan().units[unit].trainable; }
  const StepProgram& train_program() const { return plan().train; }
  const StepProgram& eval_program() const { return plan().eval; }
  // Whether each unit's activations are recomputed (activation checkpointing).
  std::vector<bool> checkpointed_units() const;
  // Whether each unit is checkpointed selectively (keeps its GEMMs' inputs
  // and outputs, recomputes the rest in its backward).
  std::vector<bool> selective_units() const;
  virtual EngineCoordinates coordinates() const = 0;
  // The reducer's buckets (units, bytes per reduction), in plan order.
  virtual const GradReducer& reducer() const = 0;
  // All-gathers of unit's parameters issued so far (stage 3; 0 for a unit
  // this rank does not hold).
  virtual int64_t gathers(int unit) const = 0;

  // The communicators a caller may run its own collectives on, in step
  // with every rank: `control` spans every rank of the job on host memory
  // (agreements, checkpoints); `shard_group` is the group ZeRO shards over
  // and `replica_group` hybrid sharding's replica group (null without it).
  virtual Communicator& control() = 0;
  virtual Communicator& shard_group() = 0;
  virtual Communicator* replica_group() = 0;

  // The loss scaler (its type is kNone unless compute is f16).
  virtual const LossScaler& loss_scaler() const = 0;
  // Checkpoint loading: the optimizer steps (AdamW bias correction and the
  // LR schedule continue from them) and skipped steps taken so far, and the
  // loss scaler's state (ignored by an engine without a scaler). Local: no
  // collective; every rank must restore the same values.
  virtual void RestoreProgress(int64_t step, int64_t skipped_steps) = 0;
  virtual void RestoreLossScaler(double scale, int64_t clean_streak, int hysteresis_left, int64_t overflows) = 0;

 protected:
  Engine() = default;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_ENGINE_H_
