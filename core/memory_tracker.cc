#include "core/memory_tracker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace zeroshard {

const char* MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParams:
      return "params";
    case MemoryCategory::kMasterParams:
      return "master_params";
    case MemoryCategory::kGrads:
      return "grads";
    case MemoryCategory::kOptimizerState:
      return "optimizer_state";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kCommBuffers:
      return "comm_buffers";
    case MemoryCategory::kWorkspace:
      return "workspace";
    case MemoryCategory::kOffloadStaging:
      return "offload_staging";
  }
  return "?";
}

void MemoryTracker::Allocated(MemoryCategory category, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  MemoryUsage& u = usage_[static_cast<int>(category)];
  u.current += bytes;
  u.peak = std::max(u.peak, u.current);
  total_.current += bytes;
  total_.peak = std::max(total_.peak, total_.current);
}

absl::Status MemoryTracker::Reserve(MemoryCategory category, int64_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    const int c = static_cast<int>(category);
    if (limit_[c] >= 0 && usage_[c].current + bytes > limit_[c]) {
      return absl::ResourceExhaustedError(absl::StrCat("allocating ", bytes, " bytes of ", MemoryCategoryName(category),
                                                       " (", usage_[c].current, " in use) exceeds its limit of ",
                                                       limit_[c], " bytes"));
    }
  }
  Allocated(category, bytes);
  return absl::OkStatus();
}

void MemoryTracker::SetLimit(MemoryCategory category, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  limit_[static_cast<int>(category)] = bytes;
}

void MemoryTracker::Freed(MemoryCategory category, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  usage_[static_cast<int>(category)].current -= bytes;
  total_.current -= bytes;
}

MemoryUsage MemoryTracker::Usage(MemoryCategory category) const {
  absl::MutexLock lock(&mu_);
  return usage_[static_cast<int>(category)];
}

MemoryUsage MemoryTracker::Total() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

void MemoryTracker::ResetPeaks() {
  absl::MutexLock lock(&mu_);
  for (MemoryUsage& u : usage_) u.peak = u.current;
  total_.peak = total_.current;
}

}  // namespace zeroshard
