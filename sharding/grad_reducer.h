// GradReducer: reduce-scatters units' full gradients into their gradient
// shards, fusing small consecutive units into buckets.
//
// Buckets are formed once, walking units in backward order (last unit
// first): a unit joins the open bucket while the bucket's full gradient bytes
// stay <= bucket_bytes; a larger unit gets a bucket of its own. A bucket is
// complete after the backward of its lowest-index unit. The bucket layout
// depends only on the layouts and bucket_bytes, never on the ZeRO stage, so
// every stage issues the same reduce-scatters: the sums are bitwise equal.
//
// Launch(b): one ReduceScatter(kAvg over dp) of the bucket. A one-unit bucket
// reduces straight from the unit's full gradients; a fused one first copies
// the units' slices rank-major into a staging buffer (kCommBuffers) so rank r
// receives [unit u's shard r for u in bucket]. Finish(b): waits, adds each
// unit's part into its gradient shard (+=, so micro-batches accumulate), frees
// the staging, then frees (stages 2-3) or zeroes (stages 0-1) the full grads.
//
// Reduce dtype: the collective runs in reduce_dtype (f32, bf16, f16). When it
// differs from the units' compute dtype, the gradients are cast into the
// staging buffer first (so every bucket stages), and the reduced values are
// widened to f32 as they are added into the f32 shard. The MPI backend sums
// half types in f32 and rounds once (comm/mpi_communicator.cc).
//
// Thread-compatible; the units must outlive the reducer.
#ifndef ZEROSHARD_SHARDING_GRAD_REDUCER_H_
#define ZEROSHARD_SHARDING_GRAD_REDUCER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "core/timeline.h"
#include "sharding/unit_shard.h"

namespace zeroshard {

class GradReducer {
 public:
  // `units` in forward order. kInvalidArgument for bucket_bytes < 0.
  // reduce_dtype: f32, bf16 or f16 (kInvalidArgument otherwise). Every
  // unit must have the same compute dtype.
  static absl::StatusOr<std::unique_ptr<GradReducer>> Create(std::vector<UnitShard*> units, int64_t bucket_bytes,
                                                             Communicator* dp, MemoryTracker* tracker,
                                                             DType reduce_dtype = DType::kF32);
  DType reduce_dtype() const { return reduce_dtype_; }

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  int bucket_of(int unit) const { return bucket_of_[unit]; }
  // Units of bucket b, in forward order.
  const std::vector<int>& bucket_units(int b) const { return buckets_[b].units; }
  // Whether the backward of `unit` completes its bucket.
  bool closes_bucket(int unit) const { return buckets_[bucket_of_[unit]].units.front() == unit; }

  // Preconditions: every unit of the bucket has full grads and a grad shard.
  absl::Status Launch(int bucket);
  // Waits for a launched bucket and accumulates; no-op if not launched.
  absl::Status Finish(int bucket);
  // Finish for every launched bucket, in launch order.
  absl::Status FinishAll();
  // Draw each reduction's wait on `timeline` ("ReduceScatter grads <units>",
  // comm/traced_wait.h); null stops it. Must outlive the reducer.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  // "h.3" for a one-unit bucket, "h.0..h.3" (forward order) for a fused one.
  const std::string& bucket_label(int b) const { return buckets_[b].label; }

 private:
  struct Bucket {
    std::vector<int> units;  // forward order
    int64_t shard_numel = 0;  // sum of the units' S
    Buffer staging_in;        // fused buckets only
    Buffer staging_out;
    std::unique_ptr<Work> work;
    std::chrono::steady_clock::time_point issued;
    std::string label;
  };
  GradReducer() = default;

  std::vector<UnitShard*> units_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<int> launched_;  // bucket ids in launch order, not yet finished
  Communicator* dp_ = nullptr;
  MemoryTracker* tracker_ = nullptr;
  DType reduce_dtype_ = DType::kF32;
  DType compute_dtype_ = DType::kF32;
  Timeline* timeline_ = nullptr;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_GRAD_REDUCER_H_
