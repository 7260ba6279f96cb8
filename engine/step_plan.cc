#include "engine/step_plan.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/data_parallel_program.h"
#include "engine/optimizer_program.h"
#include "engine/param_offload_program.h"
#include "engine/pipeline_partition.h"
#include "engine/pipeline_program.h"
#include "offload/async_io.h"
#include "sharding/optimizer_registry.h"
#include "sharding/quantized_shard.h"

namespace zeroshard {
namespace {

absl::Status DescribeUnits(const Model& model, int dp_size, int tp_size, int64_t alignment, StepPlan* plan) {
  const int L = static_cast<int>(model.units.size());
  for (int u = 0; u < L; ++u) {
    const Unit& unit = *model.units[u];
    std::vector<FlatParamDecl> decls;
    for (const ParamSpec& p : unit.params()) {
      ASSIGN_OR_RETURN(std::vector<int64_t> local, LocalShape(p, tp_size));
      decls.push_back({p.name, std::move(local)});
    }
    ASSIGN_OR_RETURN(FlatParamLayout layout, FlatParamLayout::Create(unit.name(), u, std::move(decls), dp_size, alignment));
    plan->layouts.push_back(std::move(layout));
    UnitPlan info;
    info.has_params = !unit.params().empty();
    info.trainable = !info.has_params || unit.params().front().trainable;
    if (info.has_params) info.needs.push_back(u);
    plan->units.push_back(std::move(info));
  }
  for (int u = 0; u < L; ++u) {
    for (const std::string& name : model.units[u]->borrowed_params()) {
      ASSIGN_OR_RETURN(ParamLocation loc, model.FindParam(name));
      const FlatParamInfo& info = plan->layouts[loc.unit].params()[loc.param];
      plan->units[u].borrowed.push_back({loc.unit, info.offset, info.shape});
      std::vector<int>& needs = plan->units[u].needs;
      if (std::find(needs.begin(), needs.end(), loc.unit) == needs.end()) needs.push_back(loc.unit);
    }
  }
  // A leading run of units that train nothing (frozen or no parameters, no
  // trainable borrowed ones) needs no backward, and the first unit after it
  // no input gradient.
  bool upstream_trains = false;
  for (int u = 0; u < L; ++u) {
    UnitPlan& info = plan->units[u];
    info.input_grad = upstream_trains;
    bool trains = info.has_params && info.trainable;
    for (const UnitPlan::Borrowed& b : info.borrowed) trains |= plan->units[b.owner].trainable;
    upstream_trains |= trains;
    info.backward = upstream_trains;
  }
  if (L > 0) plan->metric_names = model.units[L - 1]->metric_names();
  return absl::OkStatus();
}

absl::Status ResolveCheckpointedUnits(const Model& model, const ActivationCheckpointingOptions& ac, StepPlan* plan) {
  const int L = static_cast<int>(plan->units.size());
  std::vector<bool> checkpointed(L, false);
  for (int u = 0; u < L; ++u) {
    checkpointed[u] = ac.policy == CheckpointPolicy::kEveryUnit || (ac.policy == CheckpointPolicy::kEveryKth && u % ac.k == 0);
  }
  // The automatic policies leave the last unit alone: its backward runs
  // right after its forward, so dropping its activations would free nothing
  // at the peak and cost a forward (GPT-2's head: the V-wide logits GEMM).
  if (ac.policy != CheckpointPolicy::kNamed) {
    if (L > 0) checkpointed[L - 1] = false;
  } else {
    for (const std::string& name : ac.units) {
      int found = -1;
      for (int u = 0; u < L; ++u) {
        if (model.units[u]->name() == name) found = u;
      }
      if (found < 0) {
        return absl::InvalidArgumentError(absl::StrCat("engine.activation_checkpointing.units: '", name,
                                                       "' is not a unit of the model (", L, " units, first '",
                                                       L > 0 ? model.units[0]->name() : std::string(), "')"));
      }
      checkpointed[found] = true;
      if (ac.selective && !model.units[found]->SupportsSelectiveCheckpointing()) {
        return absl::InvalidArgumentError(absl::StrCat("engine.activation_checkpointing.units: '", name,
                                                       "' has no selective form (selective: true)"));
      }
    }
  }
  // A unit without a backward keeps nothing for one. Selective: the units
  // the policy names (every unit under NONE) that have a selective form are
  // checkpointed selectively instead of fully; the others keep everything.
  for (int u = 0; u < L; ++u) {
    UnitPlan& up = plan->units[u];
    if (!ac.selective) {
      up.checkpointed = checkpointed[u] && up.backward;
      continue;
    }
    const bool named = ac.policy == CheckpointPolicy::kNone || checkpointed[u];
    up.selective = named && up.backward && model.units[u]->SupportsSelectiveCheckpointing();
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int> StagingSlots(const StepProgram& program, int num_buckets) {
  std::vector<int> slot_of(num_buckets, 0);
  std::vector<bool> busy;
  std::vector<bool> replicated(num_buckets, false);
  int in_flight = 0;
  int pending = -1;  // the bucket whose replica all-reduce is still running
  for (const Action& a : program.actions) {
    if (a.kind == ActionKind::kReduce) {
      int s = 0;
      while (s < static_cast<int>(busy.size()) && busy[s]) ++s;
      if (s == static_cast<int>(busy.size())) busy.push_back(false);
      busy[s] = true;
      slot_of[a.bucket] = s;
      ++in_flight;
      for (const IssuedCollective& c : a.issues) replicated[a.bucket] = replicated[a.bucket] || c.group == "dp_replica";
    } else if (a.kind == ActionKind::kWaitReduce) {
      if (pending >= 0) busy[slot_of[pending]] = false;
      pending = -1;
      --in_flight;
      if (replicated[a.bucket] && in_flight > 0) {
        pending = a.bucket;
      } else {
        busy[slot_of[a.bucket]] = false;
      }
    }
  }
  return slot_of;
}

namespace {

// The program builders' view of every unit; output_bytes from `model`'s
// estimates where `micro_batch` is known.
std::vector<ProgramUnit> ProgramUnits(const StepPlan& plan, const EngineOptions& options, const Model* model = nullptr,
                                      const MicroBatchShape& micro_batch = {}) {
  const int L = static_cast<int>(plan.units.size());
  const int64_t c = static_cast<int64_t>(DTypeSize(options.compute_dtype));
  std::vector<ProgramUnit> units(L);
  for (int u = 0; u < L; ++u) {
    ProgramUnit& p = units[u];
    p.name = plan.layouts[u].unit_name();
    p.needs = plan.units[u].needs;
    p.gather_bytes = !plan.units[u].has_params ? 0
                     : options.sharding.quantize_weights
                         ? MaxPackedShardBytes(plan.layouts[u], options.sharding.quantization_block)
                         : plan.layouts[u].shard_numel() * c;
    p.persistent = plan.layouts[u].numel() < options.gather.persistence_threshold;
    p.checkpointed = plan.units[u].checkpointed;
    p.backward = plan.units[u].backward;
    if (model != nullptr && micro_batch.rows > 0) {
      const int64_t bytes = model->units[u]->EstimateOutputActivationBytes(micro_batch.rows, micro_batch.sequence_length,
                                                                           options.compute_dtype);
      const int64_t split = options.tensor.sequence_parallel ? options.tensor.size : 1;
      p.output_bytes = bytes > 0 ? bytes / split : 0;
    }
  }
  return units;
}

std::vector<ProgramBucket> ProgramBuckets(const StepPlan& plan, const EngineOptions& options) {
  const int64_t r = static_cast<int64_t>(DTypeSize(options.reduce_dtype));
  std::vector<ProgramBucket> buckets;
  for (const GradBucket& b : plan.buckets) {
    ProgramBucket p{b.units, b.shard_numel * r, b.label};
    if (options.sharding.quantize_gradients && b.shard_numel > 0) {
      std::vector<const FlatParamLayout*> layouts;
      for (int u : b.units) layouts.push_back(&plan.layouts[u]);
      p.reduce_op = CommOp::kAllToAll;
      p.reduce_bytes = MaxPackedBucketPartBytes(layouts, options.sharding.quantization_block);
    }
    // The replica all-reduce moves the reduced shard in the reduce dtype
    // (f32 under int8 gradients, which require it); int8 replicas gather
    // each replica's packed shard instead.
    if (options.sharding.replicas > 1) p.replica_bytes = b.shard_numel * r;
    if (options.sharding.replicas > 1 && options.sharding.quantize_replicas && b.shard_numel > 0) {
      std::vector<const FlatParamLayout*> layouts;
      for (int u : b.units) layouts.push_back(&plan.layouts[u]);
      p.replica_op = CommOp::kAllGather;
      p.replica_bytes = MaxPackedBucketPartBytes(layouts, options.sharding.quantization_block);
    }
    buckets.push_back(std::move(p));
  }
  return buckets;
}

}  // namespace

int64_t StreamedBytesPerElement(const EngineOptions& options) {
  int64_t bytes = options.offload.master_weights == OffloadTier::kNvme ? 4 : 0;
  if (options.offload.optimizer_state == OffloadTier::kNvme) {
    absl::StatusOr<const Optimizer*> plugin = FindOptimizer(options.optimizer.name);
    if (plugin.ok()) {
      for (const OptimizerStateKind& k : (*plugin)->StateKinds(options.optimizer)) bytes += k.bytes_per_element;
    }
  }
  if (options.offload.grads == OffloadTier::kNvme && options.zero.shards_grads()) bytes += 4;
  return bytes;
}

int64_t GradStagingBytes(const StepPlan& plan, const EngineOptions& options) {
  if (options.offload.grads != OffloadTier::kNvme || !options.zero.shards_grads()) return 0;
  int64_t largest = 0;
  for (const GradBucket& b : plan.buckets) {
    int64_t bytes = 0;
    for (int u : b.units) {
      const UnitPlan& up = plan.units[u];
      if (up.optimized()) bytes += AlignIo(plan.layouts[u].shard_numel() * 4);
    }
    largest = std::max(largest, bytes);
  }
  return std::max(largest, kIoAlignment);
}

std::vector<int64_t> StreamedParamShardBytes(const StepPlan& plan, const EngineOptions& options) {
  if (options.offload.params != OffloadTier::kNvme || !options.zero.shards_params()) return {};
  std::vector<int64_t> bytes;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    bytes.push_back(plan.units[u].held ? plan.layouts[u].shard_numel() * static_cast<int64_t>(DTypeSize(options.compute_dtype))
                                       : 0);
  }
  return bytes;
}

namespace {

// The parameter shards' I/O (engine/param_offload_program.h) into the train
// and evaluation programs; nothing unless they stream.
void AddParamShardIoToPrograms(const EngineOptions& options, StepPlan* plan) {
  const std::vector<int64_t> bytes = StreamedParamShardBytes(*plan, options);
  if (bytes.empty()) return;
  ParamShardIoInput in;
  for (int64_t b : bytes) in.streams.push_back(b > 0);
  in.min_slots = options.gather.prefetch + 1;
  for (const GradBucket& b : plan->buckets) in.buckets.push_back(b.units);
  AddParamShardIo(in, &plan->train);
  in.buckets.clear();
  AddParamShardIo(in, &plan->eval);
}

}  // namespace

int ParamShardSlots(const StepPlan& plan, const EngineOptions& options) {
  if (!options.zero.shards_params()) return 0;
  if (options.offload.params == OffloadTier::kNvme) {
    return std::max({1, plan.train.param_slots, plan.eval.param_slots});
  }
  EngineOptions nvme = options;
  nvme.offload.params = OffloadTier::kNvme;
  StepPlan with = plan;
  AddParamShardIoToPrograms(nvme, &with);
  return std::max({1, with.train.param_slots, with.eval.param_slots});
}

namespace {

// The optimizer phase's view of the plan: its buckets' units, each unit's
// shard and tie, and the NVMe tier's streaming.
absl::StatusOr<OptimizerPhaseInput> OptimizerPhase(const StepPlan& plan, const EngineOptions& options) {
  OptimizerPhaseInput in;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const UnitPlan& up = plan.units[u];
    const int64_t region_numel = !up.optimized()                ? 0
                                 : options.zero.shards_master() ? plan.layouts[u].shard_numel()
                                                                : plan.layouts[u].padded_numel();
    OptimizerPhaseUnit unit;
    unit.name = plan.layouts[u].unit_name();
    unit.shard_numel = plan.layouts[u].shard_numel();
    unit.padded_numel = plan.layouts[u].padded_numel();
    unit.tied = up.tied;
    unit.mirror = up.mirror;
    unit.region_numel = region_numel;
    in.units.push_back(std::move(unit));
  }
  const int64_t streamed = StreamedBytesPerElement(options);
  if (streamed > 0) {
    // 0 (unset): the memory planner chooses (PlanMemoryChoosingBufferCount)
    // and the step is replanned with its count; the chunks do not depend on
    // the count, so the provisional plan counts them with the fewest slots.
    in.stream.slots = options.offload.buffer_count == 0 ? 2 : options.offload.buffer_count;
    in.stream.chunk_elements = StreamChunkElements(options.offload.buffer_bytes, streamed);
    in.stream.pipeline = plan.stages > 1;
    in.stream.grads = options.offload.grads == OffloadTier::kNvme && options.zero.shards_grads();
    // The validator's minimum (MinStreamBufferBytes), for options built
    // without it.
    if (in.stream.slots < 1 || options.offload.buffer_bytes < MinStreamBufferBytes(streamed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "engine.offload: ", in.stream.slots, " staging buffers of ", options.offload.buffer_bytes,
          " bytes cannot stream chunks of ", kStreamGranuleElements, " elements x ", streamed,
          " bytes (every class streamed from NVME); raise buffer_bytes or buffer_count"));
    }
  }
  for (const GradBucket& b : plan.buckets) in.buckets.push_back(b.units);
  in.zero = options.zero;
  in.compute_dtype_bytes = static_cast<int64_t>(DTypeSize(options.compute_dtype));
  // Without pipeline stages or hybrid sharding, dp is the world.
  in.norm_group = plan.stages > 1 || options.sharding.replicas > 1 ? "world" : "dp";
  in.metrics = static_cast<int>(plan.metric_names.size());
  return in;
}

// Buckets over the units this rank holds that have gradients.
std::vector<GradBucket> HeldBuckets(const StepPlan& plan, const EngineOptions& options) {
  const int L = static_cast<int>(plan.units.size());
  std::vector<const FlatParamLayout*> with_grads(L, nullptr);
  for (int u = 0; u < L; ++u) {
    if (plan.units[u].has_grads()) with_grads[u] = &plan.layouts[u];
  }
  return FormGradBuckets(with_grads, options.bucket_bytes, options.reduce_dtype);
}

// chunk_begin from units per chunk: pp·v chunks, each with a unit, covering
// the model.
absl::StatusOr<std::vector<int>> ChunkBegins(const std::vector<int>& units_per_chunk, int units, int chunks) {
  if (static_cast<int>(units_per_chunk.size()) != chunks) {
    return absl::InvalidArgumentError(absl::StrCat("engine.parallel.pp_partition: ", units_per_chunk.size(),
                                                   " entries, expected pp x virtual_stages = ", chunks,
                                                   " (units per chunk; the model has ", units, " units)"));
  }
  std::vector<int> begin = {0};
  for (int c = 0; c < chunks; ++c) {
    if (units_per_chunk[c] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("engine.parallel.pp_partition: chunk ", c, " has ",
                                                     units_per_chunk[c], " units, expected at least 1"));
    }
    begin.push_back(begin.back() + units_per_chunk[c]);
  }
  if (begin.back() != units) {
    return absl::InvalidArgumentError(absl::StrCat("engine.parallel.pp_partition: sums to ", begin.back(),
                                                   ", expected the model's ", units, " units"));
  }
  return begin;
}

// A unit's share of the step's work for the automatic partition: the
// elements of every parameter it multiplies with (its own and borrowed
// ones), at least 1.
std::vector<double> UnitCosts(const Model& model) {
  std::vector<double> costs;
  for (const auto& unit : model.units) {
    double cost = 0;
    for (const ParamSpec& p : unit->params()) cost += static_cast<double>(p.numel());
    for (const std::string& name : unit->borrowed_params()) {
      absl::StatusOr<ParamLocation> loc = model.FindParam(name);
      if (loc.ok()) cost += static_cast<double>(model.units[loc->unit]->params()[loc->param].numel());
    }
    costs.push_back(std::max(cost, 1.0));
  }
  return costs;
}

}  // namespace

absl::StatusOr<StepPlan> PlanDataParallelStep(const Model& model, const EngineOptions& options, int dp_size) {
  RETURN_IF_ERROR(model.Validate(options.tensor.size));
  StepPlan plan;
  RETURN_IF_ERROR(DescribeUnits(model, dp_size, options.tensor.size, options.sharding.alignment, &plan));
  RETURN_IF_ERROR(ResolveCheckpointedUnits(model, options.checkpointing, &plan));
  plan.buckets = HeldBuckets(plan, options);
  const std::vector<ProgramUnit> units = ProgramUnits(plan, options);
  const std::vector<ProgramBucket> buckets = ProgramBuckets(plan, options);
  DataParallelProgramOptions o;
  o.zero = options.zero;
  o.micro_batches = options.accumulation_steps;
  o.reduce_every_micro_batch = options.reduce_mode == ReduceMode::kAccumulate;
  o.prefetch = options.gather.prefetch;
  o.reshard_after_forward = options.gather.reshard_after_forward;
  ASSIGN_OR_RETURN(plan.train, BuildDataParallelProgram(units, buckets, o));
  ASSIGN_OR_RETURN(const OptimizerPhaseInput phase, OptimizerPhase(plan, options));
  AddStepPrologueAndOptimizerPhase(phase, &plan.train);
  o.training = false;
  ASSIGN_OR_RETURN(plan.eval, BuildDataParallelProgram(units, buckets, o));
  AddParamShardIoToPrograms(options, &plan);
  plan.staging_slots = StagingSlots(plan.train, static_cast<int>(plan.buckets.size()));
  return plan;
}

absl::StatusOr<StepPlan> PlanPipelineStep(const Model& model, const EngineOptions& options, int dp_size, int stage,
                                          const MicroBatchShape& micro_batch) {
  RETURN_IF_ERROR(model.Validate(options.tensor.size));
  StepPlan plan;
  RETURN_IF_ERROR(DescribeUnits(model, dp_size, options.tensor.size, options.sharding.alignment, &plan));
  RETURN_IF_ERROR(ResolveCheckpointedUnits(model, options.checkpointing, &plan));
  const PipelineOptions& pipe = options.pipeline;
  const int L = static_cast<int>(plan.units.size());
  const int chunks = pipe.stages * pipe.virtual_stages;
  plan.stages = pipe.stages;
  plan.stage = stage;
  if (chunks > L) {
    return absl::InvalidArgumentError(absl::StrCat("engine.parallel.pp: pp x virtual_stages = ", chunks,
                                                   " exceeds the model's ", L, " units"));
  }
  ASSIGN_OR_RETURN(plan.chunk_begin,
                   ChunkBegins(pipe.partition.empty() ? PartitionByCost(UnitCosts(model), chunks) : pipe.partition, L,
                               chunks));
  for (int c = 0; c < chunks; ++c) {
    for (int u = plan.chunk_begin[c]; u < plan.chunk_begin[c + 1]; ++u) {
      plan.units[u].stage = c % pipe.stages;
      plan.units[u].computed = plan.units[u].stage == stage;
      plan.units[u].held = plan.units[u].computed;
    }
  }
  // A unit borrowing from another stage's unit keeps a mirror copy of it;
  // only the first and the last stage may share a weight (the embedding
  // group sums their gradients).
  for (int u = 0; u < L; ++u) {
    for (const UnitPlan::Borrowed& b : plan.units[u].borrowed) {
      const int owner_stage = plan.units[b.owner].stage, user_stage = plan.units[u].stage;
      if (owner_stage == user_stage) continue;
      const bool ends = (owner_stage == 0 && user_stage == pipe.stages - 1) ||
                        (owner_stage == pipe.stages - 1 && user_stage == 0);
      if (!ends) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unit '", plan.layouts[u].unit_name(), "' on pipeline stage ", user_stage, " borrows from unit '",
            plan.layouts[b.owner].unit_name(), "' on stage ", owner_stage,
            "; only the first and the last stage may share a weight (engine.parallel.pp_partition)"));
      }
      plan.units[b.owner].tied = true;
      if (user_stage == stage) {
        plan.units[b.owner].held = true;
        plan.units[b.owner].mirror = true;
      }
    }
  }
  for (UnitPlan& u : plan.units) u.tied = u.tied && u.held;
  plan.buckets = HeldBuckets(plan, options);
  PipelineProgramInput in;
  in.units = ProgramUnits(plan, options, &model, micro_batch);
  in.buckets = ProgramBuckets(plan, options);
  in.chunk_begin = plan.chunk_begin;
  in.stage = stage;
  in.shape = {pipe.stages, pipe.virtual_stages, options.accumulation_steps};
  in.schedule = pipe.schedule;
  in.zero = options.zero;
  in.keep_gathered_across_micro_batches = !pipe.reshard_per_micro_batch;
  in.reshard_after_forward = pipe.reshard_per_micro_batch;
  in.prefetch = options.gather.prefetch;
  in.training = true;
  ASSIGN_OR_RETURN(plan.train, BuildPipelineProgram(in));
  ASSIGN_OR_RETURN(const OptimizerPhaseInput phase, OptimizerPhase(plan, options));
  AddStepPrologueAndOptimizerPhase(phase, &plan.train);
  in.training = false;
  ASSIGN_OR_RETURN(plan.eval, BuildPipelineProgram(in));
  AddParamShardIoToPrograms(options, &plan);
  plan.staging_slots = StagingSlots(plan.train, static_cast<int>(plan.buckets.size()));
  return plan;
}

absl::StatusOr<StepPlan> PlanStep(const Model& model, const EngineOptions& options, int dp_size, int stage) {
  if (options.pipeline.stages > 1 || options.pipeline.virtual_stages > 1) {
    return PlanPipelineStep(model, options, dp_size, stage);
  }
  return PlanDataParallelStep(model, options, dp_size);
}

}  // namespace zeroshard
