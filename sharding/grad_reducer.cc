#include "sharding/grad_reducer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "kernels/accumulate.h"
#include "kernels/cast.h"
#include "kernels/quantize.h"
#include "kernels/scale.h"
#include "sharding/quantized_shard.h"

namespace zeroshard {

std::vector<GradBucket> FormGradBuckets(const std::vector<const FlatParamLayout*>& layouts, int64_t bucket_bytes,
                                        DType reduce_dtype) {
  std::vector<GradBucket> buckets;
  const int64_t reduce_size = static_cast<int64_t>(DTypeSize(reduce_dtype));
  int64_t open_bytes = 0;
  for (int u = static_cast<int>(layouts.size()) - 1; u >= 0; --u) {
    if (layouts[u] == nullptr) continue;
    // The bytes the reduce-scatter moves for this unit: its padded buffer in
    // the reduce dtype.
    const int64_t bytes = layouts[u]->padded_numel() * reduce_size;
    if (buckets.empty() || open_bytes + bytes > bucket_bytes) {
      buckets.emplace_back();
      open_bytes = 0;
    }
    GradBucket& b = buckets.back();
    b.units.insert(b.units.begin(), u);
    b.shard_numel += layouts[u]->shard_numel();
    open_bytes += bytes;
  }
  for (GradBucket& b : buckets) {
    b.label = layouts[b.units.front()]->unit_name();
    if (b.units.size() > 1) absl::StrAppend(&b.label, "..", layouts[b.units.back()]->unit_name());
  }
  return buckets;
}

absl::StatusOr<std::unique_ptr<GradReducer>> GradReducer::Create(std::vector<UnitShard*> units, int64_t bucket_bytes,
                                                                 Communicator* dp, MemoryTracker* tracker,
                                                                 DType reduce_dtype,
                                                                 const kernels::KernelContext& kernels,
                                                                 const ReductionOptions& reduction) {
  if (bucket_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("bucket_bytes is ", bucket_bytes, ", expected >= 0"));
  }
  if (reduce_dtype != DType::kF32 && reduce_dtype != DType::kBF16 && reduce_dtype != DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce dtype is ", DTypeName(reduce_dtype), ", expected f32, bf16 or f16"));
  }
  std::unique_ptr<GradReducer> r(new GradReducer());
  r->reduce_dtype_ = reduce_dtype;
  r->kernels_ = kernels;
  const UnitShard* first = nullptr;
  for (const UnitShard* u : units) {
    if (u == nullptr) continue;
    if (first == nullptr) first = u;
    if (u->compute_dtype() != first->compute_dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("unit '", u->layout().unit_name(), "' computes in ",
                                                     DTypeName(u->compute_dtype()), ", expected ",
                                                     DTypeName(first->compute_dtype()), " like unit '",
                                                     first->layout().unit_name(), "'"));
    }
  }
  if (first != nullptr) r->compute_dtype_ = first->compute_dtype();
  r->units_ = std::move(units);
  r->dp_ = dp;
  r->reduction_ = reduction;
  r->tracker_ = tracker;
  r->bucket_of_.assign(r->units_.size(), -1);
  std::vector<const FlatParamLayout*> layouts;
  for (const UnitShard* u : r->units_) layouts.push_back(u == nullptr ? nullptr : &u->layout());
  if (reduction.replica_quantization_block < 0) {
    return absl::InvalidArgumentError(absl::StrCat("replica quantization block is ",
                                                   reduction.replica_quantization_block, ", expected >= 0"));
  }
  if (r->quantized() || r->quantized_replicas()) {
    r->runs_.resize(r->units_.size());
    for (size_t u = 0; u < r->units_.size(); ++u) {
      if (r->units_[u] == nullptr) continue;
      for (int d = 0; d < dp->size(); ++d) r->runs_[u].push_back(QuantizationRuns(r->units_[u]->layout(), d));
    }
  }
  for (GradBucket& g : FormGradBuckets(layouts, bucket_bytes, reduce_dtype)) {
    Bucket b;
    b.units = std::move(g.units);
    b.shard_numel = g.shard_numel;
    b.label = std::move(g.label);
    b.stages_input = b.units.size() > 1 || reduce_dtype != r->compute_dtype_ || r->quantized();
    for (int u : b.units) r->bucket_of_[u] = static_cast<int>(r->buckets_.size());
    if (r->quantized()) {
      // Destination d's part: the bucket's units' runs of shard d, packed;
      // every part is padded to the largest.
      std::vector<const FlatParamLayout*> bucket_layouts;
      for (int u : b.units) bucket_layouts.push_back(&r->units_[u]->layout());
      b.packed_chunk = MaxPackedBucketPartBytes(bucket_layouts, reduction.quantization_block);
    }
    if (r->quantized_replicas()) {
      // The replicas of a shard have the same shard rank, so the same runs;
      // the largest over the shard ranks keeps one count for every group.
      std::vector<const FlatParamLayout*> bucket_layouts;
      for (int u : b.units) bucket_layouts.push_back(&r->units_[u]->layout());
      b.replica_chunk = MaxPackedBucketPartBytes(bucket_layouts, reduction.replica_quantization_block);
    }
    r->buckets_.push_back(std::move(b));
  }
  if (reduction.quantization_block > 0 && reduce_dtype != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("int8 gradient reduction replaces the reduce dtype; got ",
                                                   DTypeName(reduce_dtype), ", expected f32"));
  }
  if (reduction.error_feedback) {
    if (!r->quantized()) {
      return absl::InvalidArgumentError("error feedback needs int8 gradient reduction (quantization_block > 0)");
    }
    r->residuals_.resize(r->units_.size());
    for (size_t u = 0; u < r->units_.size(); ++u) {
      if (r->units_[u] == nullptr || r->units_[u]->layout().padded_numel() == 0) continue;
      ASSIGN_OR_RETURN(r->residuals_[u], Buffer::AllocateZeroed(tracker, MemoryCategory::kGrads, dp->device(), DType::kF32,
                                                          r->units_[u]->layout().padded_numel()));
      RETURN_IF_ERROR(DeviceMemset(r->residuals_[u].data(), dp->device(), 0, r->residuals_[u].bytes()));
    }
  }
  return r;
}

int64_t GradReducer::reduce_bytes(int b) const {
  return buckets_[b].shard_numel * static_cast<int64_t>(DTypeSize(reduce_dtype_));
}

absl::Status GradReducer::SetStagingSlots(std::vector<int> slot_of_bucket) {
  if (static_cast<int>(slot_of_bucket.size()) != num_buckets()) {
    return absl::InvalidArgumentError(absl::StrCat("staging plan lists ", slot_of_bucket.size(), " buckets, expected ",
                                                   num_buckets()));
  }
  int slots = 0;
  for (int s : slot_of_bucket) {
    if (s < 0) return absl::InvalidArgumentError(absl::StrCat("staging slot ", s, " is negative"));
    slots = std::max(slots, s + 1);
  }
  slots_.clear();
  slots_.resize(slots);
  const int n = dp_->size();
  for (int b = 0; b < num_buckets(); ++b) {
    Slot& slot = slots_[slot_of_bucket[b]];
    if (quantized_replicas()) {
      slot.replica_numel = std::max(slot.replica_numel, buckets_[b].replica_chunk * reduction_.replica->size());
      // An f32 reduced shard is summed into in place (it is quantized first).
      if (reduce_dtype_ != DType::kF32) {
        slot.replica_sum_numel = std::max(slot.replica_sum_numel, buckets_[b].shard_numel);
      }
    }
    if (quantized()) {
      slot.in_numel = std::max(slot.in_numel, buckets_[b].packed_chunk * n);
      slot.out_numel = std::max(slot.out_numel, buckets_[b].packed_chunk * n);
      slot.sum_numel = std::max(slot.sum_numel, buckets_[b].shard_numel);
      continue;
    }
    slot.out_numel = std::max(slot.out_numel, buckets_[b].shard_numel);
    if (buckets_[b].stages_input) slot.in_numel = std::max(slot.in_numel, buckets_[b].shard_numel * n);
  }
  slot_of_bucket_ = std::move(slot_of_bucket);
  return absl::OkStatus();
}

absl::Status GradReducer::ReserveStaging() {
  const Device device = dp_->device();
  // Every element a reduction reads is written first (the cast or copy of
  // the gradients, the collective's output, the zeroed sum), so the
  // per-step slots skip the fill; packed int8 parts carry padding that is
  // sent unread, zeroed so that what travels is deterministic.
  const auto allocate = quantized() ? &Buffer::AllocateZeroed : &Buffer::Allocate;
  for (Slot& slot : slots_) {
    if (slot.out.empty() && slot.out_numel > 0) {
      ASSIGN_OR_RETURN(slot.out, allocate(tracker_, MemoryCategory::kCommBuffers, device, staging_dtype(),
                                          slot.out_numel));
    }
    if (slot.in.empty() && slot.in_numel > 0) {
      ASSIGN_OR_RETURN(slot.in, allocate(tracker_, MemoryCategory::kCommBuffers, device, staging_dtype(),
                                         slot.in_numel));
    }
    if (slot.sum.empty() && slot.sum_numel > 0) {
      ASSIGN_OR_RETURN(slot.sum, allocate(tracker_, MemoryCategory::kCommBuffers, device, DType::kF32,
                                          slot.sum_numel));
    }
    // Packed parts carry padding: zeroed, as above.
    if (slot.replica.empty() && slot.replica_numel > 0) {
      ASSIGN_OR_RETURN(slot.replica, Buffer::AllocateZeroed(tracker_, MemoryCategory::kCommBuffers, device, DType::kI8,
                                                            slot.replica_numel));
    }
    if (slot.replica_sum.empty() && slot.replica_sum_numel > 0) {
      ASSIGN_OR_RETURN(slot.replica_sum, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, device, DType::kF32,
                                                          slot.replica_sum_numel));
    }
  }
  return absl::OkStatus();
}

void GradReducer::FreeStaging() {
  for (Slot& slot : slots_) {
    slot.in.Reset();
    slot.out.Reset();
    slot.sum.Reset();
    slot.replica.Reset();
    slot.replica_sum.Reset();
  }
}

absl::Status GradReducer::Launch(int bucket) {
  Bucket& b = buckets_[bucket];
  if (b.work != nullptr || b.replica_work != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("gradient bucket ", bucket, " is already in flight"));
  }
  const Device device = dp_->device();
  if (b.shard_numel == 0) {  // units without parameters: nothing to reduce on any rank
    for (int u : b.units) {
      if (units_[u]->zero().shards_grads()) units_[u]->FreeFullGrads();
    }
    return absl::OkStatus();
  }
  const int n = dp_->size();
  Slot* slot = slot_of_bucket_.empty() ? nullptr : &slots_[slot_of_bucket_[bucket]];
  if (slot != nullptr && (slot->out.empty() || (b.stages_input && slot->in.empty()))) {
    return absl::FailedPreconditionError(absl::StrCat("gradient bucket ", b.label,
                                                      ": staging slot not reserved (ReserveStaging)"));
  }
  if (quantized()) {
    if (slot != nullptr) {
      b.in = slot->in.data();
      b.out = slot->out.data();
      b.sum = slot->sum.as<float>();
    } else {
      ASSIGN_OR_RETURN(b.staging_in, Buffer::AllocateZeroed(tracker_, MemoryCategory::kCommBuffers, device, DType::kI8,
                                                      b.packed_chunk * n));
      ASSIGN_OR_RETURN(b.staging_out, Buffer::AllocateZeroed(tracker_, MemoryCategory::kCommBuffers, device, DType::kI8,
                                                       b.packed_chunk * n));
      ASSIGN_OR_RETURN(b.staging_sum, Buffer::AllocateZeroed(tracker_, MemoryCategory::kCommBuffers, device, DType::kF32,
                                                       b.shard_numel));
      b.in = b.staging_in.data();
      b.out = b.staging_out.data();
      b.sum = b.staging_sum.as<float>();
    }
    RETURN_IF_ERROR(LaunchQuantized(b));
    launched_.push_back(bucket);
    return absl::OkStatus();
  }
  if (slot != nullptr) {
    b.out = slot->out.data();
  } else {
    ASSIGN_OR_RETURN(b.staging_out, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, device, reduce_dtype_,
                                                     b.shard_numel));
    b.out = b.staging_out.data();
  }
  if (!b.stages_input) {
    b.in = units_[b.units.front()]->full_grads();
  } else {
    if (slot != nullptr) {
      b.in = slot->in.data();
    } else {
      ASSIGN_OR_RETURN(b.staging_in, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, device, reduce_dtype_,
                                                      b.shard_numel * n));
      b.in = b.staging_in.data();
    }
    const int64_t in_size = static_cast<int64_t>(DTypeSize(compute_dtype_));
    const int64_t out_size = static_cast<int64_t>(DTypeSize(reduce_dtype_));
    char* dst = static_cast<char*>(b.in);
    for (int r = 0; r < n; ++r) {
      for (int u : b.units) {
        const int64_t S = units_[u]->layout().shard_numel();
        if (S == 0) continue;
        const char* src = static_cast<const char*>(units_[u]->full_grads()) + r * S * in_size;
        // Cast to the same dtype is a copy.
        RETURN_IF_ERROR(kernels::Cast(kernels_, dst, reduce_dtype_, src, compute_dtype_, S));
        dst += S * out_size;
      }
    }
  }
  b.issued = std::chrono::steady_clock::now();
  b.work = dp_->ReduceScatter(b.in, b.out, b.shard_numel, reduce_dtype_, ReduceOp::kAvg);
  launched_.push_back(bucket);
  return absl::OkStatus();
}

absl::Status GradReducer::Finish(int bucket) {
  // The previous bucket's replica all-reduce ran behind this bucket's
  // reduce-scatter and the compute before it: complete it first.
  absl::Status first = CompleteReplica();
  Bucket& b = buckets_[bucket];
  if (b.work == nullptr) return first;
  const int64_t bytes = quantized() ? b.packed_chunk * dp_->size()
                                    : b.shard_numel * dp_->size() * static_cast<int64_t>(DTypeSize(reduce_dtype_));
  absl::Status s =
      WaitTracedOn(*b.work, kernels_.cuda_stream, timeline_, "reduce_scatter",
                   quantized() ? "AllToAll int8 grads" : "ReduceScatter grads", b.label, b.issued, bytes);
  b.work.reset();
  launched_.erase(std::remove(launched_.begin(), launched_.end(), bucket), launched_.end());
  // The reduced shard: the f32 sum of the dequantized parts, or the
  // reduce-scatter's output.
  if (s.ok() && quantized()) s = SumQuantized(b);
  b.staging_in.Reset();
  if (quantized()) b.staging_out.Reset();
  // Everything after this reads the reduced shard only: the full grads go
  // now (freed at stages 2-3, zeroed at 0-1), not after a replica all-reduce.
  if (s.ok()) s = ReleaseFullGrads(b);
  // In reduce_dtype_ either way (f32 when quantized: Create checks).
  b.reduced = quantized() ? static_cast<void*>(b.sum) : b.out;
  if (s.ok() && replicated()) {
    if (quantized_replicas()) {
      Slot* slot = slot_of_bucket_.empty() ? nullptr : &slots_[slot_of_bucket_[bucket]];
      s = LaunchReplicaQuantized(b, slot);
      if (!s.ok()) {
        DropStaging(b);
        return first.ok() ? s : first;
      }
    } else {
      b.replica_issued = std::chrono::steady_clock::now();
      b.replica_work = reduction_.replica->AllReduce(b.reduced, b.shard_numel, reduce_dtype_, ReduceOp::kAvg);
    }
    replica_pending_ = bucket;
    // The pass's last reduction has nothing left to hide behind.
    if (launched_.empty()) s = CompleteReplica();
    return first.ok() ? s : first;
  }
  if (s.ok()) s = Accumulate(b, b.reduced, reduce_dtype_);
  DropStaging(b);
  return first.ok() ? s : first;
}

absl::Status GradReducer::CompleteReplica() {
  if (replica_pending_ < 0) return absl::OkStatus();
  Bucket& b = buckets_[replica_pending_];
  replica_pending_ = -1;
  absl::Status s;
  if (quantized_replicas()) {
    s = WaitTracedOn(*b.replica_work, kernels_.cuda_stream, timeline_, "allgather",
                     "AllGather int8 grads over replicas", b.label, b.replica_issued,
                     b.replica_chunk * reduction_.replica->size());
    b.replica_work.reset();
    if (s.ok()) s = SumReplicaQuantized(b);
    if (s.ok()) s = Accumulate(b, b.replica_sum, DType::kF32);
  } else {
    s = WaitTracedOn(*b.replica_work, kernels_.cuda_stream, timeline_, "allreduce", "AllReduce grads over replicas",
                     b.label, b.replica_issued, b.shard_numel * static_cast<int64_t>(DTypeSize(reduce_dtype_)));
    b.replica_work.reset();
    if (s.ok()) s = Accumulate(b, b.reduced, reduce_dtype_);
  }
  DropStaging(b);
  return s;
}

absl::Status GradReducer::LaunchReplicaQuantized(Bucket& b, Slot* slot) {
  const int R = reduction_.replica->size();
  // Every replica's part, its own included, is dequantized from the
  // gathered buffer, so an f32 reduced shard can take the sum in place.
  const bool in_place = reduce_dtype_ == DType::kF32;
  if (slot != nullptr) {
    if (slot->replica.empty() || (!in_place && slot->replica_sum.empty())) {
      return absl::FailedPreconditionError(absl::StrCat("gradient bucket ", b.label,
                                                        ": replica staging not reserved (ReserveStaging)"));
    }
    b.replica_packed = static_cast<char*>(slot->replica.data());
    if (!in_place) b.replica_sum = slot->replica_sum.as<float>();
  } else {
    const Device device = dp_->device();
    ASSIGN_OR_RETURN(b.staging_replica, Buffer::AllocateZeroed(tracker_, MemoryCategory::kCommBuffers, device,
                                                               DType::kI8, b.replica_chunk * R));
    if (!in_place) {
      ASSIGN_OR_RETURN(b.staging_replica_sum, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, device,
                                                               DType::kF32, b.shard_numel));
      b.replica_sum = b.staging_replica_sum.as<float>();
    }
    b.replica_packed = static_cast<char*>(b.staging_replica.data());
  }
  if (in_place) b.replica_sum = static_cast<float*>(b.reduced);
  const int64_t block = reduction_.replica_quantization_block;
  const int64_t size = static_cast<int64_t>(DTypeSize(reduce_dtype_));
  char* mine = b.replica_packed + reduction_.replica->rank() * b.replica_chunk;
  char* dst = mine;
  const char* src = static_cast<const char*>(b.reduced);
  for (int u : b.units) {
    const int64_t S = units_[u]->layout().shard_numel();
    if (S == 0) continue;
    const std::vector<int64_t>& runs = runs_[u][dp_->rank()];
    RETURN_IF_ERROR(QuantizeShard(kernels_, dst, src, reduce_dtype_, runs, block, kernels::NonFiniteInput::kPropagate));
    dst += PackedShardBytes(runs, block);
    src += S * size;
  }
  b.replica_issued = std::chrono::steady_clock::now();
  // In place: this replica's part already sits at its place in the output.
  b.replica_work = reduction_.replica->AllGather(mine, b.replica_packed, b.replica_chunk, DType::kI8);
  return absl::OkStatus();
}

absl::Status GradReducer::SumReplicaQuantized(Bucket& b) {
  const int R = reduction_.replica->size();
  const int64_t block = reduction_.replica_quantization_block;
  RETURN_IF_ERROR(DeviceMemset(b.replica_sum, dp_->device(), 0, b.shard_numel * sizeof(float)));
  // Replica order, then unit order, on every replica: they sum bitwise alike.
  for (int q = 0; q < R; ++q) {
    const char* src = b.replica_packed + q * b.replica_chunk;
    int64_t at = 0;
    for (int u : b.units) {
      const int64_t S = units_[u]->layout().shard_numel();
      if (S == 0) continue;
      const std::vector<int64_t>& runs = runs_[u][dp_->rank()];
      RETURN_IF_ERROR(DequantizeShardAccumulate(kernels_, b.replica_sum + at, src, runs, block));
      src += PackedShardBytes(runs, block);
      at += S;
    }
  }
  return kernels::ScaleInPlace(kernels_, b.replica_sum, b.shard_numel, DType::kF32, 1.0f / static_cast<float>(R),
                               nullptr);
}

absl::Status GradReducer::ReleaseFullGrads(Bucket& b) {
  for (int u : b.units) {
    if (units_[u]->zero().shards_grads()) {
      units_[u]->FreeFullGrads();
    } else {
      RETURN_IF_ERROR(units_[u]->ZeroFullGrads());
    }
  }
  return absl::OkStatus();
}

absl::Status GradReducer::Accumulate(Bucket& b, const void* reduced, DType dtype) {
  const int64_t out_size = static_cast<int64_t>(DTypeSize(dtype));
  int64_t at = 0;
  for (int u : b.units) {
    UnitShard* unit = units_[u];
    const int64_t S = unit->layout().shard_numel();
    const char* src = static_cast<const char*>(reduced) + at * out_size;
    RETURN_IF_ERROR(kernels::AccumulateInto(kernels_, unit->grad_shard(), src, dtype, S));
    at += S;
  }
  return absl::OkStatus();
}

void GradReducer::DropStaging(Bucket& b) {
  b.staging_out.Reset();
  b.staging_sum.Reset();
  b.staging_replica.Reset();
  b.staging_replica_sum.Reset();
  b.in = b.out = b.reduced = nullptr;
  b.sum = nullptr;
  b.replica_packed = nullptr;
  b.replica_sum = nullptr;
}

absl::Status GradReducer::LaunchQuantized(Bucket& b) {
  const int n = dp_->size();
  const int64_t block = reduction_.quantization_block;
  const int64_t in_size = static_cast<int64_t>(DTypeSize(compute_dtype_));
  // Destination r's chunk: every unit's part r, packed, in bucket order.
  for (int r = 0; r < n; ++r) {
    char* dst = static_cast<char*>(b.in) + r * b.packed_chunk;
    for (int u : b.units) {
      const int64_t S = units_[u]->layout().shard_numel();
      if (S == 0) continue;
      const std::vector<int64_t>& runs = runs_[u][r];
      const char* src = static_cast<const char*>(units_[u]->full_grads()) + r * S * in_size;
      float* residual = residuals_.empty() || residuals_[u].empty() ? nullptr : residuals_[u].as<float>() + r * S;
      RETURN_IF_ERROR(QuantizeShard(kernels_, dst, src, compute_dtype_, runs, block,
                                    kernels::NonFiniteInput::kPropagate, residual));
      dst += PackedShardBytes(runs, block);
    }
  }
  b.issued = std::chrono::steady_clock::now();
  b.work = dp_->AllToAll(b.in, b.out, b.packed_chunk, DType::kI8);
  return absl::OkStatus();
}

absl::Status GradReducer::SumQuantized(Bucket& b) {
  const int n = dp_->size();
  const int64_t block = reduction_.quantization_block;
  RETURN_IF_ERROR(DeviceMemset(b.sum, dp_->device(), 0, b.shard_numel * sizeof(float)));
  // Fixed order (source rank, then unit) on every rank: deterministic.
  for (int r = 0; r < n; ++r) {
    const char* src = static_cast<const char*>(b.out) + r * b.packed_chunk;
    int64_t at = 0;
    for (int u : b.units) {
      const int64_t S = units_[u]->layout().shard_numel();
      if (S == 0) continue;
      const std::vector<int64_t>& runs = runs_[u][dp_->rank()];
      RETURN_IF_ERROR(DequantizeShardAccumulate(kernels_, b.sum + at, src, runs, block));
      src += PackedShardBytes(runs, block);
      at += S;
    }
  }
  // Non-finite values are seen by the optimizer's overflow check: no flag.
  return kernels::ScaleInPlace(kernels_, b.sum, b.shard_numel, DType::kF32, 1.0f / static_cast<float>(n), nullptr);
}

absl::Status GradReducer::FinishAll() {
  absl::Status first;
  while (!launched_.empty()) {
    absl::Status s = Finish(launched_.front());
    if (first.ok()) first = s;
  }
  absl::Status s = CompleteReplica();
  return first.ok() ? s : first;
}

}  // namespace zeroshard
