// Engine set-up: options, units, fingerprints, buffers, initial weights and
// the step programs. The step itself is engine_step.cc; the optimizer phase
// engine_optimizer.cc; evaluation and parameter gathers engine_eval.cc.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/status_agreement.h"
#include "core/hash.h"
#include "core/status_macros.h"
#include "engine/engine_impl.h"
#include "kernels/cast.h"
#include "nn/param_init.h"
#include "sharding/weight_decay_policy.h"

namespace zeroshard {
namespace {

}  // namespace

absl::StatusOr<EngineComms> CommsForGrid(const EngineConfig& config, ProcessGrid* grid) {
  EngineComms comms;
  comms.dp = &grid->dp_shard();
  comms.replica = grid->dp_replica();
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

absl::StatusOr<std::unique_ptr<Engine>> Engine::CreateWithCommunicator(
    const EngineConfig& config, Communicator* dp, std::unique_ptr<Model> model,
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

int EngineImpl::checkpoint_dp_rank() const {
  return replica_ == nullptr ? dp_->rank() : dp_->rank() * replica_->size() + replica_->rank();
}

EngineCoordinates EngineImpl::coordinates() const {
  EngineCoordinates c;
  c.shard_rank = dp_->rank();
  c.shard_size = dp_->size();
  c.replica_rank = replica_ == nullptr ? 0 : replica_->rank();
  c.replicas = replicas();
  c.checkpoint_dp_rank = checkpoint_dp_rank();
  c.dp_size = dp_size();
  // The grid numbers dp ranks with the shard groups' neighbours together:
  // replica group r holds shard-group rank s at dp rank r · shard size + s.
  c.dp_rank = c.replica_rank * c.shard_size + c.shard_rank;
  c.tp_rank = tp_rank();
  c.tp_size = tp_size();
  c.stage = plan_.stage;
  c.stages = plan_.stages;
  return c;
}

EngineImpl::~EngineImpl() {
  for (auto& shard : shards_) {
    if (shard != nullptr) shard->Release().IgnoreError();
  }
  if (reducer_ != nullptr) reducer_->FinishAll().IgnoreError();
  DetachDevice();
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
    return absl::InvalidArgumentError(absl::StrCat("the control communicator '", comms.control->name(), "' is rank ",
                                                   comms.control->rank(), " of ", comms.control->size(),
                                                   ", the world communicator '", comms.world->name(), "' rank ",
                                                   comms.world->rank(), " of ", comms.world->size(),
                                                   "; they must be the same group"));
  }
  std::unique_ptr<EngineImpl> engine(new EngineImpl());
  engine->dp_ = comms.dp;
  engine->replica_ = comms.replica;
  engine->control_ = comms.control;
  engine->world_ = comms.world;
  engine->pp_ = comms.pp;
  engine->embedding_ = comms.embedding;
  engine->tp_ = comms.tp;
  engine->model_ = std::move(model);
  for (EngineObserver* o : observers) engine->AddObserver(o);
  RETURN_IF_ERROR(engine->Init(config));
  return engine;
}

absl::Status EngineImpl::Init(const EngineConfig& config) {
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(config);
  if (options.ok() && config.parallel().dp() != dp_->size() * replicas()) {
    options = absl::InvalidArgumentError(absl::StrCat("engine.parallel.dp: ", config.parallel().dp(),
                                                      " but the dp communicator has ", dp_->size() * replicas(),
                                                      " ranks"));
  }
  if (options.ok() && options->sharding.replicas != replicas()) {
    options = absl::InvalidArgumentError(absl::StrCat(
        "engine.zero.shard_group_size: ", config.zero().shard_group_size(), " makes ", options->sharding.replicas,
        " replica groups but the engine was given ", replicas(), " (shard communicator '", dp_->name(), "' of ",
        dp_->size(), " ranks)"));
  }
  if (options.ok() && options->tensor.size != (tp_ == nullptr ? 1 : tp_->size())) {
    options = absl::InvalidArgumentError(absl::StrCat("engine.parallel.tp: ", options->tensor.size,
                                                      " but the tp communicator has ",
                                                      tp_ == nullptr ? 1 : tp_->size(), " ranks"));
  }
  if (options.ok()) options_ = *options;
  absl::Status model_ok;
  if (options.ok()) {
    const int stage = pp_ == nullptr ? 0 : pp_->rank();
    if (options_.pipeline.stages != (pp_ == nullptr ? 1 : pp_->size())) {
      model_ok = absl::InvalidArgumentError(absl::StrCat("engine.parallel.pp: ", options_.pipeline.stages,
                                                         " but the pp communicator has ",
                                                         pp_ == nullptr ? 1 : pp_->size(), " ranks"));
    }
    absl::StatusOr<StepPlan> plan =
        model_ok.ok() ? PlanStep(*model_, options_, dp_->size(), stage) : absl::StatusOr<StepPlan>(model_ok);
    model_ok = plan.status();
    if (plan.ok()) plan_ = std::move(*plan);
  }
  absl::Status trace_ok = InitTrace(config.logging());
  absl::Status device_ok = options.ok() && model_ok.ok() ? InitDevice() : absl::OkStatus();
  // Every rank takes part in the fingerprint exchange even when its own
  // checks failed, so that no rank is left waiting in a collective.
  absl::Status local = !options.ok() ? options.status() : !model_ok.ok() ? model_ok : !device_ok.ok() ? device_ok : trace_ok;
  RETURN_IF_ERROR(CheckFingerprints(config, local));
  Notify([&](EngineObserver& o) { o.OnBeforeAllocation(tracker_); });
  // Past the fingerprints every rank allocates; an allocation that fails on
  // one rank is agreed on, so every rank returns its code.
  RETURN_IF_ERROR(AgreeAcrossRanks(*control_, Allocate(), "Engine::Create (allocating the model state)"));
  return absl::OkStatus();
}

absl::Status EngineImpl::CheckFingerprints(const EngineConfig& config, const absl::Status& local) {
  std::string model_text;
  if (local.ok()) {
    for (int u = 0; u < num_units(); ++u) {
      absl::StrAppend(&model_text, plan_.layouts[u].DebugString(), plan_.units[u].trainable ? "" : " frozen", " borrows {");
      for (const std::string& b : model_->units[u]->borrowed_params()) absl::StrAppend(&model_text, " ", b);
      absl::StrAppend(&model_text, " }");
      // The tp partitions: equal local shapes may still cut differently.
      for (const ParamSpec& p : model_->units[u]->params()) {
        if (!p.partition.replicated()) absl::StrAppend(&model_text, " ", p.name, " ", p.partition.DebugString());
      }
      absl::StrAppend(&model_text, "\n");
    }
    for (const std::string& m : plan_.metric_names) absl::StrAppend(&model_text, "metric ", m, "\n");
  }
  EngineConfig hashed = config;
  // Per-rank paths may differ; whether and how long a trace records may not
  // (WriteTrace is collective, after the window's last step).
  hashed.clear_logging();
  if (!config.logging().trace_path().empty()) hashed.mutable_logging()->set_trace_steps(config.logging().trace_steps());
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
      control_->AllReduce(v.data(), static_cast<int64_t>(v.size()), DType::kI32, ReduceOp::kMax)->Wait());
  if (!local.ok()) return local;
  if (v[0] != 0) {
    return RelayedError(absl::StatusCode::kFailedPrecondition,
                        absl::StrCat("Engine::Create failed on another of the ", control_->size(), " ",
                                     ControlGroup(), " ranks (see its error); this rank (", ControlGroup(), " rank ",
                                     control_->rank(), ") was fine"));
  }
  bool model_same = true, config_same = true;
  for (int i = 0; i < 4; ++i) {
    model_same &= v[1 + i] == -v[9 + i];
    config_same &= v[5 + i] == -v[13 + i];
  }
  if (!model_same) {
    int64_t numel = 0;
    for (const FlatParamLayout& l : plan_.layouts) numel += l.numel();
    return absl::FailedPreconditionError(absl::StrFormat(
        "the model differs across the %d %s ranks: %s rank %d has %d units and %d parameters (fingerprint "
        "%016x); every rank must build the same model",
        control_->size(), ControlGroup(), ControlGroup(), control_->rank(), plan_.layouts.size(), numel, model_fp));
  }
  if (!config_same) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the engine config differs across the %d %s ranks: %s rank %d has fingerprint %016x (zero.stage=%d, "
        "gradient_accumulation_steps=%d); every rank must load the same config",
        control_->size(), ControlGroup(), ControlGroup(), control_->rank(), config_fp, config.zero().stage(),
        config.gradient_accumulation_steps()));
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::Allocate() {
  const int L = num_units();
  std::vector<UnitShard*> with_grads;
  std::vector<OptimizerRegion> regions;
  regions_.assign(L, -1);
  const WeightDecayPolicy policy(options_.optimizer.no_decay_patterns);
  for (int u = 0; u < L; ++u) {
    const bool trainable = plan_.units[u].trainable;
    if (!plan_.units[u].held) {  // another pipeline stage's unit
      with_grads.push_back(nullptr);
      shards_.push_back(nullptr);
      continue;
    }
    ASSIGN_OR_RETURN(std::unique_ptr<UnitShard> shard,
                     UnitShard::Create(&plan_.layouts[u], options_.zero, dp_, &tracker_, options_.compute_dtype,
                                       compute_.kernels, trainable));
    shard->set_timeline(timeline_.get());
    if (options_.sharding.quantize_weights) shard->set_weight_quantization(options_.sharding.quantization_block);
    with_grads.push_back(trainable && plan_.units[u].has_params ? shard.get() : nullptr);
    if (trainable && plan_.units[u].has_params) {
      OptimizerRegion region{&plan_.layouts[u], shard->master_begin(), shard->master_numel(), {}};
      for (const ParamSpec& p : model_->units[u]->params()) {
        const float decay = p.weight_decay_mult.has_value()               ? *p.weight_decay_mult
                            : policy.Decays(p.name, p.no_weight_decay) ? 1.0f
                                                                       : 0.0f;
        region.groups.push_back(ParamGroup{decay, p.lr_mult});
      }
      regions_[u] = static_cast<int>(regions.size());
      regions.push_back(std::move(region));
    }
    shards_.push_back(std::move(shard));
  }
  ReductionOptions reduction;
  reduction.replica = replica_;
  if (options_.sharding.quantize_gradients) reduction.quantization_block = options_.sharding.quantization_block;
  reduction.error_feedback = options_.sharding.error_feedback;
  ASSIGN_OR_RETURN(reducer_, GradReducer::Create(with_grads, options_.bucket_bytes, dp_, &tracker_,
                                                 options_.reduce_dtype, compute_.kernels, reduction));
  reducer_->set_timeline(timeline_.get());
  ASSIGN_OR_RETURN(LossScaler scaler, LossScaler::Create(options_.loss_scale));
  scaler_ = std::make_unique<LossScaler>(scaler);
  ASSIGN_OR_RETURN(optimizer_, ShardedOptimizer::Create(options_.optimizer, std::move(regions), &tracker_,
                                                        compute_.kernels));
  ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(options_.lr_schedule));
  schedule_ = std::make_unique<LrSchedule>(schedule);
  RETURN_IF_ERROR(reducer_->SetStagingSlots(plan_.staging_slots));
  state_view_.Init();
  return InitParams();
}

absl::Status EngineImpl::InitParams() {
  const int rank = dp_->rank();
  for (int u = 0; u < num_units(); ++u) {
    if (shards_[u] == nullptr) continue;
    const FlatParamLayout& layout = plan_.layouts[u];
    UnitShard& shard = *shards_[u];
    const std::vector<ParamSpec>& specs = model_->units[u]->params();
    if (shard.master_numel() == 0) continue;
    // Initialised on the host (the same values on any device), then copied.
    std::vector<float> staging;
    if (device() != Device::kCpu) staging.assign(static_cast<size_t>(shard.master_numel()), 0.0f);
    float* master = device() == Device::kCpu ? shard.master() : staging.data();
    if (!options_.zero.shards_master()) {
      // The master covers the whole padded buffer.
      for (size_t p = 0; p < specs.size(); ++p) {
        InitLocalParamSlice(specs[p], options_.seed, tp_rank(), tp_size(), 0, layout.params()[p].numel,
                            master + layout.params()[p].offset);
      }
    } else {
      // Only the slices this rank owns: by global element index (of the
      // whole tensor, across tp slices), the same values as the whole tensor.
      for (const ShardSegment& seg : layout.SegmentsForRank(rank)) {
        InitLocalParamSlice(specs[seg.param_index], options_.seed, tp_rank(), tp_size(), seg.offset_in_param,
                            seg.offset_in_param + seg.length, master + seg.offset_in_shard);
      }
    }
    if (!staging.empty()) {
      RETURN_IF_ERROR(DeviceCopy(shard.master(), device(), staging.data(), Device::kCpu,
                                 staging.size() * sizeof(float)));
    }
  }
  return PublishMasterWeights();
}

absl::Status EngineImpl::PublishMasterWeights() {
  std::vector<std::unique_ptr<Work>> works;
  absl::Status status;
  for (auto& shard : shards_) {
    if (shard == nullptr) continue;
    absl::StatusOr<std::unique_ptr<Work>> w = shard->PublishMaster();
    if (!w.ok()) {
      if (status.ok()) status = w.status();
    } else if (*w != nullptr) {
      works.push_back(std::move(*w));
    }
  }
  for (auto& w : works) {
    absl::Status s = w->Wait();
    if (status.ok()) status = s;
  }
  return status;
}

void EngineImpl::RestoreProgress(int64_t step, int64_t skipped_steps) {
  step_ = step;
  skipped_steps_ = skipped_steps;
  attempts_ = step + skipped_steps;
}

void EngineImpl::RestoreLossScaler(double scale, int64_t clean_streak, int hysteresis_left, int64_t overflows) {
  if (scaler_->options().type == LossScaleType::kNone) return;
  scaler_->Restore(scale, clean_streak, hysteresis_left, overflows);
}

std::vector<std::string> EngineImpl::ParamNames() const {
  std::vector<std::string> names;
  for (const FlatParamLayout& l : plan_.layouts) {
    for (const FlatParamInfo& p : l.params()) names.push_back(p.name);
  }
  return names;
}

std::string EngineImpl::ControlGroup() const {
  return control_->name().substr(0, control_->name().find('.'));
}

std::vector<bool> Engine::checkpointed_units() const {
  std::vector<bool> out;
  for (const UnitPlan& u : plan().units) out.push_back(u.checkpointed);
  return out;
}

EngineStats EngineImpl::stats() const {
  EngineStats s;
  s.step = step_;
  s.skipped_steps = skipped_steps_;
  s.peak_gathered_units = peak_gathered_;
  s.peak_kept_activations = peak_kept_;
  return s;
}

absl::Status EngineImpl::CheckUsable() const {
  if (broken_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the engine is unusable after a failure in the middle of a collective sequence: ", broken_.message()));
}

}  // namespace zeroshard
