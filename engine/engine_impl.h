// EngineImpl: the facade behind engine/engine.h. It owns the engine's
// resources (engine/engine_resources.h) and its components, each with one
// job:
//   ShardedState      (sharded_state.h)      the shards, optimizer, reducer, scaler, schedule, counters
//   StepExecutor      (step_executor.h)      runs a step program action by action over a RunContext
//   PipelineTransport (pipeline_transport.h) the pipeline's SEND_*/RECV_* protocol
//   OptimizerPhase    (optimizer_phase.h)    TIED_REDUCE ... SCALER_UPDATE
//   Evaluator         (evaluator.h)          Evaluate and GatherParam
// and implements set-up (fingerprints, allocation, initial weights), the
// training step's frame (its span, the observers' step events), the state
// view, observers and the trace. Private to //engine (Bazel visibility:
// //engine/... and //tests/engine/...); everything else uses engine.h, its
// state view and its observers.
//
// Thread-compatible, like Engine.
#ifndef ZEROSHARD_ENGINE_ENGINE_IMPL_H_
#define ZEROSHARD_ENGINE_ENGINE_IMPL_H_

#include <cstdint>
#include <map>
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
#include "engine/engine.h"
#include "engine/engine_options.h"
#include "engine/engine_resources.h"
#include "engine/evaluator.h"
#include "engine/memory_plan.h"
#include "engine/observer.h"
#include "engine/optimizer_phase.h"
#include "engine/pipeline_transport.h"
#include "engine/sharded_state.h"
#include "engine/state_view.h"
#include "engine/step_executor.h"
#include "engine/step_plan.h"
#include "nn/model.h"
#include "proto/engine_config.pb.h"

namespace zeroshard {

// The communicators Engine::Create takes from a grid for `config`
// (kInvalidArgument when the grid's shard groups differ from the config's).
absl::StatusOr<EngineComms> CommsForGrid(const EngineConfig& config, ProcessGrid* grid);

// kUnimplemented for an engine.offload tier the engine does not run.
absl::Status OffloadSupported(const EngineOptions& options);

// The state view (engine/state_view.h) over a ShardedState.
class EngineStateViewImpl final : public EngineStateView {
 public:
  EngineStateViewImpl() = default;
  // After the state exists: its optimizer's state kinds follow the fixed three.
  void Init(ShardedState* state, DType compute_dtype);

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
  // Whether the kind lives off the device for this unit: on the NVMe tier,
  // or in host offload's buffers.
  bool Streamed(int unit, int kind) const;

  ShardedState* state_ = nullptr;
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
  const Model& model() const override { return *res_.model; }
  std::vector<std::string> ParamNames() const override;
  EngineStats stats() const override;
  const MemoryTracker& memory() const override { return res_.tracker; }
  MemoryTracker& memory() override { return res_.tracker; }
  const MemoryPlan& memory_plan() const override { return memory_plan_; }
  int64_t memory_limit() const override { return memory_limit_; }
  CommStats comm_stats() const override;
  std::map<std::string, CommStats> comm_stats_by_group() const override;
  std::map<std::string, std::vector<int>> comm_group_world_ranks() const override;
  Timeline* timeline() override { return res_.timeline.get(); }
  bool trace_due() const override {
    return res_.timeline != nullptr && !trace_written_ && trace_steps_ > 0 && traced_steps_ >= trace_steps_;
  }
  absl::StatusOr<TraceFileInfo> WriteTrace() override;
  void AddObserver(EngineObserver* observer) override;
  void RemoveObserver(EngineObserver* observer) override;
  EngineStateView& state() override { return state_view_; }
  const EngineStateView& state() const override { return state_view_; }
  const EngineOptions& options() const override { return res_.options; }
  const StepPlan& plan() const override { return res_.plan; }
  EngineCoordinates coordinates() const override;
  const GradReducer& reducer() const override { return state_->reducer(); }
  int64_t gathers(int unit) const override {
    const UnitShard* shard = state_->unit_shard(unit);
    return shard == nullptr ? 0 : shard->gathers();
  }
  Communicator& control() override { return *res_.comms.control; }
  Communicator& shard_group() override { return *res_.comms.dp; }
  Communicator* replica_group() override { return res_.comms.replica; }
  const LossScaler& loss_scaler() const override { return state_->scaler(); }
  void RestoreProgress(int64_t step, int64_t skipped_steps) override;
  void RestoreLossScaler(double scale, int64_t clean_streak, int hysteresis_left, int64_t overflows) override;

  // For the engine's own tests: a unit's shard (null for a unit of another
  // pipeline stage).
  UnitShard* unit_shard(int unit) { return state_->unit_shard(unit); }
  // The NVMe tier's store (null without one), for fault tests.
  OffloadStore* offload_store() { return state_->offload(); }
  ParamShardStore* param_shard_store() { return state_->param_store(); }

 private:
  EngineImpl() = default;
  // engine.cc: set-up.
  absl::Status Init(const EngineConfig& config);
  absl::Status CheckFingerprints(const EngineConfig& config, const absl::Status& local);
  // The memory plan against the rank's limit (CheckMemoryPlan's refusal).
  absl::Status CheckMemory();
  // The sharded state, its initial weights and the components over it.
  absl::Status Allocate();
  int checkpoint_dp_rank() const;
  // engine_train_step.cc: the training step, between the observers' step
  // events (TrainStep).
  absl::StatusOr<StepResult> RunTrainStep(absl::Span<const Batch> micro_batches);
  // Whether each step checks the measured peak RSS against the limit
  // (CheckMeasuredPeakRss): when engine.memory_limit_mib is set or a class
  // is on NVME, i.e. the run was sized against the limit.
  bool ChecksMeasuredPeakRss() const;
  // engine_trace.cc.
  absl::Status InitTrace(const LoggingConfig& logging);

  // First: the components point into it, and it outlives them.
  EngineResources res_;
  std::unique_ptr<ShardedState> state_;
  MemoryPlan memory_plan_;    // CheckMemory's, without activations
  int64_t memory_limit_ = 0;  // the limit it was checked against
  std::unique_ptr<PipelineTransport> transport_;
  std::unique_ptr<OptimizerPhase> optimizer_phase_;
  std::unique_ptr<StepExecutor> executor_;
  std::unique_ptr<Evaluator> evaluator_;
  EngineStateViewImpl state_view_;
  std::string trace_path_;
  int64_t trace_steps_ = 0;
  int64_t traced_steps_ = 0;
  bool trace_written_ = false;
  absl::StatusOr<TraceFileInfo> trace_result_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_ENGINE_IMPL_H_
