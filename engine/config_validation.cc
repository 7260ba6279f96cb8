#include "engine/config_validation.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/config_checker.h"
#include "engine/optimizer_config.h"
#include "engine/optimizer_program.h"
#include "engine/pipeline_schedule.h"
#include "sharding/optimizer_registry.h"
#include "sharding/zero_policy.h"

namespace zeroshard {
namespace {

std::string Lower(const std::string& s) { return absl::AsciiStrToLower(s); }

void CheckZero(const EngineConfig& e, ConfigChecker& c) {
  const ZeroConfig& z = e.zero();
  c.Range("engine.zero.stage", z.stage(), 0, 3);
  c.Range("engine.zero.prefetch", z.prefetch(), 0, 8);
  c.AtLeast("engine.zero.persistence_threshold", z.persistence_threshold(), 0);
  c.AtLeast("engine.zero.bucket_bytes", z.bucket_bytes(), 0);
  for (std::string& error : ZeroShardingErrors(e)) c.Add(std::move(error));
}

void CheckPrecision(const PrecisionConfig& p, ConfigChecker& c) {
  if (p.master_dtype() != F32) {
    c.Add(absl::StrCat("engine.precision.master_dtype: ", DTypeProto_Name(p.master_dtype()), " is not allowed; expected F32"));
  }
  if (p.has_loss_scale()) {
    if (p.compute_dtype() != F16) {
      c.Add(absl::StrCat("engine.precision.loss_scale is set but compute dtype is ", Lower(DTypeProto_Name(p.compute_dtype())),
                         "; loss scaling applies to F16 only"));
    }
    const LossScaleConfig& s = p.loss_scale();
    c.Positive("engine.precision.loss_scale.initial_scale", s.initial_scale());
    if (!(s.growth_factor() > 1)) {
      c.Add(absl::StrCat("engine.precision.loss_scale.growth_factor: ", s.growth_factor(), " is out of range; expected > 1"));
    }
    if (!(s.backoff_factor() > 0 && s.backoff_factor() < 1)) {
      c.Add(absl::StrCat("engine.precision.loss_scale.backoff_factor: ", s.backoff_factor(), " is out of range (0, 1)"));
    }
    c.AtLeast("engine.precision.loss_scale.growth_interval", s.growth_interval(), 1);
    c.AtLeast("engine.precision.loss_scale.hysteresis", s.hysteresis(), 1);
    c.Positive("engine.precision.loss_scale.min_scale", s.min_scale());
    if (s.min_scale() > s.initial_scale()) {
      c.Add(absl::StrCat("engine.precision.loss_scale.min_scale: ", s.min_scale(), " is above initial_scale ",
                         s.initial_scale()));
    }
  }
}

void CheckOptimizer(const OptimizerConfig& o, ConfigChecker& c) {
  for (std::string& e : OptimizerConfigErrors(o)) c.Add(std::move(e));
}

void CheckSchedule(const EngineConfig& e, ConfigChecker& c) {
  const LrScheduleConfig& s = e.lr_schedule();
  c.AtLeast("engine.lr_schedule.warmup_steps", s.warmup_steps(), 0);
  c.AtLeast("engine.lr_schedule.decay_steps", s.decay_steps(), 0);
  if (s.decay_steps() > 0 && s.decay_steps() <= s.warmup_steps()) {
    c.Add(absl::StrCat("engine.lr_schedule.decay_steps: ", s.decay_steps(), " must be greater than warmup_steps ",
                       s.warmup_steps()));
  }
  if (!(s.min_lr() >= 0 && s.min_lr() <= e.optimizer().lr())) {
    c.Add(absl::StrCat("engine.lr_schedule.min_lr: ", s.min_lr(), " is out of range [0, engine.optimizer.lr = ",
                       e.optimizer().lr(), "]"));
  }
  if (s.type() == LrScheduleConfig::CONSTANT && (s.decay_steps() != 0 || s.min_lr() != 0)) {
    c.Add("engine.lr_schedule: decay_steps/min_lr are set but type is CONSTANT");
  }
}

// Which units NAMED names is checked against the model (EngineModelErrors).
void CheckCheckpointing(const EngineConfig& e, ConfigChecker& c) {
  const ActivationCheckpointingConfig& a = e.activation_checkpointing();
  c.AtLeast("engine.activation_checkpointing.k", a.k(), 1);
  if (a.policy() == ActivationCheckpointingConfig::NAMED) {
    if (a.units_size() == 0) c.Add("engine.activation_checkpointing.units: policy NAMED needs at least one unit name");
  } else if (a.units_size() > 0) {
    c.Add(absl::StrCat("engine.activation_checkpointing.units: set but policy is ",
                       ActivationCheckpointingConfig::Policy_Name(a.policy())));
  }
}

PipelineScheduleKind ScheduleKind(ParallelConfig::PipelineSchedule s) {
  switch (s) {
    case ParallelConfig::GPIPE:
      return PipelineScheduleKind::kGpipe;
    case ParallelConfig::INTERLEAVED_1F1B:
      return PipelineScheduleKind::kInterleaved1F1B;
    case ParallelConfig::ZERO_BUBBLE_H1:
      return PipelineScheduleKind::kZeroBubbleH1;
    default:
      return PipelineScheduleKind::kOneFOneB;
  }
}

// The pipeline fields (docs/parallelism.md); the partition's sum and the
// chunk count against the model's units are EngineModelErrors'.
void CheckPipeline(const EngineConfig& e, const ValidationOptions& options, ConfigChecker& c) {
  const ParallelConfig& p = e.parallel();
  if (p.has_micro_batches()) {
    c.Add(absl::StrCat("engine.parallel.micro_batches: ", p.micro_batches(),
                       " is set; a pipeline runs engine.gradient_accumulation_steps micro-batches per step, expected "
                       "engine.parallel.micro_batches unset"));
  }
  c.Range("engine.parallel.virtual_stages", p.virtual_stages(), 1, 1 << 20);
  if (p.pp() == 1) {
    if (p.virtual_stages() != 1) {
      c.Add(absl::StrCat("engine.parallel.virtual_stages: ", p.virtual_stages(), " is set but pp is 1; expected 1"));
    }
    if (p.pp_partition_size() > 0) {
      c.Add(absl::StrCat("engine.parallel.pp_partition: set (", p.pp_partition_size(),
                         " entries) but pp is 1; expected empty"));
    }
    return;
  }
  if (p.pp() < 1 || p.virtual_stages() < 1 || e.gradient_accumulation_steps() < 1) return;  // ranges said so
  PipelineShape shape;
  shape.stages = p.pp();
  shape.virtual_stages = p.virtual_stages();
  shape.micro_batches = e.gradient_accumulation_steps();
  if (absl::Status s = ValidatePipelineShape(ScheduleKind(p.pipeline_schedule()), shape); !s.ok()) {
    c.Add(std::string(s.message()));
  }
  if (p.pp_partition_size() > 0 && p.pp_partition_size() != shape.chunks()) {
    c.Add(absl::StrCat("engine.parallel.pp_partition: ", p.pp_partition_size(),
                       " entries, expected one per chunk: pp x virtual_stages = ", shape.chunks()));
  }
  for (int i = 0; i < p.pp_partition_size(); ++i) {
    if (p.pp_partition(i) < 1) {
      c.Add(absl::StrCat("engine.parallel.pp_partition[", i, "]: ", p.pp_partition(i),
                         " units, expected >= 1 (a chunk with no units)"));
    }
  }
}

void CheckParallel(const EngineConfig& e, int64_t batch, const ValidationOptions& options, ConfigChecker& c) {
  const ParallelConfig& p = e.parallel();
  c.Range("engine.parallel.dp", p.dp(), 1, 1 << 20);
  c.Range("engine.parallel.tp", p.tp(), 1, 1 << 20);
  c.Range("engine.parallel.pp", p.pp(), 1, 1 << 20);
  if (p.sequence_parallel() && p.tp() == 1) {
    c.Add("engine.parallel.sequence_parallel: true needs engine.parallel.tp > 1 (is 1)");
  }
  if (p.keep_gathered_ln_outputs() && !p.sequence_parallel()) {
    c.Add("engine.parallel.keep_gathered_ln_outputs: true needs engine.parallel.sequence_parallel: true (is false)");
  }
  if (p.keep_gathered_ln_outputs() && e.activation_checkpointing().selective()) {
    c.Add("engine.parallel.keep_gathered_ln_outputs: true cannot be combined with "
          "engine.activation_checkpointing.selective: true (which drops the LayerNorm outputs it would keep)");
  }
  CheckPipeline(e, options, c);
  const int64_t product = int64_t{p.dp()} * p.tp() * p.pp();
  if (options.world_size > 0 && product != options.world_size) {
    c.Add(absl::StrCat("engine.parallel: dp*tp*pp = ", product, " but the world has ", options.world_size, " ranks"));
  }
  const int accum = e.gradient_accumulation_steps();
  c.Range("engine.gradient_accumulation_steps", accum, 1, 1 << 20);
  const std::string& field = options.batch_field;
  c.Range(field, batch, 1, 1 << 24);
  if (accum >= 1 && p.dp() >= 1 && batch >= 1 && batch % (int64_t{p.dp()} * accum) != 0) {
    c.Add(absl::StrCat(field, ": ", batch, " does not split evenly over dp ", p.dp(),
                       " x gradient_accumulation_steps ", accum, " = ", int64_t{p.dp()} * accum,
                       "; expected a multiple of ", int64_t{p.dp()} * accum));
  }
}

void CheckRuntime(const EngineConfig& e, ConfigChecker& c) {
  c.Positive("engine.comm.timeout_s", e.comm().timeout_s());
  if (e.device().has_gpu_id()) {
    c.AtLeast("engine.device.gpu_id", e.device().gpu_id(), 0);
    if (e.device().type() != DeviceConfig::CUDA) c.Add("engine.device.gpu_id: set but engine.device.type is CPU");
  }
  if (e.comm().backend() == CommConfig::NCCL && e.device().type() != DeviceConfig::CUDA) {
    c.Add("engine.comm.backend: NCCL needs engine.device.type CUDA; got CPU");
  }
  c.AtLeast("engine.device.threads_per_rank", e.device().threads_per_rank(), 0);
  c.AtLeast("engine.checkpoint.interval", e.checkpoint().interval(), 0);
  c.AtLeast("engine.checkpoint.keep_last", e.checkpoint().keep_last(), 0);
  c.Positive("engine.checkpoint.preempt_deadline_s", e.checkpoint().preempt_deadline_s());
  if (e.checkpoint().async_save() && e.checkpoint().dir().empty()) {
    c.Add("engine.checkpoint.async_save: true needs engine.checkpoint.dir (empty: checkpoints are off)");
  }
  if (e.checkpoint().async_save() && e.checkpoint().interval() == 0) {
    c.Add("engine.checkpoint.async_save: true with engine.checkpoint.interval 0 saves only at the end, with no "
          "training to overlap; expected engine.checkpoint.interval > 0, or async_save false");
  }
  c.AtLeast("engine.logging.interval", e.logging().interval(), 1);
  c.AtLeast("engine.logging.trace_steps", e.logging().trace_steps(), 0);
}

// The bytes per element of the buffers that stream together through one
// staging slot: the master (f32) when it is NVME, and each optimizer state
// kind's when the state is; 4 (one f32 buffer) when nothing streams or the
// optimizer is invalid (reported there).
int64_t StreamedBytesOf(const EngineConfig& e) {
  const OffloadConfig& o = e.offload();
  const OptimizerConfig& optimizer = e.optimizer();
  int64_t bytes = o.master_weights() == NVME ? 4 : 0;
  // The f32 gradient shard streams beside them (stages 2-3, StreamedBytesPerElement).
  if (o.grads() == NVME && e.zero().stage() >= 2) bytes += 4;
  if (o.optimizer_state() == NVME) {
    absl::StatusOr<OptimizerOptions> options = OptimizerOptionsFromConfig(optimizer);
    absl::StatusOr<const Optimizer*> plugin =
        options.ok() ? FindOptimizer(options->name) : absl::StatusOr<const Optimizer*>(options.status());
    if (plugin.ok()) {
      for (const OptimizerStateKind& k : (*plugin)->StateKinds(*options)) bytes += k.bytes_per_element;
    }
  }
  return bytes > 0 ? bytes : 4;
}

// engine.offload.grads: NVME writes each bucket's reduced f32 shard once its
// reduction has landed (docs/offload_streaming.md): stages 2-3 only, where
// the rank keeps an f32 shard at rest.
void CheckGradsOnNvme(const EngineConfig& e, ConfigChecker& c) {
  if (e.zero().stage() < 2) {
    c.Add(absl::StrCat("engine.offload.grads: NVME needs ZeRO stage 2 or 3 (an f32 gradient shard at rest); "
                       "engine.zero.stage is ",
                       e.zero().stage()));
  }
}

// engine.offload and engine.memory_limit_mib (docs/offload.md). What the
// engine does not stream yet is refused, so a config that validates runs.
void CheckOffload(const EngineConfig& e, ConfigChecker& c) {
  const OffloadConfig& o = e.offload();
  const struct {
    const char* name;
    OffloadTierProto tier;
    bool nvme_built;       // the engine streams this class from NVMe
    bool cuda_host_built;  // and keeps it in pinned host memory on a GPU
  } classes[] = {{"optimizer_state", o.optimizer_state(), true, true},
                 {"master_weights", o.master_weights(), true, true},
                 {"params", o.params(), true, false},
                 {"grads", o.grads(), true, false}};
  bool any_nvme = false;
  for (const auto& k : classes) {
    if (k.tier != NVME) continue;
    if (!any_nvme && o.nvme_dir().empty()) {
      c.Add(absl::StrCat("engine.offload.nvme_dir: empty, but engine.offload.", k.name,
                         " is NVME; expected a directory for the offload files"));
    }
    any_nvme = true;
  }
  if (o.params() != DEVICE && e.zero().stage() != 3) {
    c.Add(absl::StrCat("engine.offload.params: ", OffloadTierProto_Name(o.params()),
                       " needs ZeRO stage 3 (parameter shards); engine.zero.stage is ", e.zero().stage()));
  }
  if (o.grads() == NVME) CheckGradsOnNvme(e, c);
  for (const auto& k : classes) {
    if (k.tier == NVME && !k.nvme_built) {
      c.Add(absl::StrCat("engine.offload.", k.name, ": NVME is not supported yet; expected DEVICE"));
    }
    // The engine streams from NVMe on a CPU device only (OffloadSupported).
    if (k.tier == NVME && k.nvme_built && e.device().type() == DeviceConfig::CUDA) {
      c.Add(absl::StrCat("engine.offload.", k.name,
                         ": NVME is not supported yet on engine.device.type CUDA; expected DEVICE or HOST"));
    }
    // On a CPU device HOST is the same memory (accepted; the planner says it
    // frees nothing). On a GPU the optimizer state and the masters live in
    // pinned host memory and the update runs on the CPU (docs/offload.md,
    // "Host offload on GPU"): params and grads stay on the device.
    if (k.tier == HOST && e.device().type() == DeviceConfig::CUDA && !k.cuda_host_built) {
      c.Add(absl::StrCat("engine.offload.", k.name, ": HOST is not supported yet on engine.device.type CUDA; expected "
                         "DEVICE"));
    }
  }
  // The CPU update reads and writes both classes: on a GPU they go to the
  // host together.
  if (e.device().type() == DeviceConfig::CUDA && (o.optimizer_state() == HOST) != (o.master_weights() == HOST)) {
    const bool state_host = o.optimizer_state() == HOST;
    const OffloadTierProto other = state_host ? o.master_weights() : o.optimizer_state();
    c.Add(absl::StrCat("engine.offload.", state_host ? "optimizer_state" : "master_weights",
                       ": HOST on engine.device.type CUDA needs engine.offload.",
                       state_host ? "master_weights" : "optimizer_state",
                       ": HOST too (the update runs on the CPU over both); got ", OffloadTierProto_Name(other)));
  }
  if (o.buffer_count() != 0) c.Range("engine.offload.buffer_count", o.buffer_count(), 2, 64);
  c.Range("engine.offload.queue_depth", o.queue_depth(), 1, 256);
  const int64_t bytes = o.buffer_bytes();
  if (bytes % kIoAlignment != 0) {
    c.Add(absl::StrCat("engine.offload.buffer_bytes: ", bytes, " is not a multiple of ", kIoAlignment));
  } else {
    // The step plan refuses below the same minimum (StreamChunkElements).
    const int64_t per_element = StreamedBytesOf(e);
    const int64_t unit = MinStreamBufferBytes(per_element);
    const int64_t streamed = per_element / 4;  // f32 buffers
    if (bytes < unit) {
      c.Add(absl::StrCat("engine.offload.buffer_bytes: ", bytes, " is smaller than the largest bucket's alignment unit ",
                         unit, " (", kIoAlignment, " bytes for each of ", streamed, " streamed state buffer",
                         streamed == 1 ? "" : "s", ")"));
    }
  }
  c.AtLeast("engine.memory_limit_mib", static_cast<double>(e.memory_limit_mib()), 0);
}

}  // namespace

std::vector<std::string> ZeroShardingErrors(const EngineConfig& e) {
  ConfigChecker c;
  const ZeroConfig& z = e.zero();
  const int dp = e.parallel().dp();
  c.AtLeast("engine.zero.shard_group_size", z.shard_group_size(), 0);
  if (z.shard_group() == ZeroConfig::PER_HOST && z.shard_group_size() != 0) {
    c.Add(absl::StrCat("engine.zero.shard_group: PER_HOST takes the shard group size from the hosts, but "
                       "engine.zero.shard_group_size is ", z.shard_group_size(), "; expected 0 (unset)"));
  }
  if (z.shard_group_size() > 0 && dp >= 1 && dp % z.shard_group_size() != 0) {
    c.Add(absl::StrCat("engine.zero.shard_group_size: ", z.shard_group_size(), " does not divide engine.parallel.dp = ",
                       dp, "; expected a divisor of ", dp, " (or 0: all of dp)"));
  }
  const absl::StatusOr<ZeroPolicy> zero = ZeroPolicy::ForStage(z.stage());
  if (z.weight_quantization() != ZeroConfig::NONE && zero.ok() && !zero->gathers_params()) {
    c.Add(absl::StrCat("engine.zero.weight_quantization: ", ZeroConfig::Quantization_Name(z.weight_quantization()),
                       " needs engine.zero.stage 3 (stages 0-2 gather no weights); got stage ", z.stage()));
  }
  c.AtLeast("engine.zero.quantization_block", z.quantization_block(), 32);
  // PER_HOST is checked once resolved to a size (engine/shard_group.h): on
  // one host it becomes full sharding, with no replica group.
  const bool no_replicas = z.shard_group_size() == 0 || (dp >= 1 && z.shard_group_size() >= dp);
  if (z.replica_quantization() != ZeroConfig::NONE && z.shard_group() != ZeroConfig::PER_HOST && no_replicas) {
    c.Add(absl::StrCat("engine.zero.replica_quantization: ", ZeroConfig::Quantization_Name(z.replica_quantization()),
                       " needs a replica group, but engine.zero.shard_group_size is ", z.shard_group_size(),
                       " with engine.parallel.dp = ", dp,
                       " (one replica); expected a shard group size in (0, dp) or shard_group: PER_HOST on "
                       "several hosts"));
  }
  if (z.error_feedback() && z.gradient_quantization() == ZeroConfig::NONE) {
    c.Add("engine.zero.error_feedback: true needs engine.zero.gradient_quantization INT8 (is NONE)");
  }
  if (z.gradient_quantization() != ZeroConfig::NONE && e.precision().reduce_dtype() != F32) {
    c.Add(absl::StrCat("engine.precision.reduce_dtype: ", DTypeProto_Name(e.precision().reduce_dtype()),
                       " is set with engine.zero.gradient_quantization ",
                       ZeroConfig::Quantization_Name(z.gradient_quantization()),
                       ", which replaces it; expected F32 (unset)"));
  }
  return c.Take();
}

std::vector<std::string> EngineConfigErrors(const EngineConfig& engine, int64_t global_batch,
                                            const ValidationOptions& options) {
  ConfigChecker c;
  CheckZero(engine, c);
  CheckPrecision(engine.precision(), c);
  CheckOptimizer(engine.optimizer(), c);
  CheckSchedule(engine, c);
  CheckCheckpointing(engine, c);
  CheckParallel(engine, global_batch, options, c);
  CheckRuntime(engine, c);
  CheckOffload(engine, c);
  return c.Take();
}

int64_t MicroBatchSize(const EngineConfig& engine, int64_t global_batch) {
  return global_batch / (int64_t{engine.parallel().dp()} * engine.gradient_accumulation_steps());
}

}  // namespace zeroshard
