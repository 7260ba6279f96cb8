#include "engine/sharded_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/optimizer_program.h"
#include "nn/param_init.h"
#include "sharding/weight_decay_policy.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<ShardedState>> ShardedState::Create(const StepPlan& plan, const Model& model,
                                                                   const EngineOptions& options, Communicator* dp,
                                                                   Communicator* replica, Communicator* embedding,
                                                                   MemoryTracker* tracker,
                                                                   const ComputeContext& compute, Timeline* timeline) {
  std::unique_ptr<ShardedState> state(new ShardedState());
  state->plan_ = &plan;
  state->dp_ = dp;
  state->embedding_ = embedding;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    if (plan.units[u].tied && embedding == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unit '", plan.layouts[u].unit_name(),
                                                     "' is tied across pipeline stages, but no embedding-group "
                                                     "communicator was given"));
    }
  }
  state->device_ = options.device;
  state->shards_master_ = options.zero.shards_master();
  const int L = static_cast<int>(plan.layouts.size());
  std::vector<UnitShard*> with_grads;
  std::vector<OptimizerRegion> regions;
  state->regions_.assign(L, -1);
  const WeightDecayPolicy policy(options.optimizer.no_decay_patterns);
  // The NVMe tier: the master of every unit with an optimizer region, and
  // the optimizer state, live in the store's files.
  const bool streams = StreamedBytesPerElement(options) > 0;
  const bool master_nvme = streams && options.offload.master_weights == OffloadTier::kNvme;
  const bool state_nvme = streams && options.offload.optimizer_state == OffloadTier::kNvme;
  const bool grads_nvme = streams && options.offload.grads == OffloadTier::kNvme && options.zero.shards_grads();
  // The parameter shards on the NVMe tier (stage 3), staged in param slots.
  const std::vector<int64_t> param_bytes = StreamedParamShardBytes(plan, options);
  // Host offload on a GPU: masters and state in pinned host memory, the
  // update on the CPU with the CPU kernels.
  const bool host = UsesHostOffload(options);
  state->host_kernels_ = host ? kernels::KernelContext::Cpu(options.threads_per_rank) : compute.kernels;
  for (int u = 0; u < L; ++u) {
    const bool trainable = plan.units[u].trainable;
    if (!plan.units[u].held) {  // another pipeline stage's unit
      with_grads.push_back(nullptr);
      state->shards_.push_back(nullptr);
      continue;
    }
    const bool region = plan.units[u].optimized();
    // A mirror's master stays with the owner; its parameters come by
    // PublishTiedParams.
    const bool resident_master = plan.units[u].keeps_master() && !((master_nvme || host) && region);
    ASSIGN_OR_RETURN(std::unique_ptr<UnitShard> shard,
                     UnitShard::Create(&plan.layouts[u], options.zero, dp, tracker, options.compute_dtype,
                                       compute.kernels, trainable, resident_master,
                                       /*resident_params=*/param_bytes.empty() || param_bytes[u] == 0,
                                       /*resident_grads=*/!(grads_nvme && region)));
    shard->set_timeline(timeline);
    if (options.sharding.quantize_weights) shard->set_weight_quantization(options.sharding.quantization_block);
    with_grads.push_back(plan.units[u].has_grads() ? shard.get() : nullptr);
    if (region) {
      OptimizerRegion region{&plan.layouts[u], shard->master_begin(), shard->master_numel(), {}};
      for (const ParamSpec& p : model.units[u]->params()) {
        const float decay = p.weight_decay_mult.has_value()            ? *p.weight_decay_mult
                            : policy.Decays(p.name, p.no_weight_decay) ? 1.0f
                                                                       : 0.0f;
        region.groups.push_back(ParamGroup{decay, p.lr_mult});
      }
      state->regions_[u] = static_cast<int>(regions.size());
      regions.push_back(std::move(region));
    }
    state->shards_.push_back(std::move(shard));
  }
  ReductionOptions reduction;
  reduction.replica = replica;
  if (options.sharding.quantize_gradients) reduction.quantization_block = options.sharding.quantization_block;
  reduction.error_feedback = options.sharding.error_feedback;
  if (options.sharding.quantize_replicas) reduction.replica_quantization_block = options.sharding.quantization_block;
  ASSIGN_OR_RETURN(state->reducer_, GradReducer::Create(with_grads, options.bucket_bytes, dp, tracker,
                                                        options.reduce_dtype, compute.kernels, reduction));
  state->reducer_->set_timeline(timeline);
  ASSIGN_OR_RETURN(LossScaler scaler, LossScaler::Create(options.loss_scale));
  state->scaler_ = std::make_unique<LossScaler>(scaler);
  ASSIGN_OR_RETURN(state->optimizer_,
                   ShardedOptimizer::Create(options.optimizer, std::move(regions), tracker, state->host_kernels_,
                                            /*allocate_state=*/!(state_nvme || host)));
  if (host) {
    std::unique_ptr<HostTransfers> transfers;
    if (options.device == Device::kCpu) {
      transfers = std::make_unique<MemcpyHostTransfers>();
    } else {
      ASSIGN_OR_RETURN(transfers, CreateCudaHostTransfers(compute.kernels.cuda_stream));
    }
    std::vector<int64_t> numel;
    for (int r = 0; r < state->optimizer_->num_regions(); ++r) numel.push_back(state->optimizer_->region(r).length);
    ASSIGN_OR_RETURN(state->host_offload_,
                     HostOffload::Create(std::move(numel), static_cast<int>(state->optimizer_->state_kinds().size()),
                                         options.compute_dtype, tracker, std::move(transfers)));
    state->reduce_waits_per_step_.assign(plan.buckets.size(), 0);
    state->reduce_waits_seen_.assign(plan.buckets.size(), 0);
    for (const Action& a : plan.train.actions) {
      if (a.kind == ActionKind::kWaitReduce) ++state->reduce_waits_per_step_[a.bucket];
    }
  }
  if (streams) {
    if (options.device != Device::kCpu) {
      return absl::UnimplementedError(
          "engine.offload: the NVME tier streams on a cpu device only (engine.device.type: CPU)");
    }
    OffloadStoreOptions store;
    store.offload = options.offload;
    store.master = master_nvme;
    store.state_kinds = state_nvme ? static_cast<int>(state->optimizer_->state_kinds().size()) : 0;
    store.grads = grads_nvme;
    store.grad_staging_bytes = GradStagingBytes(plan, options);
    store.rank = plan.stage * dp->size() + dp->rank();
    for (int r = 0; r < state->optimizer_->num_regions(); ++r) {
      store.region_numel.push_back(state->optimizer_->region(r).length);
    }
    store.chunks = plan.train.chunks;
    for (const OffloadChunk& c : plan.train.chunks) store.chunk_region.push_back(state->regions_[c.unit]);
    store.chunk_elements = plan.train.chunk_elements > 0
                               ? plan.train.chunk_elements
                               : StreamChunkElements(options.offload.buffer_bytes, StreamedBytesPerElement(options));
    ASSIGN_OR_RETURN(state->offload_, OffloadStore::Create(std::move(store), tracker));
  }
  if (!param_bytes.empty()) {
    if (options.device != Device::kCpu) {
      return absl::UnimplementedError(
          "engine.offload.params: the NVME tier streams on a cpu device only (engine.device.type: CPU)");
    }
    ParamShardStoreOptions store;
    store.offload = options.offload;
    store.rank = plan.stage * dp->size() + dp->rank();
    store.shard_bytes = param_bytes;
    store.slots = ParamShardSlots(plan, options);
    ASSIGN_OR_RETURN(state->param_store_, ParamShardStore::Create(std::move(store), tracker));
  }
  ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(options.lr_schedule));
  state->schedule_ = std::make_unique<LrSchedule>(schedule);
  RETURN_IF_ERROR(state->reducer_->SetStagingSlots(plan.staging_slots));
  return state;
}

ShardedState::~ShardedState() = default;

absl::Status ShardedState::DrainIo() {
  absl::Status s = offload_ == nullptr ? absl::OkStatus() : offload_->Drain();
  absl::Status p = param_store_ == nullptr ? absl::OkStatus() : param_store_->Drain();
  return s.ok() ? p : s;
}

OffloadIoDelta ShardedState::TakeIo() {
  OffloadIoDelta d;
  for (const OffloadIoDelta& part : {offload_ == nullptr ? OffloadIoDelta() : offload_->TakeIo(),
                                     param_store_ == nullptr ? OffloadIoDelta() : param_store_->TakeIo()}) {
    d.read_bytes += part.read_bytes;
    d.write_bytes += part.write_bytes;
    d.busy_seconds += part.busy_seconds;
  }
  return d;
}

void ShardedState::ReleaseAll() {
  for (auto& shard : shards_) {
    if (shard != nullptr) shard->Release().IgnoreError();
  }
  if (reducer_ != nullptr) reducer_->FinishAll().IgnoreError();
  DrainIo().IgnoreError();
  if (host_offload_ != nullptr) host_offload_->Drain().IgnoreError();
}

absl::Status ShardedState::ReadMaster(int unit, int64_t offset, int64_t count, float* out) {
  if (!holds_master(unit)) {
    return absl::FailedPreconditionError(absl::StrCat("unit '", plan_->layouts[unit].unit_name(),
                                                      "': this rank holds no master of it (a tied mirror's "
                                                      "master is on the owning pipeline stage)"));
  }
  if (master_streams(unit)) return offload_->ReadRange(regions_[unit], -1, offset, count, out);
  if (master_on_host(unit)) return host_offload_->Read(regions_[unit], -1, offset, count, out);
  return DeviceCopy(out, Device::kCpu, shards_[unit]->master() + offset, device_,
                    static_cast<size_t>(count) * sizeof(float));
}

absl::Status ShardedState::InitParams(const Model& model, uint64_t seed, int tp_rank, int tp_size) {
  const int rank = dp_->rank();
  absl::Status streamed;  // kept, so that every rank still publishes
  for (int u = 0; u < num_units(); ++u) {
    if (shards_[u] == nullptr) continue;
    const FlatParamLayout& layout = plan_->layouts[u];
    UnitShard& shard = *shards_[u];
    const std::vector<ParamSpec>& specs = model.units[u]->params();
    if (shard.master_numel() == 0 || !holds_master(u)) continue;
    if (master_streams(u)) {
      // Streamed to the file window by window (one chunk of memory).
      const int64_t n = offload_->chunk_elements();
      std::vector<float> window(static_cast<size_t>(n));
      for (int64_t w = 0; w < shard.master_numel(); w += n) {
        const int64_t len = std::min(n, shard.master_numel() - w);
        std::fill(window.begin(), window.end(), 0.0f);
        for (const ShardSegment& seg : layout.SegmentsInRange(shard.master_begin() + w, len)) {
          InitLocalParamSlice(specs[seg.param_index], seed, tp_rank, tp_size, seg.offset_in_param,
                              seg.offset_in_param + seg.length, window.data() + seg.offset_in_shard);
        }
        absl::Status s = offload_->WriteRange(regions_[u], -1, w, len, window.data());
        if (!s.ok() && streamed.ok()) streamed = s;
      }
      continue;
    }
    // Initialised on the host (the same values on any device), then copied.
    std::vector<float> staging;
    const bool on_host = device_ == Device::kCpu || master_on_host(u);
    if (!on_host) staging.assign(static_cast<size_t>(shard.master_numel()), 0.0f);
    float* master = master_on_host(u) ? host_offload_->master(regions_[u])
                    : device_ == Device::kCpu ? shard.master()
                                              : staging.data();
    if (!shards_master_) {
      // The master covers the whole padded buffer.
      for (size_t p = 0; p < specs.size(); ++p) {
        InitLocalParamSlice(specs[p], seed, tp_rank, tp_size, 0, layout.params()[p].numel,
                            master + layout.params()[p].offset);
      }
    } else {
      // Only the slices this rank owns: by global element index (of the
      // whole tensor, across tp slices), the same values as the whole tensor.
      for (const ShardSegment& seg : layout.SegmentsForRank(rank)) {
        InitLocalParamSlice(specs[seg.param_index], seed, tp_rank, tp_size, seg.offset_in_param,
                            seg.offset_in_param + seg.length, master + seg.offset_in_shard);
      }
    }
    if (!staging.empty()) {
      RETURN_IF_ERROR(
          DeviceCopy(shard.master(), device_, staging.data(), Device::kCpu, staging.size() * sizeof(float)));
    }
  }
  absl::Status published = PublishMasterWeights();
  return streamed.ok() ? published : streamed;
}

absl::Status ShardedState::PublishMasterWeights() {
  std::vector<std::unique_ptr<Work>> works;
  absl::Status status;
  // Streamed parameter shards are rounded in param slot 0 and written to
  // the file unit by unit (one shard of memory).
  if (param_store_ != nullptr) {
    absl::Status drained = param_store_->Drain();
    if (!drained.ok()) status = drained;
  }
  for (int u = 0; u < num_units(); ++u) {
    UnitShard* shard = shards_[u].get();
    if (shard == nullptr || !holds_master(u)) continue;
    if (params_stream(u)) shard->BindParamShard(param_store_->slot(0));
    if (master_streams(u)) {
      // Rounded window by window from the file; the all-gather is issued
      // whatever happened, so no rank is left in it.
      const int64_t n = offload_->chunk_elements();
      std::vector<float> window(static_cast<size_t>(n));
      for (int64_t w = 0; w < shard->master_numel() && status.ok(); w += n) {
        const int64_t len = std::min(n, shard->master_numel() - w);
        absl::Status s = offload_->ReadRange(regions_[u], -1, w, len, window.data());
        if (s.ok()) s = shard->RoundMasterRange(w, len, window.data());
        if (!s.ok()) status = s;
      }
    }
    if (master_on_host(u) && status.ok()) {
      absl::Status s = PushHostParams(u);
      if (s.ok()) s = host_offload_->OrderParams(regions_[u]);
      if (!s.ok()) status = s;
    }
    absl::StatusOr<std::unique_ptr<Work>> w =
        master_streams(u) || master_on_host(u) ? shard->PublishRounded() : shard->PublishMaster();
    if (!w.ok()) {
      if (status.ok()) status = w.status();
    } else if (*w != nullptr) {
      works.push_back(std::move(*w));
    }
    if (params_stream(u) && status.ok()) {
      // Stage 3 issues no collective here: the slot is free again once written.
      const int64_t bytes = shard->layout().shard_numel() * static_cast<int64_t>(DTypeSize(shard->compute_dtype()));
      status = param_store_->Write(u, 0, bytes, param_store_->slot(0));
    }
  }
  for (auto& w : works) {
    absl::Status s = w->Wait();
    if (status.ok()) status = s;
  }
  // Every rank of both ends takes part whatever happened above.
  for (int u = 0; u < num_units(); ++u) {
    UnitShard* shard = shards_[u].get();
    if (shard == nullptr || !plan_->units[u].tied) continue;
    const int64_t bytes = shard->layout().shard_numel() * static_cast<int64_t>(DTypeSize(shard->compute_dtype()));
    if (params_stream(u)) {
      shard->BindParamShard(param_store_->slot(0));
      if (holds_master(u) && status.ok()) status = param_store_->Read(u, 0, bytes, param_store_->slot(0));
    }
    absl::Status s = PublishTiedParams(u, [](Work& w, int64_t) { return w.Wait(); });
    if (status.ok()) status = s;
    if (params_stream(u) && !holds_master(u) && status.ok()) {
      status = param_store_->Write(u, 0, bytes, param_store_->slot(0));
    }
  }
  return status;
}

absl::Status ShardedState::PublishTiedParams(int unit, const std::function<absl::Status(Work&, int64_t)>& wait) {
  UnitShard& shard = *shards_[unit];
  const FlatParamLayout& layout = plan_->layouts[unit];
  if (layout.shard_numel() == 0) return absl::OkStatus();
  // The embedding group's ranks are in pipeline-stage order, the first and
  // the last stage (engine/pipeline_plan.h).
  const int root = plan_->units[unit].stage == 0 ? 0 : embedding_->size() - 1;
  const int64_t count = shards_master_ ? layout.shard_numel() : layout.padded_numel();
  void* params = shards_master_ ? shard.param_shard() : shard.full_params();
  const int64_t size = static_cast<int64_t>(DTypeSize(shard.compute_dtype()));
  std::unique_ptr<Work> sent = embedding_->Broadcast(params, count, shard.compute_dtype(), root);
  RETURN_IF_ERROR(wait(*sent, count * size));
  if (holds_master(unit)) return absl::OkStatus();
  // The mirror's slice is in place: stages 1-2 complete the full buffer.
  ASSIGN_OR_RETURN(std::unique_ptr<Work> gathered, shard.PublishRounded());
  if (gathered == nullptr) return absl::OkStatus();
  return wait(*gathered, layout.shard_numel() * size);
}

absl::Status ShardedState::FetchReducedGrads(int bucket) {
  if (host_offload_ == nullptr || !shards_master_) return absl::OkStatus();
  // Only the step's last reduction of the bucket leaves the final shard (a
  // failed step leaves the engine unusable, so the count never drifts).
  const int64_t per_step = reduce_waits_per_step_[bucket];
  if (per_step > 0 && ++reduce_waits_seen_[bucket] % per_step != 0) return absl::OkStatus();
  for (int u : plan_->buckets[bucket].units) {
    if (regions_[u] < 0 || plan_->units[u].tied) continue;
    RETURN_IF_ERROR(host_offload_->FetchGrads(regions_[u], shards_[u]->grad_shard()));
  }
  return absl::OkStatus();
}

absl::Status ShardedState::PushHostParams(int unit) {
  UnitShard& shard = *shards_[unit];
  // Where the master's region sits in the compute parameters: the rank's
  // shard (its slice of the full buffer at stages 1-2), or stage 0's whole
  // buffer.
  void* dst = shards_master_ ? shard.param_shard() : shard.full_params();
  return host_offload_->PushParams(regions_[unit], dst, host_kernels_);
}

void ShardedState::RestoreProgress(int64_t step, int64_t skipped_steps) {
  step_ = step;
  skipped_steps_ = skipped_steps;
  attempts_ = step + skipped_steps;
}

}  // namespace zeroshard
