#include "sharding/grad_reducer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/traced_wait.h"
#include "core/status_macros.h"
#include "kernels/cast.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<GradReducer>> GradReducer::Create(std::vector<UnitShard*> units, int64_t bucket_bytes,
                                                                 Communicator* dp, MemoryTracker* tracker,
                                                                 DType reduce_dtype) {
  if (bucket_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("bucket_bytes is ", bucket_bytes, ", expected >= 0"));
  }
  if (reduce_dtype != DType::kF32 && reduce_dtype != DType::kBF16 && reduce_dtype != DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce dtype is ", DTypeName(reduce_dtype), ", expected f32, bf16 or f16"));
  }
  std::unique_ptr<GradReducer> r(new GradReducer());
  r->reduce_dtype_ = reduce_dtype;
  if (!units.empty()) r->compute_dtype_ = units.front()->compute_dtype();
  for (const UnitShard* u : units) {
    if (u->compute_dtype() != r->compute_dtype_) {
      return absl::InvalidArgumentError(absl::StrCat("unit '", u->layout().unit_name(), "' computes in ",
                                                     DTypeName(u->compute_dtype()), ", expected ",
                                                     DTypeName(r->compute_dtype_), " like the first unit"));
    }
  }
  r->units_ = std::move(units);
  r->dp_ = dp;
  r->tracker_ = tracker;
  r->bucket_of_.assign(r->units_.size(), -1);
  int64_t open_bytes = 0;
  for (int u = static_cast<int>(r->units_.size()) - 1; u >= 0; --u) {
    const int64_t bytes = r->units_[u]->layout().padded_numel() * static_cast<int64_t>(sizeof(float));
    if (r->buckets_.empty() || open_bytes + bytes > bucket_bytes) {
      r->buckets_.emplace_back();
      open_bytes = 0;
    }
    Bucket& b = r->buckets_.back();
    b.units.insert(b.units.begin(), u);
    b.shard_numel += r->units_[u]->layout().shard_numel();
    open_bytes += bytes;
    r->bucket_of_[u] = static_cast<int>(r->buckets_.size()) - 1;
  }
  for (Bucket& b : r->buckets_) {
    b.label = r->units_[b.units.front()]->layout().unit_name();
    if (b.units.size() > 1) absl::StrAppend(&b.label, "..", r->units_[b.units.back()]->layout().unit_name());
  }
  return r;
}

absl::Status GradReducer::Launch(int bucket) {
  Bucket& b = buckets_[bucket];
  if (b.work != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("gradient bucket ", bucket, " is already in flight"));
  }
  const Device device = dp_->device();
  if (b.shard_numel == 0) {  // units without parameters: nothing to reduce on any rank
    for (int u : b.units) {
      if (units_[u]->stage() >= 2) units_[u]->FreeFullGrads();
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(b.staging_out, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, device, reduce_dtype_,
                                                   b.shard_numel));
  const void* in = nullptr;
  if (b.units.size() == 1 && reduce_dtype_ == compute_dtype_) {
    in = units_[b.units.front()]->full_grads();
  } else {
    const int n = dp_->size();
    const int64_t in_size = static_cast<int64_t>(DTypeSize(compute_dtype_));
    const int64_t out_size = static_cast<int64_t>(DTypeSize(reduce_dtype_));
    const kernels::KernelContext host = kernels::KernelContext::Cpu(1);
    ASSIGN_OR_RETURN(b.staging_in, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, device, reduce_dtype_,
                                                    b.shard_numel * n));
    char* dst = b.staging_in.as<char>();
    for (int r = 0; r < n; ++r) {
      for (int u : b.units) {
        const int64_t S = units_[u]->layout().shard_numel();
        if (S == 0) continue;
        const char* src = static_cast<const char*>(units_[u]->full_grads()) + r * S * in_size;
        if (reduce_dtype_ == compute_dtype_) {
          RETURN_IF_ERROR(DeviceCopy(dst, device, src, device, S * in_size));
        } else {
          RETURN_IF_ERROR(kernels::Cast(host, dst, reduce_dtype_, src, compute_dtype_, S));
        }
        dst += S * out_size;
      }
    }
    in = b.staging_in.data();
  }
  b.issued = std::chrono::steady_clock::now();
  b.work = dp_->ReduceScatter(in, b.staging_out.data(), b.shard_numel, reduce_dtype_, ReduceOp::kAvg);
  launched_.push_back(bucket);
  return absl::OkStatus();
}

absl::Status GradReducer::Finish(int bucket) {
  Bucket& b = buckets_[bucket];
  if (b.work == nullptr) return absl::OkStatus();
  const int64_t bytes = b.shard_numel * dp_->size() * static_cast<int64_t>(DTypeSize(reduce_dtype_));
  absl::Status s = WaitTraced(*b.work, timeline_, "reduce_scatter", "ReduceScatter grads", b.label, b.issued, bytes);
  b.work.reset();
  launched_.erase(std::remove(launched_.begin(), launched_.end(), bucket), launched_.end());
  b.staging_in.Reset();
  if (!s.ok()) {
    b.staging_out.Reset();
    return s;
  }
  // Host loop: the MPI backend's buffers are host memory.
  int64_t at = 0;
  for (int u : b.units) {
    UnitShard* unit = units_[u];
    const int64_t S = unit->layout().shard_numel();
    float* dst = unit->grad_shard();
    if (reduce_dtype_ == DType::kF32) {
      const float* src = b.staging_out.as<float>() + at;
      for (int64_t i = 0; i < S; ++i) dst[i] += src[i];
    } else {
      const uint16_t* src = b.staging_out.as<uint16_t>() + at;
      if (reduce_dtype_ == DType::kBF16) {
        for (int64_t i = 0; i < S; ++i) dst[i] += BF16ToF32(src[i]);
      } else {
        for (int64_t i = 0; i < S; ++i) dst[i] += F16ToF32(src[i]);
      }
    }
    at += S;
    if (unit->stage() >= 2) {
      unit->FreeFullGrads();
    } else {
      RETURN_IF_ERROR(unit->ZeroFullGrads());
    }
  }
  b.staging_out.Reset();
  return absl::OkStatus();
}

absl::Status GradReducer::FinishAll() {
  absl::Status first;
  while (!launched_.empty()) {
    absl::Status s = Finish(launched_.front());
    if (first.ok()) first = s;
  }
  return first;
}

}  // namespace zeroshard
