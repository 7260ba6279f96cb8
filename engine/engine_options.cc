#include "engine/engine_options.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/config_validation.h"
#include "engine/optimizer_config.h"

namespace zeroshard {
namespace {

DType FromProto(DTypeProto d) {
  switch (d) {
    case BF16:
      return DType::kBF16;
    case F16:
      return DType::kF16;
    default:
      return DType::kF32;
  }
}

}  // namespace

absl::StatusOr<EngineOptions> EngineOptionsFromConfig(const EngineConfig& c) {
  EngineOptions o;
  const ZeroConfig& z = c.zero();
  if (z.stage() < 0 || z.stage() > 3) {
    return absl::InvalidArgumentError(absl::StrCat("engine.zero.stage: ", z.stage(), " is out of range [0, 3]"));
  }
  ASSIGN_OR_RETURN(o.zero, ZeroPolicy::ForStage(z.stage()));
  o.gather.prefetch = z.prefetch();
  o.gather.persistence_threshold = z.persistence_threshold();
  o.gather.reshard_after_forward = z.reshard_after_forward();
  o.bucket_bytes = z.bucket_bytes();
  if (const std::vector<std::string> errors = ZeroShardingErrors(c); !errors.empty()) {
    return absl::InvalidArgumentError(errors.front());
  }
  const int dp = c.parallel().dp();
  o.sharding.shard_group_size = z.shard_group_size();
  o.sharding.quantize_weights = z.weight_quantization() == ZeroConfig::INT8;
  o.sharding.quantize_gradients = z.gradient_quantization() == ZeroConfig::INT8;
  o.sharding.quantization_block = z.quantization_block();
  o.sharding.error_feedback = z.error_feedback();
  o.sharding.quantize_replicas = z.replica_quantization() == ZeroConfig::INT8;
  o.sharding.replicas = z.shard_group_size() > 0 && dp >= 1 ? dp / z.shard_group_size() : 1;
  o.sharding.alignment = kDefaultShardAlignment * o.sharding.replicas;
  o.reduce_mode = z.reduce_mode() == ZeroConfig::DEFER ? ReduceMode::kDefer : ReduceMode::kAccumulate;
  if (c.gradient_accumulation_steps() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("engine.gradient_accumulation_steps: ",
                                                   c.gradient_accumulation_steps(), " is out of range [1, inf)"));
  }
  o.accumulation_steps = c.gradient_accumulation_steps();

  const PrecisionConfig& p = c.precision();
  if (p.master_dtype() != F32) {
    return absl::InvalidArgumentError(absl::StrCat("engine.precision.master_dtype: ", DTypeProto_Name(p.master_dtype()),
                                                   ", expected F32"));
  }
  o.compute_dtype = FromProto(p.compute_dtype());
  o.reduce_dtype = FromProto(p.reduce_dtype());
  if (p.has_loss_scale() && p.compute_dtype() != F16) {
    return absl::InvalidArgumentError(absl::StrCat("engine.precision.loss_scale: set but compute_dtype is ",
                                                   DTypeProto_Name(p.compute_dtype()), "; expected F16"));
  }
  if (p.compute_dtype() == F16) {
    const LossScaleConfig& ls = p.loss_scale();
    LossScalerOptions& l = o.loss_scale;
    l.type = ls.type() == LossScaleConfig::STATIC ? LossScaleType::kStatic : LossScaleType::kDynamic;
    l.initial_scale = ls.initial_scale();
    l.growth_factor = ls.growth_factor();
    l.backoff_factor = ls.backoff_factor();
    l.growth_interval = ls.growth_interval();
    l.hysteresis = ls.hysteresis();
    l.min_scale = ls.min_scale();
    l.continue_at_min_scale = ls.continue_at_min_scale();
  }
  const ActivationCheckpointingConfig& ac = c.activation_checkpointing();
  switch (ac.policy()) {
    case ActivationCheckpointingConfig::NONE:
      o.checkpointing.policy = CheckpointPolicy::kNone;
      break;
    case ActivationCheckpointingConfig::EVERY_UNIT:
      o.checkpointing.policy = CheckpointPolicy::kEveryUnit;
      break;
    case ActivationCheckpointingConfig::EVERY_KTH:
      o.checkpointing.policy = CheckpointPolicy::kEveryKth;
      break;
    case ActivationCheckpointingConfig::NAMED:
      o.checkpointing.policy = CheckpointPolicy::kNamed;
      break;
  }
  if (ac.k() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("engine.activation_checkpointing.k: ", ac.k(), " is out of range [1, inf)"));
  }
  o.checkpointing.k = ac.k();
  o.checkpointing.units.assign(ac.units().begin(), ac.units().end());
  o.checkpointing.selective = ac.selective();
  const ParallelConfig& par = c.parallel();
  if (par.tp() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("engine.parallel.tp: ", par.tp(), " is out of range [1, inf)"));
  }
  o.tensor.size = par.tp();
  o.tensor.sequence_parallel = par.sequence_parallel();
  if (o.tensor.sequence_parallel && o.tensor.size == 1) {
    return absl::InvalidArgumentError(
        "engine.parallel.sequence_parallel: true needs engine.parallel.tp > 1 (is 1)");
  }
  o.tensor.keep_gathered_ln_outputs = par.keep_gathered_ln_outputs();
  if (o.tensor.keep_gathered_ln_outputs && !o.tensor.sequence_parallel) {
    return absl::InvalidArgumentError(
        "engine.parallel.keep_gathered_ln_outputs: true needs engine.parallel.sequence_parallel: true (is false)");
  }
  if (o.tensor.keep_gathered_ln_outputs && o.checkpointing.selective) {
    return absl::InvalidArgumentError(
        "engine.parallel.keep_gathered_ln_outputs: true cannot be combined with "
        "engine.activation_checkpointing.selective: true (which drops the LayerNorm outputs it would keep)");
  }
  o.pipeline.stages = par.pp();
  o.pipeline.virtual_stages = par.virtual_stages();
  switch (par.pipeline_schedule()) {
    case ParallelConfig::GPIPE:
      o.pipeline.schedule = PipelineScheduleKind::kGpipe;
      break;
    case ParallelConfig::ONE_F_ONE_B:
      o.pipeline.schedule = PipelineScheduleKind::kOneFOneB;
      break;
    case ParallelConfig::INTERLEAVED_1F1B:
      o.pipeline.schedule = PipelineScheduleKind::kInterleaved1F1B;
      break;
    case ParallelConfig::ZERO_BUBBLE_H1:
      o.pipeline.schedule = PipelineScheduleKind::kZeroBubbleH1;
      break;
  }
  o.pipeline.partition.assign(par.pp_partition().begin(), par.pp_partition().end());
  o.pipeline.reshard_per_micro_batch = z.has_reshard_after_forward() && z.reshard_after_forward();
  if (par.has_micro_batches()) {
    return absl::InvalidArgumentError(absl::StrCat("engine.parallel.micro_batches: ", par.micro_batches(),
                                                   " is replaced by engine.gradient_accumulation_steps (the "
                                                   "pipeline runs the step's micro-batches)"));
  }
  if (o.pipeline.stages > 1 || o.pipeline.virtual_stages > 1) {
    RETURN_IF_ERROR(ValidatePipelineShape(o.pipeline.schedule,
                                          {o.pipeline.stages, o.pipeline.virtual_stages, o.accumulation_steps}));
  }
  o.device = c.device().type() == DeviceConfig::CUDA ? Device::kCuda : Device::kCpu;

  const OptimizerConfig& opt = c.optimizer();
  ASSIGN_OR_RETURN(o.optimizer, OptimizerOptionsFromConfig(opt));
  o.grad_clip = static_cast<float>(opt.grad_clip());

  const LrScheduleConfig& lr = c.lr_schedule();
  o.lr_schedule.lr = opt.lr();
  o.lr_schedule.min_lr = lr.min_lr();
  o.lr_schedule.warmup_steps = lr.warmup_steps();
  o.lr_schedule.decay_steps = lr.decay_steps();
  switch (lr.type()) {
    case LrScheduleConfig::CONSTANT:
      o.lr_schedule.type = LrScheduleType::kConstant;
      break;
    case LrScheduleConfig::WARMUP_COSINE:
      o.lr_schedule.type = LrScheduleType::kWarmupCosine;
      break;
    case LrScheduleConfig::WARMUP_LINEAR:
      o.lr_schedule.type = LrScheduleType::kWarmupLinear;
      break;
  }
  if (o.lr_schedule.type != LrScheduleType::kConstant && lr.decay_steps() == 0) {
    return absl::InvalidArgumentError(
        "engine.lr_schedule.decay_steps: 0 (meaning the run's steps) must be resolved to the step count before "
        "Engine::Create");
  }
  o.seed = c.seed();
  o.threads_per_rank = c.device().threads_per_rank();
  const OffloadConfig& off = c.offload();
  auto tier = [](OffloadTierProto t) {
    return t == NVME ? OffloadTier::kNvme : t == HOST ? OffloadTier::kHost : OffloadTier::kDevice;
  };
  o.offload.optimizer_state = tier(off.optimizer_state());
  o.offload.master_weights = tier(off.master_weights());
  o.offload.params = tier(off.params());
  o.offload.grads = tier(off.grads());
  o.offload.nvme_dir = off.nvme_dir();
  o.offload.buffer_count = off.buffer_count();
  o.offload.buffer_bytes = off.buffer_bytes();
  o.offload.queue_depth = off.queue_depth();
  o.memory_limit_bytes = c.memory_limit_mib() << 20;
  o.checkpoint_snapshot = c.checkpoint().async_save();
  return o;
}

}  // namespace zeroshard
