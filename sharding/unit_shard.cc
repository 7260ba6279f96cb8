#include "sharding/unit_shard.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "kernels/cast.h"
#include "kernels/quantize.h"
#include "sharding/quantized_shard.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<UnitShard>> UnitShard::Create(const FlatParamLayout* layout, const ZeroPolicy& zero,
                                                             Communicator* dp, MemoryTracker* tracker,
                                                             DType compute_dtype, const kernels::KernelContext& kernels,
                                                             bool trainable, bool resident_master,
                                                             bool resident_params, bool resident_grads) {
  if (compute_dtype != DType::kF32 && compute_dtype != DType::kBF16 && compute_dtype != DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("compute dtype is ", DTypeName(compute_dtype), ", expected f32, bf16 or f16"));
  }
  if (layout->dp() != dp->size()) {
    return absl::InvalidArgumentError(absl::StrCat("unit '", layout->unit_name(), "' is laid out for dp ",
                                                   layout->dp(), " but the dp communicator has ", dp->size(),
                                                   " ranks"));
  }
  std::unique_ptr<UnitShard> u(new UnitShard());
  u->layout_ = layout;
  u->zero_ = zero;
  u->rank_ = dp->rank();
  u->dp_ = dp;
  u->tracker_ = tracker;
  u->device_ = dp->device();
  u->compute_dtype_ = compute_dtype;
  u->kernels_ = kernels;
  u->trainable_ = trainable;
  const int64_t P = layout->padded_numel();
  const int64_t S = layout->shard_numel();
  const Device d = u->device_;
  if (!resident_params && !zero.shards_params()) {
    return absl::InvalidArgumentError(absl::StrCat("unit '", layout->unit_name(),
                                                   "': parameters off the device need ZeRO stage 3 shards"));
  }
  if (!resident_grads && (!zero.shards_grads() || !trainable)) {
    return absl::InvalidArgumentError(absl::StrCat("unit '", layout->unit_name(),
                                                   "': gradients off the device need a trainable unit at ZeRO "
                                                   "stage 2 or 3 (an f32 gradient shard)"));
  }
  u->external_params_ = !resident_params;
  u->external_grads_ = !resident_grads;
  if (resident_params) {
    ASSIGN_OR_RETURN(u->params_, Buffer::AllocateZeroed(tracker, MemoryCategory::kParams, d, compute_dtype,
                                                        zero.shards_params() ? S : P));
  }
  u->master_numel_ = zero.shards_master() ? S : P;
  if (resident_master) {
    ASSIGN_OR_RETURN(u->master_, Buffer::AllocateZeroed(tracker, MemoryCategory::kMasterParams, d, DType::kF32,
                                                        u->master_numel_));
  }
  if (!trainable) {
    // Frozen: no gradients at any stage.
  } else if (!zero.shards_grads()) {
    ASSIGN_OR_RETURN(u->full_grads_, Buffer::AllocateZeroed(tracker, MemoryCategory::kGrads, d, compute_dtype, P));
  } else if (resident_grads) {
    ASSIGN_OR_RETURN(u->grad_shard_, Buffer::AllocateZeroed(tracker, MemoryCategory::kGrads, d, DType::kF32, S));
  }
  return u;
}

void* UnitShard::param_shard() {
  if (external_params_) return bound_params_;
  if (zero_.shards_params()) return params_.data();
  return params_.as<char>() + layout_->ShardBegin(rank_) * static_cast<int64_t>(DTypeSize(compute_dtype_));
}

void* UnitShard::full_params() {
  if (!zero_.shards_params()) return params_.data();
  return gather_state_ == GatherState::kGathered ? gathered_.data() : nullptr;
}

absl::Status UnitShard::StartGather() {
  if (!zero_.gathers_params() || gather_state_ != GatherState::kReleased) return absl::OkStatus();
  if (layout_->padded_numel() == 0) {  // nothing to move: every rank skips alike
    gather_state_ = GatherState::kGathered;
    return absl::OkStatus();
  }
  // An f32/bf16 gather writes every element; int8 parts dequantize their
  // parameters' runs only, so the padding between is zeroed first.
  const auto allocate = quantization_block_ > 0 ? &Buffer::AllocateZeroed : &Buffer::Allocate;
  ASSIGN_OR_RETURN(gathered_, allocate(tracker_, MemoryCategory::kParams, device_, compute_dtype_,
                                       layout_->padded_numel()));
  gather_issued_ = std::chrono::steady_clock::now();
  if (quantization_block_ > 0) {
    const int64_t packed = packed_part_bytes_;
    absl::Status s = AllocateQuantizedGather(packed);
    if (s.ok()) {
      s = QuantizeShard(kernels_, quantized_send_.data(), param_shard(), compute_dtype_, quantization_runs_[rank_],
                        quantization_block_, kernels::NonFiniteInput::kPropagate);
    }
    if (!s.ok()) {
      gathered_.Reset();
      quantized_send_.Reset();
      quantized_recv_.Reset();
      return s;
    }
    gather_work_ = dp_->AllGather(quantized_send_.data(), quantized_recv_.data(), packed, DType::kI8);
  } else {
    gather_work_ = dp_->AllGather(param_shard(), gathered_.data(), layout_->shard_numel(), compute_dtype_);
  }
  gather_state_ = GatherState::kInFlight;
  ++gathers_;
  return absl::OkStatus();
}

absl::Status UnitShard::WaitGather() {
  if (!zero_.gathers_params() || gather_state_ == GatherState::kGathered) return absl::OkStatus();
  RETURN_IF_ERROR(StartGather());
  if (gather_state_ == GatherState::kGathered) return absl::OkStatus();  // nothing to move (no parameters)
  const bool quantized = !quantized_recv_.empty();
  absl::Status s = WaitGatherWork();
  if (s.ok() && quantized) s = DequantizeGathered();
  quantized_send_.Reset();
  quantized_recv_.Reset();
  if (!s.ok()) {
    gathered_.Reset();
    gather_state_ = GatherState::kReleased;
    return s;
  }
  gather_state_ = GatherState::kGathered;
  return absl::OkStatus();
}

absl::Status UnitShard::WaitGatherWork() {
  const bool quantized = !quantized_recv_.empty();
  // Compute that uses the gathered buffer waits on the stream (a host wait
  // for host backends).
  absl::Status s = WaitTracedOn(*gather_work_, kernels_.cuda_stream, timeline_, "gather",
                                quantized ? "AllGather int8" : "AllGather", layout_->unit_name(), gather_issued_,
                                quantized ? quantized_recv_.bytes() : gathered_.bytes());
  gather_work_.reset();
  return s;
}

absl::Status UnitShard::AllocateQuantizedGather(int64_t packed_bytes) {
  ASSIGN_OR_RETURN(quantized_send_,
                   Buffer::AllocateZeroed(tracker_, MemoryCategory::kCommBuffers, device_, DType::kI8, packed_bytes));
  ASSIGN_OR_RETURN(quantized_recv_, Buffer::AllocateZeroed(tracker_, MemoryCategory::kCommBuffers, device_, DType::kI8,
                                                     packed_bytes * dp_->size()));
  return absl::OkStatus();
}

absl::Status UnitShard::DequantizeGathered() {
  const int64_t S = layout_->shard_numel();
  const int64_t dtype_size = static_cast<int64_t>(DTypeSize(compute_dtype_));
  for (int r = 0; r < dp_->size(); ++r) {
    RETURN_IF_ERROR(DequantizeShard(kernels_, gathered_.as<char>() + r * S * dtype_size, compute_dtype_,
                                    quantized_recv_.as<char>() + r * packed_part_bytes_, quantization_runs_[r],
                                    quantization_block_));
  }
  return absl::OkStatus();
}

void UnitShard::set_weight_quantization(int64_t block) {
  quantization_block_ = block;
  quantization_runs_.clear();
  packed_part_bytes_ = 0;
  if (block <= 0) return;
  for (int r = 0; r < layout_->dp(); ++r) quantization_runs_.push_back(QuantizationRuns(*layout_, r));
  packed_part_bytes_ = MaxPackedShardBytes(*layout_, block);
}

absl::Status UnitShard::Release() {
  if (!zero_.gathers_params() || gather_state_ == GatherState::kReleased) return absl::OkStatus();
  absl::Status s = gather_work_ != nullptr ? WaitGatherWork() : absl::OkStatus();
  gathered_.Reset();
  quantized_send_.Reset();
  quantized_recv_.Reset();
  gather_state_ = GatherState::kReleased;
  return s;
}

absl::Status UnitShard::EnsureFullGrads() {
  if (!trainable_ || !full_grads_.empty() || layout_->padded_numel() == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(full_grads_, Buffer::AllocateZeroed(tracker_, MemoryCategory::kGrads, device_, compute_dtype_,
                                                 layout_->padded_numel()));
  return absl::OkStatus();
}

void UnitShard::FreeFullGrads() {
  if (zero_.shards_grads()) full_grads_.Reset();
}

absl::Status UnitShard::ZeroFullGrads() {
  if (full_grads_.empty()) return absl::OkStatus();
  return DeviceMemset(full_grads_.data(), device_, 0, full_grads_.bytes());
}

absl::Status UnitShard::EnsureGradShard() {
  if (!trainable_ || !grad_shard_.empty() || layout_->shard_numel() == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(grad_shard_, Buffer::AllocateZeroed(tracker_, MemoryCategory::kGrads, device_, DType::kF32,
                                                 layout_->shard_numel()));
  return absl::OkStatus();
}

void UnitShard::FreeGradShard() {
  if (zero_.grad_shard_per_step()) grad_shard_.Reset();
}

absl::Status UnitShard::ZeroGradShard() {
  if (grad_shard_.empty()) return absl::OkStatus();
  return DeviceMemset(grad_shard_.data(), device_, 0, grad_shard_.bytes());
}

absl::Status UnitShard::CopyMasterTo(void* dst) {
  if (master_.empty()) return absl::OkStatus();
  // A cast to the same dtype is a copy; on the kernels' device and threads.
  return kernels::Cast(kernels_, dst, compute_dtype_, master_.data(), DType::kF32, master_.numel());
}

absl::Status UnitShard::RoundMasterRange(int64_t offset, int64_t length, const float* master) {
  if (offset < 0 || length < 0 || offset + length > master_numel_) {
    return absl::OutOfRangeError(absl::StrCat("unit '", layout_->unit_name(), "': master range [", offset, ", ",
                                              offset + length, ") outside its ", master_numel_, " elements"));
  }
  if (length == 0) return absl::OkStatus();
  char* base = static_cast<char*>(zero_.shards_master() ? param_shard() : params_.data());
  return kernels::Cast(kernels_, base + offset * static_cast<int64_t>(DTypeSize(compute_dtype_)), compute_dtype_,
                       master, DType::kF32, length);
}

absl::StatusOr<std::unique_ptr<Work>> UnitShard::PublishRounded() {
  const int64_t S = layout_->shard_numel();
  if (!zero_.shards_master() || !zero_.publishes_by_all_gather() || S == 0) return std::unique_ptr<Work>();
  return dp_->AllGather(param_shard(), params_.data(), S, compute_dtype_);
}

absl::StatusOr<std::unique_ptr<Work>> UnitShard::PublishMaster() {
  const int64_t S = layout_->shard_numel();
  if (!resident_master()) {
    return absl::FailedPreconditionError(absl::StrCat("unit '", layout_->unit_name(),
                                                      "': the master is not resident; round it by range "
                                                      "(RoundMasterRange) and PublishRounded"));
  }
  if (!zero_.shards_master()) {
    RETURN_IF_ERROR(CopyMasterTo(params_.data()));
    return std::unique_ptr<Work>();
  }
  RETURN_IF_ERROR(CopyMasterTo(param_shard()));
  if (!zero_.publishes_by_all_gather() || S == 0) return std::unique_ptr<Work>();
  // In place: this rank's slice is already at params + rank*S.
  return dp_->AllGather(param_shard(), params_.data(), S, compute_dtype_);
}

}  // namespace zeroshard
