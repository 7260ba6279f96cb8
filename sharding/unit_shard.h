// UnitShard: one unit's parameter, master, gradient buffers on one rank under
// a ZeRO stage (docs/sharding.md), and the collectives that move them.
//
// At rest (between steps) a rank holds, with P the unit's padded numel, S its
// shard numel, c the compute dtype size (4 for f32, 2 for bf16/f16):
//   stage | params (kParams) | grads (kGrads) | master (kMasterParams)
//   0     | P·c full         | P·c full       | P·4 full
//   1     | P·c full         | P·c full       | S·4
//   2     | P·c full         | S·4 shard      | S·4
//   3     | S·c shard        | S·4 shard      | S·4
// (stages 0-1's full gradients are in the compute dtype: P·c).
// plus optimizer state (ShardedOptimizer) over the master region. Transient:
// stage 3's gathered P·c buffer (kParams) while the unit is gathered; stage
// 2-3's full P·c gradient buffer (kGrads) from the unit's first backward
// until its reduction; stage 0-1's S·4 gradient shard (kGrads) during a step.
// Compute-dtype parameters are rounded from the f32 master once per
// PublishMaster; gathers move compute-dtype shards, so a gathered unit is
// never cast again before use. A frozen unit (trainable false) has params
// and master only: no gradient buffer is ever allocated.
//
// Thread-compatible: the engine drives it from one thread; collectives run on
// the communicator's own progress thread until their Work completes.
#ifndef ZEROSHARD_SHARDING_UNIT_SHARD_H_
#define ZEROSHARD_SHARDING_UNIT_SHARD_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "core/timeline.h"
#include "kernels/context.h"
#include "sharding/flat_param_layout.h"
#include "sharding/zero_policy.h"

namespace zeroshard {

class UnitShard {
 public:
  // `layout` must outlive the shard; layout->dp() must equal dp->size().
  // Allocates the at-rest buffers above (zeroed) as `zero` asks.
  // kInvalidArgument for a dp size mismatch.
  // compute_dtype: f32, bf16 or f16 (kInvalidArgument otherwise). `kernels`
  // runs the master -> parameter rounding.
  static absl::StatusOr<std::unique_ptr<UnitShard>> Create(
      const FlatParamLayout* layout, const ZeroPolicy& zero, Communicator* dp, MemoryTracker* tracker,
      DType compute_dtype = DType::kF32, const kernels::KernelContext& kernels = kernels::KernelContext::Cpu(1),
      bool trainable = true, bool resident_master = true, bool resident_params = true, bool resident_grads = true);

  const FlatParamLayout& layout() const { return *layout_; }
  const ZeroPolicy& zero() const { return zero_; }
  int rank() const { return rank_; }
  DType compute_dtype() const { return compute_dtype_; }
  bool trainable() const { return trainable_; }

  // The region of the flat buffer the master copy, the optimizer and the
  // reduced gradient cover: [0, P) for stage 0, this rank's shard otherwise.
  int64_t master_begin() const { return zero_.shards_master() ? layout_->ShardBegin(rank_) : 0; }
  int64_t master_numel() const { return master_numel_; }
  // Null when the master is not resident (Create's resident_master false:
  // it lives on the NVMe tier, docs/offload_streaming.md); master_numel()
  // is its length either way.
  float* master() { return master_.empty() ? nullptr : master_.as<float>(); }
  bool resident_master() const { return !master_.empty() || master_numel_ == 0; }

  // The compute-dtype parameters of the rank's shard (stage 3's shard
  // buffer, else the slice of the full buffer). Stage 3 with Create's
  // resident_params false (the NVMe tier, docs/offload_streaming.md): the
  // buffer last bound (null before), which gathers read and rounding
  // writes.
  void* param_shard();
  bool resident_params() const { return !external_params_; }
  // Non-resident shards only: points the shard at `shard` (a staging slot
  // holding shard_numel compute-dtype elements), not owned; it must stay
  // valid while a gather or a rounding uses it.
  void BindParamShard(void* shard) { bound_params_ = shard; }

  // Full compute-dtype parameters; null under stage 3 unless gathered.
  void* full_params();
  bool gathered() const { return !zero_.gathers_params() || gather_state_ == GatherState::kGathered; }
  bool gather_in_flight() const { return gather_state_ == GatherState::kInFlight; }

  // Stage 3: allocates the full buffer and all-gathers the shards into it.
  // No-op when gathered or in flight; stages 0-2: no-op.
  absl::Status StartGather();
  // Waits for StartGather's collective (starting it first if needed).
  absl::Status WaitGather();
  // Stage 3: frees the full buffer (waits for an in-flight gather first).
  absl::Status Release();
  // Number of all-gathers of parameters this shard has issued.
  int64_t gathers() const { return gathers_; }
  // Stage 3: gathers move each shard as blockwise int8 (kernels/quantize.h,
  // `block` elements per f32 scale) and dequantize every rank's part, this
  // rank's too, into the compute dtype: every rank computes with the same
  // weights; the master and the shard stay exact. 0 (the default): gathers
  // move the compute dtype. Non-finite weights become NaN blocks (the loss
  // then overflows) rather than failing one rank inside the collective.
  // Blocks restart at every parameter (sharding/quantized_shard.h).
  void set_weight_quantization(int64_t block);
  int64_t weight_quantization() const { return quantization_block_; }
  // Draw each parameter gather's wait on `timeline` ("AllGather <unit>",
  // comm/traced_wait.h); null stops it. Must outlive the shard.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

  // Full gradients (compute dtype, accumulated by Backward). Stages 0-1:
  // always there; stages 2-3: allocated zeroed by EnsureFullGrads, freed by
  // FreeFullGrads (after their reduction). Never for a frozen unit (null).
  absl::Status EnsureFullGrads();
  void* full_grads() { return full_grads_.empty() ? nullptr : full_grads_.data(); }
  void FreeFullGrads();
  absl::Status ZeroFullGrads();

  // The reduced gradient over the master region's shard, f32, S elements:
  // stages 2-3 always there; stages 0-1 allocated zeroed by
  // EnsureGradShard for one step and freed by FreeGradShard.
  absl::Status EnsureGradShard();
  // Stages 2-3 with Create's resident_grads false (the NVMe tier,
  // docs/offload_streaming.md): the buffer last bound (null between
  // reductions), which the reducer accumulates into.
  float* grad_shard() {
    if (external_grads_) return bound_grads_;
    return grad_shard_.empty() ? nullptr : grad_shard_.as<float>();
  }
  bool resident_grads() const { return !external_grads_; }
  // Non-resident shards only: points the gradient shard at `shard`
  // (shard_numel f32, not owned), or at nothing (null).
  void BindGradShard(float* shard) { bound_grads_ = shard; }
  void FreeGradShard();
  absl::Status ZeroGradShard();

  // After the optimizer updated master(): refresh the compute parameters.
  // Stage 0: master -> full params. Stages 1-2: master -> own slice, then an
  // in-place all-gather of the full buffer (returned Work must be waited).
  // Stage 3: master -> shard (a gathered copy is stale: Release first).
  // "->" rounds to the compute dtype (nearest even) unless it is f32.
  // Returns null Work when nothing was issued.
  absl::StatusOr<std::unique_ptr<Work>> PublishMaster();

  // Streaming (docs/offload_streaming.md): rounds `length` master elements
  // (`master` points at element `offset` of the master region, on the
  // shard's device) into the compute parameters of the same elements —
  // what PublishMaster's rounding does, for a range. kOutOfRange for a
  // range outside [0, master_numel()).
  absl::Status RoundMasterRange(int64_t offset, int64_t length, const float* master);
  // The rest of PublishMaster once every range was rounded: stages 1-2
  // issue the in-place all-gather (returned Work must be waited); stages 0
  // and 3 have nothing left (null Work).
  absl::StatusOr<std::unique_ptr<Work>> PublishRounded();

 private:
  enum class GatherState { kReleased, kInFlight, kGathered };
  UnitShard() = default;
  // master (f32) -> dst (compute dtype, master_numel elements).
  absl::Status CopyMasterTo(void* dst);
  // Waits for the in-flight gather (drawn with what it moves) and drops it.
  absl::Status WaitGatherWork();
  // Quantized gathers: the packed staging (kCommBuffers), and every rank's
  // packed shard dequantized into gathered_.
  absl::Status AllocateQuantizedGather(int64_t packed_bytes);
  absl::Status DequantizeGathered();

  const FlatParamLayout* layout_ = nullptr;
  ZeroPolicy zero_;
  int rank_ = 0;
  Communicator* dp_ = nullptr;
  MemoryTracker* tracker_ = nullptr;
  Device device_ = Device::kCpu;
  DType compute_dtype_ = DType::kF32;
  kernels::KernelContext kernels_;
  bool trainable_ = true;

  Buffer params_;       // full (stages 0-2) or shard (stage 3)
  bool external_params_ = false;  // stage 3 shard not resident: bound_params_
  void* bound_params_ = nullptr;
  Buffer gathered_;     // stage 3 full buffer while gathered
  int64_t quantization_block_ = 0;
  std::vector<std::vector<int64_t>> quantization_runs_;  // per rank
  int64_t packed_part_bytes_ = 0;  // every rank's part, padded to the largest
  Buffer quantized_send_;  // this rank's packed shard while a quantized gather is in flight
  Buffer quantized_recv_;  // every rank's packed shard
  GatherState gather_state_ = GatherState::kReleased;
  std::unique_ptr<Work> gather_work_;
  std::chrono::steady_clock::time_point gather_issued_;
  int64_t gathers_ = 0;
  Timeline* timeline_ = nullptr;
  Buffer master_;
  int64_t master_numel_ = 0;
  Buffer full_grads_;
  Buffer grad_shard_;
  bool external_grads_ = false;  // stage 2-3 shard not resident: bound_grads_
  float* bound_grads_ = nullptr;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_UNIT_SHARD_H_
