// Per-category accounting of every large allocation a rank makes.
//
// The engine, the memory benchmark and the per-step metrics read current and
// peak bytes per category; ZeRO's memory claims are asserted against it.
// Thread-safe: buffers may be freed from communication threads.
#ifndef ZEROSHARD_CORE_MEMORY_TRACKER_H_
#define ZEROSHARD_CORE_MEMORY_TRACKER_H_

#include <array>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace zeroshard {

enum class MemoryCategory : uint8_t {
  kParams,          // compute-dtype parameters (full or gathered)
  kMasterParams,    // f32 master copy (the rank's shard under ZeRO 1-3)
  kGrads,           // gradients in compute dtype and their shard accumulators
  kOptimizerState,  // AdamW m and v, SGD momentum
  kActivations,     // tensors saved for backward, layer outputs
  kCommBuffers,     // staging for collectives
  kWorkspace,       // short-lived scratch
  kOffloadStaging,  // the offload tier's I/O staging buffers
};
inline constexpr int kNumMemoryCategories = 8;

// "params", "master_params", "grads", "optimizer_state", "activations",
// "comm_buffers", "workspace", "offload_staging" (the metrics file's keys).
const char* MemoryCategoryName(MemoryCategory category);

struct MemoryUsage {
  int64_t current = 0;
  int64_t peak = 0;
};

class MemoryTracker {
 public:
  MemoryTracker() = default;
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  void Allocated(MemoryCategory category, int64_t bytes);
  // Allocated() unless it would take the category past its limit: then
  // kResourceExhausted naming the category, the bytes asked, those in use
  // and the limit, and nothing is counted. Buffer::Allocate calls it first.
  absl::Status Reserve(MemoryCategory category, int64_t bytes);
  // A byte limit for `category` (< 0: none, the default): a device's memory
  // in miniature, and how tests make one rank's allocation fail.
  void SetLimit(MemoryCategory category, int64_t bytes);
  // Precondition: bytes were Allocated() in the same category.
  void Freed(MemoryCategory category, int64_t bytes);

  MemoryUsage Usage(MemoryCategory category) const;
  // Sum over categories; its peak is the peak of the sum, not a sum of peaks.
  MemoryUsage Total() const;
  // Sets every peak to the current value (e.g. to measure one step).
  void ResetPeaks();

 private:
  mutable absl::Mutex mu_;
  std::array<MemoryUsage, kNumMemoryCategories> usage_ ABSL_GUARDED_BY(mu_);
  std::array<int64_t, kNumMemoryCategories> limit_ ABSL_GUARDED_BY(mu_) = {-1, -1, -1, -1, -1, -1, -1, -1};
  MemoryUsage total_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_MEMORY_TRACKER_H_
