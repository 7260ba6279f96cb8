// The facade's set-up: options, units, fingerprints, the sharded state and
// the components over it, initial weights. The step runs in StepExecutor
// (step_executor.cc), its optimizer phase in OptimizerPhase, evaluation and
// parameter gathers in Evaluator.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/status_agreement.h"
#include "core/hash.h"
#include "core/host_heap.h"
#include "core/status_macros.h"
#include "engine/engine_impl.h"
#include "engine/host_offload.h"
#include "kernels/context.h"

namespace zeroshard {

absl::StatusOr<EngineComms> CommsForGrid(const EngineConfig& config, ProcessGrid* grid) {
  EngineComms comms;
  comms.grid = grid;
  comms.dp = &grid->dp_shard();
  comms.replica = grid->dp_replica();
  if (config.zero().shard_group() == ZeroConfig::PER_HOST) {
    return absl::InvalidArgumentError(
        "engine.zero.shard_group: PER_HOST is unresolved; resolve it against the launch's hosts "
        "(ResolveShardGroup, engine/shard_group.h) before creating the grid and the engine");
  }
  const int shard_group = config.zero().shard_group_size() > 0 ? config.zero().shard_group_size() : grid->shape().dp;
  if (shard_group != grid->shape().shard_group_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine.zero.shard_group_size: ", config.zero().shard_group_size(), " but the process grid shards over ",
        grid->shape().shard_group_size(), " of its ", grid->shape().dp,
        " dp ranks; create the grid with GridShape::dp_shard = engine.zero.shard_group_size"));
  }
  if (grid->shape().pp == 1 && grid->shape().tp == 1 && !grid->shape().hybrid()) {
    // dp is the whole job: its communicators serve as the world's.
    comms.control = &grid->control(GridAxis::kDp);
    comms.world = comms.dp;
  } else {
    comms.control = &grid->world_control();
    comms.world = &grid->world();
  }
  if (grid->shape().pp > 1) {
    comms.pp = &grid->pp();
    comms.embedding = &grid->embedding();
  }
  if (grid->shape().tp > 1) comms.tp = &grid->tp();
  return comms;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config, ProcessGrid* grid,
                                                       std::unique_ptr<Model> model,
                                                       const std::vector<EngineObserver*>& observers) {
  ASSIGN_OR_RETURN(EngineComms comms, CommsForGrid(config, grid));
  ASSIGN_OR_RETURN(std::unique_ptr<EngineImpl> engine, EngineImpl::Create(config, comms, std::move(model), observers));
  return std::unique_ptr<Engine>(std::move(engine));
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::CreateWithCommunicator(const EngineConfig& config, Communicator* dp,
                                                                       std::unique_ptr<Model> model,
                                                                       const std::vector<EngineObserver*>& observers) {
  // The engine's device comes from the config; the communicator must move
  // buffers on it (checked before any collective: every rank sees the same).
  const Device engine_device = config.device().type() == DeviceConfig::CUDA ? Device::kCuda : Device::kCpu;
  if (dp->device() != engine_device || dp->device() != Device::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat("the dp communicator '", dp->name(), "' works on ",
                                                   DeviceName(dp->device()), " buffers but engine.device.type is ",
                                                   DeviceName(engine_device),
                                                   "; one communicator serves data and control here, so it must "
                                                   "be a host (cpu) one: for CUDA use Engine::Create with "
                                                   "CreateEngineRuntime's grid"));
  }
  EngineComms comms;
  comms.dp = comms.control = comms.world = dp;
  ASSIGN_OR_RETURN(std::unique_ptr<EngineImpl> engine, EngineImpl::Create(config, comms, std::move(model), observers));
  return std::unique_ptr<Engine>(std::move(engine));
}

// What the engine refuses of engine.offload rather than misbehave
// (docs/offload_streaming.md); the config's own rules are
// config_validation's.
absl::Status OffloadSupported(const EngineOptions& options) {
  const OffloadOptions& o = options.offload;
  // Each reduction reads (after the first of the step) and writes the
  // stored shard once it has landed (docs/offload_streaming.md).
  if (o.grads == OffloadTier::kNvme && !options.zero.shards_grads()) {
    return absl::UnimplementedError(absl::StrCat(
        "engine.offload.grads: NVME needs ZeRO stage 2 or 3 (an f32 gradient shard at rest); engine.zero.stage is ",
        options.zero.stage()));
  }
  if (o.params == OffloadTier::kNvme && !options.zero.shards_params()) {
    return absl::UnimplementedError(absl::StrCat("engine.offload.params: NVME needs ZeRO stage 3 (parameter shards); "
                                                 "engine.zero.stage is ",
                                                 options.zero.stage()));
  }
  if (options.device != Device::kCpu) {
    // Built on a GPU: HOST optimizer state with HOST masters, updated on the
    // CPU (engine/host_offload.h).
    const bool host_update = UsesHostOffload(options);
    const struct {
      OffloadTier tier;
      const char* name;
      bool pair;  // one of the two classes host offload moves together
    } classes[] = {{o.optimizer_state, "optimizer_state", true},
                   {o.master_weights, "master_weights", true},
                   {o.params, "params", false},
                   {o.grads, "grads", false}};
    for (const auto& [tier, name, pair] : classes) {
      if (tier != OffloadTier::kDevice && !(tier == OffloadTier::kHost && pair && host_update)) {
        return absl::UnimplementedError(absl::StrCat(
            "engine.offload.", name, ": ", tier == OffloadTier::kHost ? "HOST" : "NVME",
            tier == OffloadTier::kHost && pair
                ? " is implemented on a CUDA device only with optimizer_state and master_weights both HOST"
                : " is not implemented on a CUDA device yet"));
      }
    }
  }
  return absl::OkStatus();
}

int EngineImpl::checkpoint_dp_rank() const {
  return res_.comms.replica == nullptr
             ? res_.comms.dp->rank()
             : res_.comms.dp->rank() * res_.comms.replica->size() + res_.comms.replica->rank();
}

EngineCoordinates EngineImpl::coordinates() const {
  EngineCoordinates c;
  c.shard_rank = res_.comms.dp->rank();
  c.shard_size = res_.comms.dp->size();
  c.replica_rank = res_.comms.replica == nullptr ? 0 : res_.comms.replica->rank();
  c.replicas = res_.replicas();
  c.checkpoint_dp_rank = checkpoint_dp_rank();
  c.dp_size = res_.dp_size();
  // The grid numbers dp ranks with the shard groups' neighbours together:
  // replica group r holds shard-group rank s at dp rank r · shard size + s.
  c.dp_rank = c.replica_rank * c.shard_size + c.shard_rank;
  c.tp_rank = res_.tp_rank();
  c.tp_size = res_.tp_size();
  c.stage = res_.plan.stage;
  c.stages = res_.plan.stages;
  return c;
}

EngineImpl::~EngineImpl() {
  if (state_ != nullptr) state_->ReleaseAll();
  res_.DetachDevice();
}

absl::StatusOr<std::unique_ptr<EngineImpl>> EngineImpl::Create(const EngineConfig& config, EngineComms comms,
                                                               std::unique_ptr<Model> model,
                                                               const std::vector<EngineObserver*>& observers) {
  if (model == nullptr) return absl::InvalidArgumentError("Engine::Create got no model");
  if (comms.dp == nullptr || comms.control == nullptr) {
    return absl::InvalidArgumentError("Engine::Create needs a dp and a control communicator");
  }
  if (comms.world == nullptr) comms.world = comms.dp;
  if (comms.control->size() != comms.world->size() || comms.control->rank() != comms.world->rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the control communicator '", comms.control->name(), "' is rank ", comms.control->rank(), " of ",
                     comms.control->size(), ", the world communicator '", comms.world->name(), "' rank ",
                     comms.world->rank(), " of ", comms.world->size(), "; they must be the same group"));
  }
  KeepFreedHostMemory();  // the step's buffers are reused, not faulted in again (core/host_heap.h)
  std::unique_ptr<EngineImpl> engine(new EngineImpl());
  engine->res_.comms = comms;
  engine->res_.model = std::move(model);
  for (EngineObserver* o : observers) engine->AddObserver(o);
  RETURN_IF_ERROR(engine->Init(config));
  return engine;
}

absl::Status EngineImpl::Init(const EngineConfig& config) {
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config);
  if (options.ok() && config.parallel().dp() != res_.comms.dp->size() * res_.replicas()) {
    options = absl::InvalidArgumentError(absl::StrCat("engine.parallel.dp: ", config.parallel().dp(),
                                                      " but the dp communicator has ",
                                                      res_.comms.dp->size() * res_.replicas(), " ranks"));
  }
  if (options.ok() && options->sharding.replicas != res_.replicas()) {
    options = absl::InvalidArgumentError(
        absl::StrCat("engine.zero.shard_group_size: ", config.zero().shard_group_size(), " makes ",
                     options->sharding.replicas, " replica groups but the engine was given ", res_.replicas(),
                     " (shard communicator '", res_.comms.dp->name(), "' of ", res_.comms.dp->size(), " ranks)"));
  }
  if (options.ok() && options->tensor.size != (res_.comms.tp == nullptr ? 1 : res_.comms.tp->size())) {
    options = absl::InvalidArgumentError(absl::StrCat("engine.parallel.tp: ", options->tensor.size,
                                                      " but the tp communicator has ",
                                                      res_.comms.tp == nullptr ? 1 : res_.comms.tp->size(), " ranks"));
  }
  if (options.ok()) {
    absl::Status offload = OffloadSupported(*options);
    if (!offload.ok()) options = offload;
  }
  if (options.ok()) res_.options = *options;
  absl::Status model_ok;
  if (options.ok()) {
    const int stage = res_.comms.pp == nullptr ? 0 : res_.comms.pp->rank();
    if (res_.options.pipeline.stages != (res_.comms.pp == nullptr ? 1 : res_.comms.pp->size())) {
      model_ok = absl::InvalidArgumentError(
          absl::StrCat("engine.parallel.pp: ", res_.options.pipeline.stages, " but the pp communicator has ",
                       res_.comms.pp == nullptr ? 1 : res_.comms.pp->size(), " ranks"));
    }
    absl::StatusOr<StepPlan> plan = model_ok.ok() ? PlanStep(*res_.model, res_.options, res_.comms.dp->size(), stage)
                                                  : absl::StatusOr<StepPlan>(model_ok);
    model_ok = plan.status();
    if (plan.ok()) res_.plan = std::move(*plan);
  }
  // The memory plan, before the first large allocation: a plan over the
  // limit fails here, and the fingerprint exchange below makes every rank
  // return (the limit comes from each host's memory, so ranks may differ).
  if (options.ok() && model_ok.ok()) model_ok = CheckMemory();
  absl::Status trace_ok = InitTrace(config.logging());
  absl::Status device_ok = options.ok() && model_ok.ok() ? res_.InitDevice() : absl::OkStatus();
  // Every rank takes part in the fingerprint exchange even when its own
  // checks failed, so that no rank is left waiting in a collective.
  absl::Status local = !options.ok()     ? options.status()
                       : !model_ok.ok()  ? model_ok
                       : !device_ok.ok() ? device_ok
                                         : trace_ok;
  RETURN_IF_ERROR(CheckFingerprints(config, local));
  res_.Notify([&](EngineObserver& o) { o.OnBeforeAllocation(res_.tracker); });
  // Past the fingerprints every rank allocates; an allocation that fails on
  // one rank is agreed on, so every rank returns its code.
  RETURN_IF_ERROR(AgreeAcrossRanks(*res_.comms.control, Allocate(), "Engine::Create (allocating the model state)"));
  return absl::OkStatus();
}

absl::Status EngineImpl::CheckFingerprints(const EngineConfig& config, const absl::Status& local) {
  std::string model_text;
  if (local.ok()) {
    for (int u = 0; u < num_units(); ++u) {
      absl::StrAppend(&model_text, res_.plan.layouts[u].DebugString(), res_.plan.units[u].trainable ? "" : " frozen",
                      " borrows {");
      for (const std::string& b : res_.model->units[u]->borrowed_params()) absl::StrAppend(&model_text, " ", b);
      absl::StrAppend(&model_text, " }");
      // The tp partitions: equal local shapes may still cut differently.
      for (const ParamSpec& p : res_.model->units[u]->params()) {
        if (!p.partition.replicated()) absl::StrAppend(&model_text, " ", p.name, " ", p.partition.DebugString());
      }
      absl::StrAppend(&model_text, "\n");
    }
    for (const std::string& m : res_.plan.metric_names) absl::StrAppend(&model_text, "metric ", m, "\n");
  }
  EngineConfig hashed = config;
  // Per-rank paths may differ; whether and how long a trace records may not
  // (WriteTrace is collective, after the window's last step).
  hashed.clear_logging();
  if (!config.logging().trace_path().empty()) hashed.mutable_logging()->set_trace_steps(config.logging().trace_steps());
  // Each rank's NVMe directory is its own (a local disk per host).
  if (hashed.has_offload()) hashed.mutable_offload()->clear_nvme_dir();
  const uint64_t model_fp = Fnv1a64(model_text);
  const uint64_t config_fp = Fnv1a64(hashed.SerializeAsString());
  // kMax of each 16-bit piece and of its negation gives max and -min: equal
  // pieces everywhere iff max == min.
  std::vector<int32_t> v(17, 0);
  v[0] = local.ok() ? 0 : 1;
  for (int i = 0; i < 4; ++i) {
    v[1 + i] = static_cast<int32_t>((model_fp >> (16 * i)) & 0xffff);
    v[5 + i] = static_cast<int32_t>((config_fp >> (16 * i)) & 0xffff);
    v[9 + i] = -v[1 + i];
    v[13 + i] = -v[5 + i];
  }
  RETURN_IF_ERROR(
      res_.comms.control->AllReduce(v.data(), static_cast<int64_t>(v.size()), DType::kI32, ReduceOp::kMax)->Wait());
  if (!local.ok()) return local;
  if (v[0] != 0) {
    return RelayedError(absl::StatusCode::kFailedPrecondition,
                        absl::StrCat("Engine::Create failed on another of the ", res_.comms.control->size(), " ",
                                     res_.ControlGroup(), " ranks (see its error); this rank (", res_.ControlGroup(),
                                     " rank ", res_.comms.control->rank(), ") was fine"));
  }
  bool model_same = true, config_same = true;
  for (int i = 0; i < 4; ++i) {
    model_same &= v[1 + i] == -v[9 + i];
    config_same &= v[5 + i] == -v[13 + i];
  }
  if (!model_same) {
    int64_t numel = 0;
    for (const FlatParamLayout& l : res_.plan.layouts) numel += l.numel();
    return absl::FailedPreconditionError(absl::StrFormat(
        "the model differs across the %d %s ranks: %s rank %d has %d units and %d parameters (fingerprint "
        "%016x); every rank must build the same model",
        res_.comms.control->size(), res_.ControlGroup(), res_.ControlGroup(), res_.comms.control->rank(),
        res_.plan.layouts.size(), numel, model_fp));
  }
  if (!config_same) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the engine config differs across the %d %s ranks: %s rank %d has fingerprint %016x (zero.stage=%d, "
        "gradient_accumulation_steps=%d); every rank must load the same config",
        res_.comms.control->size(), res_.ControlGroup(), res_.ControlGroup(), res_.comms.control->rank(), config_fp,
        config.zero().stage(), config.gradient_accumulation_steps()));
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::CheckMemory() {
  MemoryPlanInputs in;
  in.options = res_.options;
  in.plan = &res_.plan;
  in.model = res_.model.get();
  in.rank = res_.comms.control->rank();
  in.dp_rank = res_.comms.dp->rank();
  in.dp_size = res_.comms.dp->size();
  in.tp_rank = res_.tp_rank();
  in.tp_size = res_.tp_size();
  in.pp_stage = res_.plan.stage;
  in.cpu_threads = kernels::CpuThreadsOrDefault(res_.options.threads_per_rank);
  // The micro-batch shape comes with the first step: activations are not
  // counted here (check-config counts them).
  if (res_.options.offload.any_nvme()) {
    // Refused before any file is created: a missing, read-only or too
    // small directory, and a RAM-backed one counts as memory.
    ASSIGN_OR_RETURN(in.nvme_filesystem, InspectFilesystem(res_.options.offload.nvme_dir));
  }
  ASSIGN_OR_RETURN(memory_limit_, ResolveMemoryLimit(res_.options, RanksOnHost()));
  ASSIGN_OR_RETURN(memory_plan_, PlanMemoryChoosingBufferCount(in, memory_limit_, res_.comms.dp->size(),
                                                               res_.plan.stage, &res_.options, &res_.plan));
  RETURN_IF_ERROR(CheckMemoryPlan(memory_plan_, memory_limit_));
  if (!res_.options.offload.any_nvme()) return absl::OkStatus();
  return CheckOffloadDirectory(memory_plan_, res_.options.offload.nvme_dir, in.nvme_filesystem, RanksOnHost());
}

absl::Status EngineImpl::Allocate() {
  ASSIGN_OR_RETURN(state_,
                   ShardedState::Create(res_.plan, *res_.model, res_.options, res_.comms.dp, res_.comms.replica,
                                        res_.comms.embedding, &res_.tracker, res_.compute, res_.timeline.get()));
  state_view_.Init(state_.get(), res_.options.compute_dtype);
  transport_ =
      std::make_unique<PipelineTransport>(res_.comms.pp, &res_.tracker, res_.device(), &res_.compute,
                                          res_.timeline.get(), res_.num_units(), res_.options.accumulation_steps);
  optimizer_phase_ = std::make_unique<OptimizerPhase>(&res_, state_.get());
  executor_ = std::make_unique<StepExecutor>(&res_, state_.get(), transport_.get(), optimizer_phase_.get());
  evaluator_ = std::make_unique<Evaluator>(&res_, state_.get(), executor_.get());
  return state_->InitParams(*res_.model, res_.options.seed, res_.tp_rank(), res_.tp_size());
}

void EngineImpl::RestoreProgress(int64_t step, int64_t skipped_steps) { state_->RestoreProgress(step, skipped_steps); }

void EngineImpl::RestoreLossScaler(double scale, int64_t clean_streak, int hysteresis_left, int64_t overflows) {
  if (state_->scaler().options().type == LossScaleType::kNone) return;
  state_->scaler().Restore(scale, clean_streak, hysteresis_left, overflows);
}

std::vector<std::string> EngineImpl::ParamNames() const {
  std::vector<std::string> names;
  for (const FlatParamLayout& l : res_.plan.layouts) {
    for (const FlatParamInfo& p : l.params()) names.push_back(p.name);
  }
  return names;
}

std::vector<bool> Engine::checkpointed_units() const {
  std::vector<bool> out;
  for (const UnitPlan& u : plan().units) out.push_back(u.checkpointed);
  return out;
}

std::vector<bool> Engine::selective_units() const {
  std::vector<bool> out;
  for (const UnitPlan& u : plan().units) out.push_back(u.selective);
  return out;
}

EngineStats EngineImpl::stats() const {
  EngineStats s;
  s.step = state_->step();
  s.skipped_steps = state_->skipped_steps();
  s.peak_gathered_units = executor_->peak_gathered();
  s.peak_kept_activations = executor_->peak_kept();
  return s;
}

CommStats EngineImpl::comm_stats() const {
  CommStats stats = res_.comms.dp->Stats();
  if (res_.comms.replica != nullptr) {
    const CommStats replica = res_.comms.replica->Stats();
    for (size_t op = 0; op < stats.per_op.size(); ++op) {
      stats.per_op[op].calls += replica.per_op[op].calls;
      stats.per_op[op].bytes_sent += replica.per_op[op].bytes_sent;
      stats.per_op[op].bytes_received += replica.per_op[op].bytes_received;
    }
  }
  return stats;
}

std::map<std::string, CommStats> EngineImpl::comm_stats_by_group() const {
  std::map<std::string, CommStats> out;
  if (res_.comms.replica == nullptr) {
    out["dp"] = res_.comms.dp->Stats();
  } else {
    out["dp_shard"] = res_.comms.dp->Stats();
    out["dp_replica"] = res_.comms.replica->Stats();
  }
  if (res_.comms.tp != nullptr) out["tp"] = res_.comms.tp->Stats();
  if (res_.comms.pp != nullptr) out["pp"] = res_.comms.pp->Stats();
  if (res_.comms.embedding != nullptr) out["embed"] = res_.comms.embedding->Stats();
  // The step's few world-wide sums (norm, overflow, loss); when dp is the
  // whole job they travel on dp and are counted there.
  if (res_.comms.world != nullptr && res_.comms.world != res_.comms.dp) out["world"] = res_.comms.world->Stats();
  return out;
}

std::map<std::string, std::vector<int>> EngineImpl::comm_group_world_ranks() const {
  std::map<std::string, std::vector<int>> out;
  for (const auto& [group, stats] : comm_stats_by_group()) {
    (void)stats;
    out[group] = {};
  }
  if (res_.comms.grid == nullptr) return out;
  const ProcessGrid& g = *res_.comms.grid;
  const std::map<std::string, const Communicator*> comms = {
      {"dp", res_.comms.dp},      {"dp_shard", res_.comms.dp}, {"dp_replica", res_.comms.replica},
      {"tp", res_.comms.tp},      {"pp", res_.comms.pp},       {"embed", res_.comms.embedding},
      {"world", res_.comms.world}};
  for (auto& [group, ranks] : out) ranks = g.WorldRanksOf(comms.at(group));
  return out;
}

}  // namespace zeroshard
