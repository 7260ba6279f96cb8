// The engine's state view (engine/state_view.h) over the sharded state
// (engine/sharded_state.h).
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/device.h"
#include "core/status_macros.h"
#include "engine/engine_impl.h"

namespace zeroshard {
namespace {

// The offload store's kind (engine/offload_store.h) of a streamed kind.
int StoreKind(int kind) {
  if (kind == EngineStateView::kMaster) return -1;
  if (kind == EngineStateView::kGrad) return OffloadStore::kGradsKind;
  return kind - EngineStateView::kFirstOptimizerKind;
}

}  // namespace

void EngineStateViewImpl::Init(ShardedState* state, DType compute) {
  state_ = state;
  kinds_ = {{"params", compute, static_cast<int64_t>(DTypeSize(compute)), ""},
            {"master", DType::kF32, 4, "master"},
            {"grad", DType::kF32, 4, ""}};
  for (const OptimizerStateKind& k : state_->optimizer().state_kinds()) {
    kinds_.push_back({k.name, k.dtype, k.bytes_per_element, k.checkpoint_name});
  }
}

int EngineStateViewImpl::num_units() const { return state_->num_units(); }

StateRegion EngineStateViewImpl::region(int unit, int kind) const {
  StateRegion r;
  if (unit < 0 || unit >= num_units() || kind < 0 || kind >= num_kinds()) return r;
  const UnitShard* shard = state_->unit_shard(unit);
  if (shard == nullptr) return r;  // another pipeline stage's unit
  const FlatParamLayout& layout = state_->layout(unit);
  r.dtype = kinds_[kind].dtype;
  r.device = state_->device();
  if (kind == kParams) {
    r.present = true;
    r.begin = shard->zero().shards_params() ? shard->master_begin() : 0;
    r.length = shard->zero().shards_params() ? layout.shard_numel() : layout.padded_numel();
  } else if (kind == kMaster) {
    r.present = state_->holds_master(unit);  // not a tied mirror's
    r.begin = shard->master_begin();
    r.length = r.present ? shard->master_numel() : 0;
  } else if (kind == kGrad) {
    r.present = const_cast<UnitShard*>(shard)->grad_shard() != nullptr || Streamed(unit, kind);
    r.begin = layout.ShardBegin(shard->rank());
    r.length = r.present ? layout.shard_numel() : 0;
  } else {
    r.present = state_->optimizer_region(unit) >= 0;
    r.begin = shard->master_begin();
    r.length = r.present ? shard->master_numel() : 0;
  }
  if (!r.present) r.begin = 0;
  r.shape = {r.length};
  r.bytes = r.length * kinds_[kind].bytes_per_element;
  return r;
}

const void* EngineStateViewImpl::data(int unit, int kind) const {
  return const_cast<EngineStateViewImpl*>(this)->data(unit, kind);
}

bool EngineStateViewImpl::Streamed(int unit, int kind) const {
  if (kind == kParams) return state_->params_stream(unit);
  if (kind == kMaster) return state_->master_streams(unit) || state_->master_on_host(unit);
  if (kind == kGrad) {
    return state_->offload() != nullptr && state_->offload()->streams_grads() && state_->optimizer_region(unit) >= 0;
  }
  return kind >= kFirstOptimizerKind && (state_->state_streams() || state_->host_offload() != nullptr) &&
         state_->optimizer_region(unit) >= 0;
}

void* EngineStateViewImpl::data(int unit, int kind) {
  // On the NVMe tier nothing is resident: Read and Write go through the file
  // (host offload on a GPU: through the host buffers, not on the device).
  if (!region(unit, kind).present || Streamed(unit, kind)) return nullptr;
  UnitShard& shard = *state_->unit_shard(unit);
  switch (kind) {
    case kParams:
      return shard.zero().shards_params() ? shard.param_shard() : shard.full_params();
    case kMaster:
      return shard.master();
    case kGrad:
      return shard.grad_shard();
    default:
      return state_->optimizer().mutable_state(kind - kFirstOptimizerKind, state_->optimizer_region(unit)).data();
  }
}

absl::Status EngineStateViewImpl::CheckRange(int unit, int kind, int64_t offset, int64_t count) const {
  if (unit < 0 || unit >= num_units()) {
    return absl::InvalidArgumentError(
        absl::StrCat("state view: unit ", unit, " is not one of the ", num_units(), " units"));
  }
  if (kind < 0 || kind >= num_kinds()) {
    return absl::InvalidArgumentError(
        absl::StrCat("state view: kind ", kind, " is not one of the ", num_kinds(), " kinds"));
  }
  const StateRegion r = region(unit, kind);
  if (offset < 0 || count < 0 || offset + count > r.length) {
    return absl::OutOfRangeError(absl::StrCat("state view: elements [", offset, ", ", offset + count, ") of unit ",
                                              unit, " ('", state_->layout(unit).unit_name(), "') kind '",
                                              kinds_[kind].name, "', whose region here has ", r.length, " elements",
                                              r.present ? "" : " (not held)"));
  }
  return absl::OkStatus();
}

absl::Status EngineStateViewImpl::Read(int unit, int kind, int64_t offset, int64_t count, void* host_out) const {
  RETURN_IF_ERROR(CheckRange(unit, kind, offset, count));
  if (count == 0) return absl::OkStatus();
  if (kind == kParams && Streamed(unit, kind)) {
    const int64_t size = kinds_[kind].bytes_per_element;
    return state_->param_store()->Read(unit, offset * size, count * size, host_out);
  }
  if (Streamed(unit, kind) && state_->host_offload() != nullptr) {
    return state_->host_offload()->Read(state_->optimizer_region(unit),
                                        kind == kMaster ? -1 : kind - kFirstOptimizerKind, offset, count,
                                        static_cast<float*>(host_out));
  }
  if (Streamed(unit, kind)) {
    return state_->offload()->ReadRange(state_->optimizer_region(unit), StoreKind(kind), offset, count, host_out);
  }
  const int64_t size = kinds_[kind].bytes_per_element;
  const char* src = static_cast<const char*>(data(unit, kind)) + offset * size;
  return DeviceCopy(host_out, Device::kCpu, src, state_->device(), static_cast<size_t>(count * size));
}

absl::Status EngineStateViewImpl::Write(int unit, int kind, int64_t offset, int64_t count, const void* host_in) {
  RETURN_IF_ERROR(CheckRange(unit, kind, offset, count));
  if (count == 0) return absl::OkStatus();
  if (kind == kParams && Streamed(unit, kind)) {
    const int64_t size = kinds_[kind].bytes_per_element;
    return state_->param_store()->Write(unit, offset * size, count * size, host_in);
  }
  if (Streamed(unit, kind) && state_->host_offload() != nullptr) {
    return state_->host_offload()->Write(state_->optimizer_region(unit),
                                         kind == kMaster ? -1 : kind - kFirstOptimizerKind, offset, count,
                                         static_cast<const float*>(host_in));
  }
  if (Streamed(unit, kind)) {
    return state_->offload()->WriteRange(state_->optimizer_region(unit), StoreKind(kind), offset, count, host_in);
  }
  const int64_t size = kinds_[kind].bytes_per_element;
  char* dst = static_cast<char*>(data(unit, kind)) + offset * size;
  return DeviceCopy(dst, state_->device(), host_in, Device::kCpu, static_cast<size_t>(count * size));
}

absl::Status EngineStateViewImpl::Commit() { return state_->PublishMasterWeights(); }

}  // namespace zeroshard
