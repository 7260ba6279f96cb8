#include "sharding/grad_reducer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<GradReducer>> GradReducer::Create(std::vector<UnitShard*> units, int64_t bucket_bytes,
                                                                 Communicator* dp, MemoryTracker* tracker) {
  if (bucket_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("bucket_bytes is ", bucket_bytes, ", expected >= 0"));
  }
  std::unique_ptr<GradReducer> r(new GradReducer());
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
  ASSIGN_OR_RETURN(b.staging_out, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, device, DType::kF32,
                                                   b.shard_numel));
  const void* in = nullptr;
  if (b.units.size() == 1) {
    in = units_[b.units.front()]->full_grads();
  } else {
    const int n = dp_->size();
    ASSIGN_OR_RETURN(b.staging_in, Buffer::Allocate(tracker_, MemoryCategory::kCommBuffers, device, DType::kF32,
                                                    b.shard_numel * n));
    float* dst = b.staging_in.as<float>();
    for (int r = 0; r < n; ++r) {
      for (int u : b.units) {
        const int64_t S = units_[u]->layout().shard_numel();
        if (S == 0) continue;
        RETURN_IF_ERROR(DeviceCopy(dst, device, units_[u]->full_grads() + r * S, device, S * sizeof(float)));
        dst += S;
      }
    }
    in = b.staging_in.data();
  }
  b.work = dp_->ReduceScatter(in, b.staging_out.data(), b.shard_numel, DType::kF32, ReduceOp::kAvg);
  launched_.push_back(bucket);
  return absl::OkStatus();
}

absl::Status GradReducer::Finish(int bucket) {
  Bucket& b = buckets_[bucket];
  if (b.work == nullptr) return absl::OkStatus();
  absl::Status s = b.work->Wait();
  b.work.reset();
  launched_.erase(std::remove(launched_.begin(), launched_.end(), bucket), launched_.end());
  b.staging_in.Reset();
  if (!s.ok()) {
    b.staging_out.Reset();
    return s;
  }
  // Host loop: the MPI backend's buffers are host memory.
  const float* src = b.staging_out.as<float>();
  for (int u : b.units) {
    UnitShard* unit = units_[u];
    const int64_t S = unit->layout().shard_numel();
    float* dst = unit->grad_shard();
    for (int64_t i = 0; i < S; ++i) dst[i] += src[i];
    src += S;
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
