// ShardedState: the training state one rank holds — per unit its UnitShard
// (compute parameters, master weights, gradients), the optimizer and each
// unit's region in it, the gradient reducer, the loss scaler, the learning
// rate schedule, and the step, skipped-step and attempt counters. It is what
// a checkpoint saves and the state view (engine/state_view.h) exposes; the
// executor and the optimizer phase change it, nothing else does.
//
// Thread-compatible. The communicators, tracker, timeline and plan it was
// created with must outlive it.
#ifndef ZEROSHARD_ENGINE_SHARDED_STATE_H_
#define ZEROSHARD_ENGINE_SHARDED_STATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/memory_tracker.h"
#include "core/timeline.h"
#include "engine/engine_options.h"
#include "engine/host_offload.h"
#include "engine/offload_store.h"
#include "engine/param_shard_store.h"
#include "engine/step_plan.h"
#include "kernels/context.h"
#include "nn/model.h"
#include "nn/unit.h"
#include "sharding/grad_reducer.h"
#include "sharding/loss_scaler.h"
#include "sharding/lr_schedule.h"
#include "sharding/sharded_optimizer.h"
#include "sharding/unit_shard.h"

namespace zeroshard {

class ShardedState {
 public:
  // Allocates the shards of the units this stage holds (plan.units[u].held),
  // the reducer over the trainable ones, the optimizer over their masters,
  // the scaler and the schedule. No collective; the weights are not
  // initialised yet (InitParams). `replica` is hybrid sharding's replica
  // group (null: none). A tied weight's mirror (plan.units[u].mirror) gets
  // compute parameters and gradients only; `embedding`, the group of the
  // pipeline ends that hold it, carries the owner's parameters into it
  // (null: no pipeline ties).
  static absl::StatusOr<std::unique_ptr<ShardedState>> Create(const StepPlan& plan, const Model& model,
                                                              const EngineOptions& options, Communicator* dp,
                                                              Communicator* replica, Communicator* embedding,
                                                              MemoryTracker* tracker, const ComputeContext& compute,
                                                              Timeline* timeline);
  ~ShardedState();

  ShardedState(const ShardedState&) = delete;
  ShardedState& operator=(const ShardedState&) = delete;

  // Collective over dp: every unit's master slice from the seeded initialiser
  // (the same values whatever the layout), then published (PublishMasterWeights).
  absl::Status InitParams(const Model& model, uint64_t seed, int tp_rank, int tp_size);
  // Collective over dp: rounds every unit's master weights into its compute
  // parameters, as a step's publication does (after a checkpoint load);
  // then, over the embedding group, every tied unit's owner sends them to
  // its mirror (PublishTiedParams, unit order).
  absl::Status PublishMasterWeights();
  // Collective over the embedding group (and dp on a mirror at stages 1-2):
  // the owner of tied unit `unit` broadcasts its compute parameters — the
  // rank's shard, stage 0's whole buffer — into the mirror's, which stages
  // 1-2 then all-gather over dp. `wait` waits each collective issued (the
  // all-gather only once the broadcast has landed), told its bytes; nothing
  // for a unit with an empty shard. With the parameter shards on the NVMe
  // tier the shard must be bound to a param slot (the step program's
  // WAIT_LOAD; PublishMasterWeights binds slot 0).
  absl::Status PublishTiedParams(int unit, const std::function<absl::Status(Work&, int64_t bytes)>& wait);
  // Whether this rank keeps the unit's master (a mirror does not).
  bool holds_master(int unit) const { return plan_->units[unit].keeps_master(); }
  // Releases every gathered unit, finishes every reduction and the NVMe
  // tier's I/O in flight (errors ignored): the engine is going away.
  void ReleaseAll();

  // The NVMe tier (docs/offload_streaming.md): null unless the master
  // weights or the optimizer state stream (engine.offload: NVME), on every
  // rank alike. A unit's master streams when it has an optimizer region;
  // the optimizer state streams for every region.
  OffloadStore* offload() { return offload_.get(); }
  bool master_streams(int unit) const {
    return offload_ != nullptr && offload_->streams_master() && regions_[unit] >= 0;
  }
  bool state_streams() const { return offload_ != nullptr && offload_->streams_state(); }
  // engine.offload.params: NVME (stage 3): the parameter shards' store,
  // null otherwise; a held unit with a non-empty shard streams.
  ParamShardStore* param_store() { return param_store_.get(); }
  bool params_stream(int unit) const { return param_store_ != nullptr && param_store_->streams(unit); }
  // Waits for every I/O in flight (what reads or writes the state between
  // steps calls it first); the first error. OK without the tier.
  absl::Status DrainIo();
  // The step's I/O of both stores, since the last call.
  OffloadIoDelta TakeIo();
  // Elements [offset, offset + count) of a unit's master to host memory,
  // from wherever it lives.
  absl::Status ReadMaster(int unit, int64_t offset, int64_t count, float* out);

  // Host offload on a GPU (docs/offload.md, "Host offload on GPU"): null
  // unless UsesHostOffload(options). Then every optimizer region's master
  // and state live there, the optimizer runs on the CPU (host_kernels()).
  HostOffload* host_offload() { return host_offload_.get(); }
  bool master_on_host(int unit) const { return host_offload_ != nullptr && regions_[unit] >= 0; }
  const kernels::KernelContext& host_kernels() const { return host_kernels_; }
  // WAIT_REDUCE(bucket) calls it once the reduction is done: at the bucket's
  // last WAIT_REDUCE of the step (one per micro-batch under ACCUMULATE),
  // queues the device → host copy of each of its units' reduced gradient
  // shard. Nothing for stage 0, whose update all-gathers the shards first,
  // nor for a tied unit, whose shard TIED_REDUCE changes: UPDATE fetches
  // those.
  absl::Status FetchReducedGrads(int bucket);
  // Rounds a unit's host master into its compute parameters on the device
  // (queued; HostOffload::OrderParams orders the compute stream after it).
  absl::Status PushHostParams(int unit);

  int num_units() const { return static_cast<int>(shards_.size()); }
  const FlatParamLayout& layout(int unit) const { return plan_->layouts[unit]; }
  // Null for a unit of another pipeline stage.
  UnitShard* unit_shard(int unit) { return shards_[unit].get(); }
  const UnitShard* unit_shard(int unit) const { return shards_[unit].get(); }
  const std::vector<std::unique_ptr<UnitShard>>& shards() { return shards_; }
  // The region of `unit` in the optimizer: -1 for a frozen unit or one
  // without parameters (no optimizer state).
  int optimizer_region(int unit) const { return regions_[unit]; }
  ShardedOptimizer& optimizer() { return *optimizer_; }
  const ShardedOptimizer& optimizer() const { return *optimizer_; }
  GradReducer& reducer() { return *reducer_; }
  const GradReducer& reducer() const { return *reducer_; }
  LossScaler& scaler() { return *scaler_; }
  const LossScaler& scaler() const { return *scaler_; }
  const LrSchedule& schedule() const { return *schedule_; }
  Device device() const { return device_; }

  // Optimizer steps taken, attempts skipped (a non-finite gradient), and
  // attempts made: attempts == step + skipped once a step has finished.
  int64_t step() const { return step_; }
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t attempts() const { return attempts_; }
  void CountStep() { ++step_; }
  void CountSkippedStep() { ++skipped_steps_; }
  void CountAttempt() { ++attempts_; }
  void RestoreProgress(int64_t step, int64_t skipped_steps);

 private:
  ShardedState() = default;

  const StepPlan* plan_ = nullptr;
  Communicator* dp_ = nullptr;
  Communicator* embedding_ = nullptr;
  Device device_ = Device::kCpu;
  bool shards_master_ = false;
  // Per unit: its optimizer region, -1 when frozen or without parameters.
  std::vector<int> regions_;
  std::vector<std::unique_ptr<UnitShard>> shards_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<ShardedOptimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<OffloadStore> offload_;
  std::unique_ptr<ParamShardStore> param_store_;
  std::unique_ptr<HostOffload> host_offload_;
  kernels::KernelContext host_kernels_;
  // Per bucket: WAIT_REDUCE actions in a training step, and those seen.
  std::vector<int64_t> reduce_waits_per_step_;
  std::vector<int64_t> reduce_waits_seen_;
  int64_t step_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t attempts_ = 0;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_SHARDED_STATE_H_
