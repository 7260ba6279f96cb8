// EngineOptions: the plain-struct form of EngineConfig the engine runs on.
//
// EngineOptionsFromConfig maps the proto and rejects what this engine does
// not do yet (kUnimplemented naming the field) or cannot run (kInvalidArgument
// naming the field and the expected value). The semantic ranges are checked
// by engine/config_validation; this mapping repeats only what the engine
// would otherwise misbehave on.
#ifndef ZEROSHARD_ENGINE_ENGINE_OPTIONS_H_
#define ZEROSHARD_ENGINE_ENGINE_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/device.h"
#include "core/dtype.h"
#include "engine/pipeline_schedule.h"
#include "proto/engine_config.pb.h"
#include "sharding/flat_param_layout.h"
#include "sharding/loss_scaler.h"
#include "sharding/lr_schedule.h"
#include "sharding/sharded_optimizer.h"
#include "sharding/zero_policy.h"

namespace zeroshard {

enum class ReduceMode {
  kAccumulate,  // reduce-scatter every micro-batch into the shard
  kDefer,       // keep full local grads, reduce after the last micro-batch (no_sync)
};

enum class CheckpointPolicy {
  kNone,       // keep every unit's saved activations
  kEveryUnit,  // recompute every unit but the last (see below)
  kEveryKth,   // recompute units whose index is a multiple of k (0, k, 2k, ...), not the last
  // The last unit's backward follows its forward at once, so recomputing it
  // saves no memory; kNamed recomputes it only when named.
  kNamed,      // recompute the units named in `units` (checked by Engine::Create)
};

// ZeRO-3 gathering (where the step program places gathers and releases).
struct GatherOptions {
  int prefetch = 1;
  int64_t persistence_threshold = 0;
  bool reshard_after_forward = true;
};

struct ActivationCheckpointingOptions {
  CheckpointPolicy policy = CheckpointPolicy::kNone;
  int k = 2;
  std::vector<std::string> units;
  // engine.activation_checkpointing.selective: the units the policy names
  // (every unit with policy kNone) keep their GEMMs' inputs and outputs and
  // recompute the rest inside their backward, instead of being recomputed
  // whole.
  bool selective = false;
};

// Pipeline parallelism (docs/parallelism.md).
struct PipelineOptions {
  int stages = 1;          // engine.parallel.pp
  int virtual_stages = 1;  // chunks per stage
  PipelineScheduleKind schedule = PipelineScheduleKind::kOneFOneB;
  std::vector<int> partition;  // units per chunk; empty: by cost
  // ZeRO-3 under pp: gather per micro-batch and pass (reshard_after_forward
  // set explicitly to true) instead of once per step.
  bool reshard_per_micro_batch = false;
};

struct TensorParallelOptions {
  int size = 1;  // engine.parallel.tp: parameters split by their ParamSpec partitions
  // engine.parallel.sequence_parallel: activations between units are each
  // tp rank's rows of the (B·T, C) activation.
  bool sequence_parallel = false;
  // engine.parallel.keep_gathered_ln_outputs (sequence parallelism only).
  bool keep_gathered_ln_outputs = false;
};

// Hybrid sharding and quantized communication (docs/parallelism.md).
struct ShardingOptions {
  // Ranks of dp each shard group holds (0 or dp: one group, full sharding).
  int shard_group_size = 0;
  bool quantize_weights = false;    // stage 3: int8 parameter all-gathers
  bool quantize_gradients = false;  // int8 all-to-all gradient reductions
  int64_t quantization_block = 2048;  // elements per f32 scale
  bool error_feedback = false;      // keep and re-add what quantization dropped
  bool quantize_replicas = false;   // hybrid sharding: int8 replica all-gather
  // dp / shard_group_size: the shard groups that each hold a replica.
  int replicas = 1;
  // Flat-layout shard alignment: kDefaultShardAlignment times `replicas`, so
  // that a shard group's shard is `replicas` whole shards of the dp-wide
  // layout checkpoints are written in.
  int64_t alignment = kDefaultShardAlignment;
};

// Where a state class lives (engine.offload, docs/offload.md).
enum class OffloadTier { kDevice, kHost, kNvme };

struct OffloadOptions {
  OffloadTier optimizer_state = OffloadTier::kDevice;
  OffloadTier master_weights = OffloadTier::kDevice;
  OffloadTier params = OffloadTier::kDevice;  // ZeRO-3 parameter shards
  OffloadTier grads = OffloadTier::kDevice;   // f32 reduced-gradient shards
  std::string nvme_dir;
  int buffer_count = 4;  // 0: the memory planner chooses (ChooseBufferCount)
  int64_t buffer_bytes = 64 << 20;
  int queue_depth = 8;
  // Not a config field: tests set it to run the GPU's host-offload path
  // (engine/host_offload.h) on a CPU device, its copies as memcpy.
  bool host_update_on_cpu_device = false;

  bool any_nvme() const {
    return optimizer_state == OffloadTier::kNvme || master_weights == OffloadTier::kNvme ||
           params == OffloadTier::kNvme || grads == OffloadTier::kNvme;
  }
};

struct EngineOptions {
  // engine.zero.stage's answers (sharding/zero_policy.h).
  ZeroPolicy zero;
  GatherOptions gather;
  ShardingOptions sharding;
  int64_t bucket_bytes = 25 << 20;
  ReduceMode reduce_mode = ReduceMode::kAccumulate;
  int accumulation_steps = 1;
  OptimizerOptions optimizer;
  LrScheduleOptions lr_schedule;
  float grad_clip = 1.0f;  // <= 0: off
  // Parameters, activations and gradients of forward/backward; master and
  // optimizer state are always f32.
  DType compute_dtype = DType::kF32;
  // Gradient reduce-scatters run in this dtype.
  DType reduce_dtype = DType::kF32;
  // kNone unless compute is f16 (then the config's loss_scale, or DYNAMIC
  // with the proto defaults when it is absent).
  LossScalerOptions loss_scale;
  ActivationCheckpointingOptions checkpointing;
  uint64_t seed = 1234;
  int threads_per_rank = 0;  // kernels' CPU threads; 0: cores / ranks
  Device device = Device::kCpu;  // where the model state and compute live
  PipelineOptions pipeline;
  TensorParallelOptions tensor;
  OffloadOptions offload;
  // engine.memory_limit_mib in bytes; 0: the host's available memory
  // divided among its ranks (the memory planner resolves it).
  int64_t memory_limit_bytes = 0;
  // engine.checkpoint.async_save: the memory plan counts the host snapshot
  // of the rank's checkpointed state (MemoryPlan::checkpoint_snapshot_bytes).
  bool checkpoint_snapshot = false;
};

// decay_steps == 0 ("the run's steps") must be resolved by the caller for
// decaying schedules: it is kInvalidArgument here.
absl::StatusOr<EngineOptions> EngineOptionsFromConfig(const EngineConfig& config);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_ENGINE_OPTIONS_H_
