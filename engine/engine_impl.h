// EngineImpl: the engine's internals behind engine/engine.h — the step
// program and its executor, the per-unit shards, the reducer and the
// optimizer. Private to //engine (Bazel visibility: //engine/... and
// //tests/engine/...); everything else uses engine.h, its state view and
// its observers.
//
// The executor runs the step program (engine/step_program.h) one action at a
// time. Its state is keyed by (micro-batch, unit): the output of a FORWARD
// until the next unit consumed it, the saved activations (or, for a
// checkpointed unit, the kept input) until the BACKWARD, and the gradient
// of the unit's output until the unit's BACKWARD consumed it.
//
// Thread-compatible, like Engine.
#ifndef ZEROSHARD_ENGINE_ENGINE_IMPL_H_
#define ZEROSHARD_ENGINE_ENGINE_IMPL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "core/memory_tracker.h"
#include "core/timeline.h"
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/observer.h"
#include "engine/state_view.h"
#include "engine/step_plan.h"
#include "engine/step_program.h"
#include "nn/model.h"
#include "nn/unit.h"
#include "proto/engine_config.pb.h"
#include "sharding/flat_param_layout.h"
#include "sharding/grad_reducer.h"
#include "sharding/loss_scaler.h"
#include "sharding/lr_schedule.h"
#include "sharding/sharded_optimizer.h"
#include "sharding/unit_shard.h"

namespace zeroshard {

// The communicators an engine runs on. Data communicators carry tensors:
// `dp` the gathers and reductions, `world` (every rank of the job) the
// norm/loss/overflow all-reduce, `pp` the pipeline's activations and
// gradients, `embedding` the tied weight's gradient sum between the first
// and last stage. `control` (every rank of the job, host memory) carries the
// agreements: fingerprints, batch signatures, error codes, checkpoints,
// traces. Without pipeline parallelism world may be dp and control may be dp
// too (when dp works on host memory); pp and embedding may then be null.
struct EngineComms {
  // The group ZeRO shards over: all of dp, or under hybrid sharding the
  // rank's shard group, with `replica` (below) the ranks holding the same
  // shard.
  Communicator* dp = nullptr;
  Communicator* control = nullptr;
  Communicator* world = nullptr;
  Communicator* pp = nullptr;
  Communicator* embedding = nullptr;
  Communicator* tp = nullptr;  // the tensor-parallel group (null: tp 1)
  Communicator* replica = nullptr;  // hybrid sharding's replica group (null: none)
};

// The communicators Engine::Create takes from a grid for `config`
// (kInvalidArgument when the grid's shard groups differ from the config's).
absl::StatusOr<EngineComms> CommsForGrid(const EngineConfig& config, ProcessGrid* grid);

class EngineImpl;

// The state view (engine/state_view.h) over an EngineImpl's shards and
// optimizer.
class EngineStateViewImpl final : public EngineStateView {
 public:
  explicit EngineStateViewImpl(EngineImpl* engine) : engine_(engine) {}
  // After the optimizer exists: its state kinds follow the fixed three.
  void Init();

  int num_units() const override;
  const std::vector<StateKindInfo>& kinds() const override { return kinds_; }
  StateRegion region(int unit, int kind) const override;
  void* data(int unit, int kind) override;
  const void* data(int unit, int kind) const override;
  absl::Status Read(int unit, int kind, int64_t offset, int64_t count, void* host_out) const override;
  absl::Status Write(int unit, int kind, int64_t offset, int64_t count, const void* host_in) override;
  absl::Status Commit() override;

 private:
  absl::Status CheckRange(int unit, int kind, int64_t offset, int64_t count) const;

  EngineImpl* engine_;
  std::vector<StateKindInfo> kinds_;
};

class EngineImpl final : public Engine {
 public:
  // Collective over comms.dp and comms.control (see Engine::Create).
  static absl::StatusOr<std::unique_ptr<EngineImpl>> Create(const EngineConfig& config, EngineComms comms,
                                                            std::unique_ptr<Model> model,
                                                            const std::vector<EngineObserver*>& observers = {});
  ~EngineImpl() override;

  // Engine.
  absl::StatusOr<StepResult> TrainStep(absl::Span<const Batch> micro_batches) override;
  absl::StatusOr<EvalResult> Evaluate(const Batch& batch) override;
  absl::StatusOr<std::vector<float>> GatherParam(absl::string_view name) override;
  const Model& model() const override { return *model_; }
  std::vector<std::string> ParamNames() const override;
  EngineStats stats() const override;
  const MemoryTracker& memory() const override { return tracker_; }
  MemoryTracker& memory() override { return tracker_; }
  CommStats comm_stats() const override;
  std::map<std::string, CommStats> comm_stats_by_group() const override;
  Timeline* timeline() override { return timeline_.get(); }
  bool trace_due() const override {
    return timeline_ != nullptr && !trace_written_ && trace_steps_ > 0 && traced_steps_ >= trace_steps_;
  }
  absl::StatusOr<TraceFileInfo> WriteTrace() override;
  void AddObserver(EngineObserver* observer) override;
  void RemoveObserver(EngineObserver* observer) override;
  EngineStateView& state() override { return state_view_; }
  const EngineStateView& state() const override { return state_view_; }
  const EngineOptions& options() const override { return options_; }
  const StepPlan& plan() const override { return plan_; }
  EngineCoordinates coordinates() const override;
  const GradReducer& reducer() const override { return *reducer_; }
  int64_t gathers(int unit) const override { return shards_[unit] == nullptr ? 0 : shards_[unit]->gathers(); }
  Communicator& control() override { return *control_; }
  Communicator& shard_group() override { return *dp_; }
  Communicator* replica_group() override { return replica_; }
  const LossScaler& loss_scaler() const override { return *scaler_; }
  void RestoreProgress(int64_t step, int64_t skipped_steps) override;
  void RestoreLossScaler(double scale, int64_t clean_streak, int hysteresis_left, int64_t overflows) override;

  // Internals.
  Device device() const { return options_.device; }
  // Null for a unit of another pipeline stage.
  UnitShard* unit_shard(int unit) { return shards_[unit].get(); }
  const UnitShard* unit_shard(int unit) const { return shards_[unit].get(); }
  // The optimizer, and the region of `unit` in it: -1 for a frozen unit
  // (no optimizer state).
  ShardedOptimizer& optimizer() { return *optimizer_; }
  const ShardedOptimizer& optimizer() const { return *optimizer_; }
  int optimizer_region(int unit) const { return regions_[unit]; }
  int checkpoint_dp_rank() const;
  int replicas() const { return replica_ == nullptr ? 1 : replica_->size(); }
  // Ranks of the whole dp group (shard group size times replicas).
  int dp_size() const { return dp_->size() * replicas(); }
  // This rank's tensor-parallel coordinate (0 of 1 without a tp group).
  int tp_rank() const { return tp_ == nullptr ? 0 : tp_->rank(); }
  int tp_size() const { return tp_ == nullptr ? 1 : tp_->size(); }
  // Collective over dp: rounds every unit's master weights into its compute
  // parameters, as a step's publication does (after a checkpoint load).
  absl::Status PublishMasterWeights();

 private:
  // Calls `event` on every observer, in the order they were added.
  template <typename F>
  void Notify(const F& event) {
    for (EngineObserver* o : observers_) event(*o);
  }
  // OnReducedGradient / OnFinalGradient for every trainable unit.
  void NotifyGradients(void (EngineObserver::*event)(const GradientEvent&), int64_t attempt);
  void NotifyGradient(void (EngineObserver::*event)(const GradientEvent&), int64_t attempt, int unit);

  // A pipeline transfer is a header (tensor count, dtypes, shapes) then one
  // message per tensor, on the pp communicator.
  struct TransferReceive {
    int peer = 0;
    int tag = 0;                       // the header's; tensor i uses tag + 1 + i
    std::vector<int32_t> header;
    Buffer header_device;              // where it lands on a device pp communicator
    std::unique_ptr<Work> header_work;
    bool payload_posted = false;
    ActivationPack pack;               // allocated once the header arrived
    std::vector<std::unique_ptr<Work>> payload;
  };
  struct TransferSend {
    std::vector<int32_t> header;
    Buffer header_device;              // its device copy on a device pp communicator
    ActivationPack pack;               // kept alive until the sends completed
    std::vector<std::unique_ptr<Work>> works;
  };
  // Executor state of one (micro-batch, unit).
  struct UnitState {
    ActivationPack output;      // FORWARD's output until the next unit consumed it
    std::unique_ptr<SavedActivations> saved;
    ActivationPack kept_input;  // checkpointed: the input RECOMPUTE reads
    bool awaiting_backward = false;
    ActivationPack output_grad;  // d(objective)/d(output), written by the next unit's BACKWARD
    // BACKWARD_INPUT's keep for BACKWARD_WEIGHT (units that split).
    std::unique_ptr<SavedActivations> weight_inputs;
  };
  // The optimizer phase's state within one step (engine_optimizer.cc).
  struct OptimizerPhaseState {
    bool started = false;
    std::vector<double> unit_sumsq;  // NORM_PARTIAL's, by unit; REDUCE_NORM adds them in unit order
    std::vector<bool> counted;       // by unit: its sum of squares counts on this rank
    std::vector<Buffer> full_f32;    // by unit: the all-gathered f32 gradients where the compute dtype is narrower
    bool update = false;             // REDUCE_NORM found the step finite: UPDATE and PUBLISH run
    bool rescale = false;            // unscale, reweigh and clip by `factor`
    float factor = 1.0f;
    std::optional<TraceScope> span;  // "optimizer", from its first action to SCALER_UPDATE
  };
  // Per-run executor context (one TrainStep or Evaluate).
  struct RunContext {
    absl::Span<const Batch> batches;
    bool training = true;
    float loss_seed = 0;  // d(objective)/d(loss sum) the last unit's BACKWARD starts from
    double nominal_weight = 0;  // Σ over ranks and micro-batches of Unit::NominalLossWeight
    StepResult* result = nullptr;
    // Pipeline transfers: receives posted and not consumed yet, keyed by
    // (kind, micro-batch, unit); sends not known complete.
    std::map<std::tuple<int, int, int>, std::unique_ptr<TransferReceive>> receives;
    std::vector<std::unique_ptr<TransferSend>> sends;
    std::vector<LossTerms> losses;   // per micro-batch
    std::vector<std::vector<UnitState>> state;  // [micro-batch][unit]
    StepTimings* timings = nullptr;
    bool in_backward = false;
    // BEGIN_STEP: the caller's host batches, the device copies the units
    // read (GPU only) and their memory, and whether the step started (a
    // failure before that was agreed and leaves the engine usable).
    absl::Span<const Batch> host_batches;
    std::vector<Buffer> batch_storage;
    std::vector<Batch> device_batches;
    bool started = false;
    OptimizerPhaseState optimizer;
  };
  // A collective of the optimizer phase and what it moves, for WaitAll.
  struct IssuedWork {
    std::chrono::steady_clock::time_point issued;
    const UnitShard* shard;
    int64_t bytes;
    std::unique_ptr<Work> work;
  };

  EngineImpl() = default;
  // engine.cc: set-up.
  absl::Status Init(const EngineConfig& config);
  absl::Status CheckFingerprints(const EngineConfig& config, const absl::Status& local);
  absl::Status Allocate();
  absl::Status InitParams();
  // engine_device.cc: the kernels' context on options_.device (on CUDA its
  // stream, cuBLAS handle and workspace, and the allocation stream), after
  // checking that the data communicators move that device's buffers.
  absl::Status InitDevice();
  // Points the NCCL communicators back at the legacy default stream: they
  // outlive the engine's compute stream (the grid owns them).
  void DetachDevice();
  // Every data communicator the engine was given (those it was not are null).
  std::vector<Communicator*> DataCommunicators() const { return {dp_, replica_, world_, pp_, embedding_, tp_}; }
  // On a GPU, device copies of the host batches into *copies (the units
  // read those; the host ones still give the signature and the nominal
  // weight), their memory owned by *storage until the step ends. On the CPU
  // nothing: the batches are used as they are (BatchesToRun).
  absl::Status StageBatches(absl::Span<const Batch> batches, std::vector<Buffer>* storage,
                            std::vector<Batch>* copies);
  static absl::Span<const Batch> BatchesToRun(absl::Span<const Batch> host, const std::vector<Batch>& copies) {
    return copies.empty() ? host : absl::MakeConstSpan(copies);
  }
  // A collective over host floats on a data communicator: directly when it
  // moves host buffers, through a device buffer when it moves device ones.
  // `issue` gets the input and output pointers (equal for in-place ops);
  // `wait` (default Work::Wait) waits for what it returned.
  absl::Status HostCollective(Communicator& comm, const float* in, int64_t in_count, float* out, int64_t out_count,
                              const std::function<std::unique_ptr<Work>(const void*, void*)>& issue,
                              const std::function<absl::Status(Work&)>& wait = nullptr);
  // engine_step.cc: the executor. TrainStep (engine_observe.cc) is this
  // between the observers' step events.
  absl::StatusOr<StepResult> RunTrainStep(absl::Span<const Batch> micro_batches);
  absl::Status AgreeOnBatches(absl::Span<const Batch> batches, const absl::Status& local, double* nominal_weight);
  absl::Status RunProgram(const StepProgram& program, RunContext* run);
  absl::Status RunAction(const Action& action, RunContext* run);
  // engine_observe.cc: RunAction between the observers' action events, with
  // the waits it added to run->timings.
  absl::Status RunObservedAction(const Action& action, int index, RunContext* run);
  // engine_transfer.cc: SEND_* / RECV_* and their completion.
  absl::Status PostSend(const Action& action, RunContext* run);
  absl::Status PostReceive(const Action& action, RunContext* run);
  // Completes the receive (kind, micro-batch, unit) into its slot, if one
  // was posted.
  absl::Status CompleteReceive(int kind, int micro_batch, int unit, RunContext* run);
  // Posts the payloads of receives whose headers arrived (no blocking).
  absl::Status ProgressTransfers(RunContext* run);
  // Allocates a received header's tensors and posts their receives.
  absl::Status PostPayload(TransferReceive& r);
  absl::Status FinishTransfers(RunContext* run);
  absl::Status ParamViews(int unit, std::vector<TensorView>* params, std::vector<TensorView>* grads);
  UnitContext ContextFor(const RunContext& run, int micro_batch, int unit) const;
  void CountLive();
  // BEGIN_STEP.
  absl::Status BeginStep(RunContext* run);
  // engine_optimizer.cc: the optimizer phase's actions.
  absl::Status RunOptimizerAction(const Action& action, RunContext* run);
  void StartOptimizerPhase(RunContext* run);
  absl::Status TiedReduce(int unit);
  absl::Status NormPartial(int bucket, RunContext* run);
  absl::Status ReduceNorm(RunContext* run);
  absl::Status Update(int bucket, RunContext* run);
  absl::Status Publish(int bucket, RunContext* run);
  absl::Status ScalerUpdate(RunContext* run);
  absl::Status WaitAll(std::vector<IssuedWork>& works, absl::string_view what);
  // engine_trace.cc.
  absl::Status InitTrace(const LoggingConfig& logging);
  void TraceMemory();
  // "dp" without pipeline stages (the job is the dp group), "world" with them.
  std::string ControlGroup() const;
  // kFailedPrecondition quoting broken_ once a failure left collectives or
  // buffers half done.
  absl::Status CheckUsable() const;

  EngineOptions options_;
  Communicator* dp_ = nullptr;
  Communicator* replica_ = nullptr;
  Communicator* control_ = nullptr;
  Communicator* world_ = nullptr;
  Communicator* pp_ = nullptr;
  Communicator* embedding_ = nullptr;
  Communicator* tp_ = nullptr;
  std::unique_ptr<Model> model_;
  // CUDA stream, cuBLAS handle and workspace (type-erased: the header
  // compiles without CUDA); destroyed after every buffer below.
  std::shared_ptr<void> cuda_resources_;
  // Pinned host staging for batch copies to the device (grown as needed;
  // reused once the step's read-back has passed the previous copies).
  PinnedHostBuffer batch_staging_;
  MemoryTracker tracker_;
  // Before the shards and the reducer, which point to it: destroyed after them.
  std::unique_ptr<Timeline> timeline_;
  ComputeContext compute_;
  // Layouts, unit roles, buckets and the programs (engine/step_plan.h).
  StepPlan plan_;
  // Per unit: its optimizer region, -1 when frozen or without parameters.
  std::vector<int> regions_;
  std::vector<std::unique_ptr<UnitShard>> shards_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<ShardedOptimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<LossScaler> scaler_;
  int64_t step_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t attempts_ = 0;
  int peak_gathered_ = 0;
  int peak_kept_ = 0;
  int kept_now_ = 0;
  std::vector<EngineObserver*> observers_;  // not owned
  EngineStateViewImpl state_view_{this};
  absl::Status broken_;
  std::string trace_path_;
  int64_t trace_steps_ = 0;
  int64_t traced_steps_ = 0;
  bool trace_written_ = false;
  absl::StatusOr<TraceFileInfo> trace_result_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_ENGINE_IMPL_H_
