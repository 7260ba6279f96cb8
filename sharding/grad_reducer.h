// GradReducer: reduce-scatters units' full gradients into their gradient
// shards, fusing small consecutive units into buckets.
//
// Buckets are formed once, walking units in backward order (last unit
// first): a unit joins the open bucket while the bytes the bucket's
// reduce-scatter moves (its units' padded numel in the reduce dtype) stay
// <= bucket_bytes; a larger unit gets a bucket of its own. Units without
// gradients (frozen: null in `units`) are in no bucket. When a bucket is
// launched is the step program's business (engine/data_parallel_program.h).
// The bucket layout depends only on the layouts, bucket_bytes and the reduce
// dtype, never on the ZeRO stage, so every stage issues the same
// reduce-scatters: the sums are bitwise equal.
//
// Launch(b): one ReduceScatter(kAvg over dp) of the bucket. A one-unit bucket
// reduces straight from the unit's full gradients; a fused one first copies
// the units' slices rank-major into a staging buffer (kCommBuffers) so rank r
// receives [unit u's shard r for u in bucket]. Finish(b): waits, adds each
// unit's part into its gradient shard (+=, so micro-batches accumulate, by
// kernels/accumulate.h); the full grads are freed (stages 2-3) or zeroed
// (stages 0-1) as soon as the reduce-scatter has finished.
//
// Hybrid sharding (a replica group of more than one rank): dp is the shard
// group, and Finish(b) waits for the reduce-scatter, then issues the
// AllReduce(kAvg) of the reduced shard over the replica group and returns;
// the next Finish (of any bucket) or FinishAll first waits for it and
// accumulates. So bucket b's replica all-reduce runs while later units
// compute and the next bucket reduces, and its staging stays in use until
// then (engine/step_plan.cc plans the staging slots to match). When no other
// bucket is in flight (the pass's last Finish) it completes at once.
// With replica_quantization_block > 0 the replica reduction is instead an
// int8 AllGather of each replica's packed reduced shard (blocks restart at
// every parameter, as for int8 gradients); every replica dequantizes the R
// parts, its own included, and sums them in f32 in replica order, then
// divides by R: the replicas of a shard get bitwise the same sum, and each
// summand carries one rounding.
//
// Staging: by default each Launch allocates its bucket's staging and Finish
// frees it. With a slot plan (SetStagingSlots), ReserveStaging allocates one
// buffer pair per slot up front, sized for the largest bucket of the slot,
// and buckets sharing a slot reuse it — the engine reserves at the start of
// a step, where every rank agrees on the allocation, so no rank fails alone
// in the middle of the step's collectives.
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
#include "kernels/context.h"
#include "sharding/unit_shard.h"

namespace zeroshard {

// One bucket: units (forward order) whose gradients one reduce-scatter
// moves, and its label ("h.3", or "h.0..h.3" for a fused one).
struct GradBucket {
  std::vector<int> units;
  int64_t shard_numel = 0;  // sum of the units' S
  std::string label;
};

// The buckets as described above, for units laid out by `layouts` (by unit
// index; null for a unit without gradients). Pure: the engine's reducer and
// `zeroshard schedule` form the same buckets.
std::vector<GradBucket> FormGradBuckets(const std::vector<const FlatParamLayout*>& layouts, int64_t bucket_bytes,
                                        DType reduce_dtype);

// What a reduction does beyond the reduce-scatter over dp.
struct ReductionOptions {
  // Hybrid sharding: each reduced shard is then averaged over this group
  // (the ranks holding the same shard); null: none.
  Communicator* replica = nullptr;
  // > 0: int8 gradient reduction with this many elements per f32 scale
  // (kernels/quantize.h). Each rank quantizes every destination's part of
  // each unit (blocks restart at every parameter: sharding/quantized_shard.h;
  // each destination's part padded to the largest), one AllToAll moves the
  // packed parts, and each rank sums the n dequantized parts of its shard
  // in f32, in rank order, then divides by n: nothing is summed in int8 or
  // re-quantized, so the error does not grow with n. Non-finite gradients
  // become NaN blocks (the overflow check sees them). Replaces the reduce
  // dtype (which must then be f32).
  int64_t quantization_block = 0;
  // With quantization: each rank keeps, per unit, what quantization dropped
  // from its full gradient (f32, P elements, counted as kGrads, kept across
  // steps) and adds it to the next reduction's gradient before quantizing.
  bool error_feedback = false;
  // > 0, with a replica group: the replica reduction moves int8 blocks of
  // this many elements with f32 scales by one AllGather (see above), from
  // the reduced shard in any reduce dtype.
  int64_t replica_quantization_block = 0;
};

class GradReducer {
 public:
  // `units` in forward order, null for a unit without gradients.
  // kInvalidArgument for bucket_bytes < 0. reduce_dtype: f32, bf16 or f16
  // (kInvalidArgument otherwise). Every unit must have the same compute
  // dtype. `kernels` runs the casts and the accumulation.
  static absl::StatusOr<std::unique_ptr<GradReducer>> Create(
      std::vector<UnitShard*> units, int64_t bucket_bytes, Communicator* dp, MemoryTracker* tracker,
      DType reduce_dtype = DType::kF32, const kernels::KernelContext& kernels = kernels::KernelContext::Cpu(1),
      const ReductionOptions& reduction = ReductionOptions());
  DType reduce_dtype() const { return reduce_dtype_; }

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  // -1 for a unit without gradients.
  int bucket_of(int unit) const { return bucket_of_[unit]; }
  // Units of bucket b, in forward order.
  const std::vector<int>& bucket_units(int b) const { return buckets_[b].units; }
  // Per-rank bytes of bucket b's reduce-scatter output (what CommStats
  // counts for it).
  int64_t reduce_bytes(int b) const;

  // slot_of_bucket[b]: the staging slot bucket b uses; buckets in flight at
  // the same time must use different slots. kInvalidArgument for a size
  // other than num_buckets() or a negative slot.
  absl::Status SetStagingSlots(std::vector<int> slot_of_bucket);
  // Allocates every slot's staging (kCommBuffers); no-op without a plan.
  absl::Status ReserveStaging();
  // Frees it (after the step's last Finish).
  void FreeStaging();

  // Preconditions: every unit of the bucket has full grads and a grad shard.
  absl::Status Launch(int bucket);
  // Completes a pending replica all-reduce (hybrid sharding), then waits
  // for a launched bucket and accumulates it (or, under hybrid sharding,
  // issues its replica all-reduce; see above). Only the first of those does
  // anything for a bucket not launched.
  absl::Status Finish(int bucket);
  // Finish for every launched bucket, in launch order, then the last
  // replica all-reduce: afterwards every reduction has landed.
  absl::Status FinishAll();
  // Hybrid sharding: the bucket whose replica all-reduce is in flight (its
  // shards not yet accumulated), -1 when none.
  int replica_pending() const { return replica_pending_; }
  // Draw each reduction's wait on `timeline` ("ReduceScatter grads <units>",
  // comm/traced_wait.h); null stops it. Must outlive the reducer.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  // "h.3" for a one-unit bucket, "h.0..h.3" (forward order) for a fused one.
  const std::string& bucket_label(int b) const { return buckets_[b].label; }

 private:
  struct Bucket {
    std::vector<int> units;  // forward order
    int64_t shard_numel = 0;  // sum of the units' S
    bool stages_input = false;  // fused, or reduced in another dtype
    Buffer staging_in;        // own staging (no slot plan)
    Buffer staging_out;
    void* in = nullptr;       // what the in-flight reduce-scatter reads and writes
    void* out = nullptr;
    // Quantized: bytes each destination receives (the units' packed parts),
    // and the f32 sum of the dequantized parts.
    int64_t packed_chunk = 0;
    Buffer staging_sum;
    float* sum = nullptr;
    std::unique_ptr<Work> work;
    std::chrono::steady_clock::time_point issued;
    // The reduced shard (in the reduce dtype) and, under hybrid sharding,
    // its replica all-reduce in flight.
    void* reduced = nullptr;
    std::unique_ptr<Work> replica_work;
    // Quantized replica reduction: bytes of one replica's packed shard (the
    // largest over the shard group's ranks), the R packed shards gathered,
    // and their f32 sum (the reduced shard itself when it is f32).
    int64_t replica_chunk = 0;
    Buffer staging_replica;
    Buffer staging_replica_sum;
    char* replica_packed = nullptr;
    float* replica_sum = nullptr;
    std::chrono::steady_clock::time_point replica_issued;
    std::string label;
  };
  struct Slot {
    int64_t in_numel = 0;
    int64_t out_numel = 0;
    int64_t sum_numel = 0;  // quantized only
    int64_t replica_numel = 0;      // quantized replicas: packed bytes x R
    int64_t replica_sum_numel = 0;  // quantized replicas, reduce dtype not f32: f32
    Buffer in;
    Buffer out;
    Buffer sum;
    Buffer replica;
    Buffer replica_sum;
  };
  GradReducer() = default;
  bool quantized() const { return reduction_.quantization_block > 0; }
  // The dtype of the staging buffers: i8 (packed bytes) when quantized.
  DType staging_dtype() const { return quantized() ? DType::kI8 : reduce_dtype_; }
  bool replicated() const { return reduction_.replica != nullptr && reduction_.replica->size() > 1; }
  bool quantized_replicas() const { return replicated() && reduction_.replica_quantization_block > 0; }
  // Quantized Launch / Finish halves.
  absl::Status LaunchQuantized(Bucket& b);
  absl::Status SumQuantized(Bucket& b);
  // Quantizes b.reduced into this replica's part and issues the AllGather;
  // after it, sums the dequantized parts into b.replica_sum.
  absl::Status LaunchReplicaQuantized(Bucket& b, Slot* slot);
  absl::Status SumReplicaQuantized(Bucket& b);
  // Waits for the pending replica all-reduce, if any, and accumulates its
  // bucket.
  absl::Status CompleteReplica();
  // Frees (stages 2-3) or zeroes (0-1) the units' full grads.
  absl::Status ReleaseFullGrads(Bucket& b);
  // Adds `reduced` (the bucket's reduced shard in `dtype`) into the units'
  // gradient shards.
  absl::Status Accumulate(Bucket& b, const void* reduced, DType dtype);
  // Releases b's own output staging and clears its pointers.
  void DropStaging(Bucket& b);

  std::vector<UnitShard*> units_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<int> launched_;  // bucket ids in launch order, not yet finished
  int replica_pending_ = -1;   // the bucket whose replica all-reduce is in flight
  Communicator* dp_ = nullptr;
  ReductionOptions reduction_;
  MemoryTracker* tracker_ = nullptr;
  DType reduce_dtype_ = DType::kF32;
  DType compute_dtype_ = DType::kF32;
  Timeline* timeline_ = nullptr;
  kernels::KernelContext kernels_;
  std::vector<int> slot_of_bucket_;  // empty: no slot plan
  std::vector<Slot> slots_;
  std::vector<Buffer> residuals_;  // error feedback, per unit (empty: none)
  // Quantized: per unit, per rank, the runs of that rank's shard
  // (QuantizationRuns), computed once.
  std::vector<std::vector<std::vector<int64_t>>> runs_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_GRAD_REDUCER_H_
