// ShardedOptimizer: a registered optimizer plug-in (sharding/optimizer.h)
// over the regions of the flat parameter buffers a rank owns (its shard
// under ZeRO 1-3, the whole padded buffer under stage 0), with a
// weight-decay and learning-rate multiplier per parameter (its optimizer
// group).
//
// Each region is cut into the parameter segments it contains
// (FlatParamLayout::SegmentsInRange); each segment is updated by the
// plug-in's element-wise update with its parameter's group. Padding
// elements are never touched, so they stay zero. Because the updates are
// element-wise, updating a shard gives bitwise the same values as updating
// the whole tensor: the basis of the stage 0-3 equality.
//
// State: one buffer per (state kind, region), of the kind's dtype, zeroed,
// allocated at Create in MemoryCategory::kOptimizerState: the kinds'
// bytes_per_element summed per region element (8 for AdamW, 4 for SGD with
// momentum, 0 for plain SGD) — unless created with allocate_state false,
// when the caller holds the state and updates by StepChunk. Not
// thread-safe.
#ifndef ZEROSHARD_SHARDING_SHARDED_OPTIMIZER_H_
#define ZEROSHARD_SHARDING_SHARDED_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/buffer.h"
#include "core/memory_tracker.h"
#include "kernels/context.h"
#include "sharding/flat_param_layout.h"
#include "sharding/optimizer.h"
#include "sharding/optimizer_state_kind.h"
#include "sharding/weight_decay_policy.h"

namespace zeroshard {

// A parameter's optimizer group: its weight decay is
// OptimizerOptions::weight_decay x weight_decay_mult and its learning rate
// the schedule's x lr_mult.
struct ParamGroup {
  float weight_decay_mult = 1.0f;
  float lr_mult = 1.0f;
};

// A region [begin, begin + length) of one unit's flat buffer.
struct OptimizerRegion {
  const FlatParamLayout* layout = nullptr;  // must outlive the optimizer
  int64_t begin = 0;
  int64_t length = 0;
  // Per parameter of the layout (params() order). Empty: decided by
  // OptimizerOptions::no_decay_patterns (multiplier 0 or 1), lr_mult 1.
  std::vector<ParamGroup> groups;
};

class ShardedOptimizer {
 public:
  // kInvalidArgument for an unregistered options.name (listing the
  // registered ones), a region outside its layout's padded buffer, or
  // options the plug-in rejects (AdamW, SGD: what PyTorch rejects).
  static absl::StatusOr<std::unique_ptr<ShardedOptimizer>> Create(const OptimizerOptions& options,
                                                                  std::vector<OptimizerRegion> regions,
                                                                  MemoryTracker* tracker,
                                                                  const kernels::KernelContext& ctx,
                                                                  bool allocate_state = true);

  // One update of every region: master[i] and grads[i] point at region i's
  // first element (length elements each). `step` is the 1-based count of
  // updates including this one (AdamW bias correction; SGD initialises its
  // momentum when step == 1). kInvalidArgument when the span sizes differ
  // from the number of regions; the kernels' errors otherwise.
  absl::Status Step(absl::Span<float* const> master, absl::Span<const float* const> grads, float lr,
                    int64_t step);

  const OptimizerOptions& options() const { return options_; }
  // The plug-in options().name names.
  const Optimizer& optimizer() const { return *optimizer_; }
  // The same update of the listed regions only (the optimizer phase updates
  // bucket by bucket): master[k] and grads[k] belong to region regions[k].
  // Element-wise, so any split of the regions gives the bits of one Step.
  // kInvalidArgument for a region index out of range or mismatched spans.
  absl::Status StepRegions(absl::Span<const int> regions, absl::Span<float* const> master,
                           absl::Span<const float* const> grads, float lr, int64_t step);

  // The same update of elements [offset, offset + length) of region
  // `region` with state held elsewhere (the NVMe tier's staging slots,
  // docs/offload_streaming.md): master, grads and state_by_kind[k] (one per
  // state kind, of its dtype) point at element `offset` of the region. The
  // region's segments are cut to the range; element-wise, so any cut into
  // ranges gives the bits of one StepRegions. kInvalidArgument for a region
  // or range out of bounds or a state span of the wrong size.
  absl::Status StepChunk(int region, int64_t offset, int64_t length, float* master, const float* grads,
                         absl::Span<void* const> state_by_kind, float lr, int64_t step);

  int num_regions() const { return static_cast<int>(regions_.size()); }
  const OptimizerRegion& region(int i) const { return regions_[i]; }
  // Whether Create allocated the state buffers (allocate_state); when not,
  // state() is empty and only StepChunk updates.
  bool allocates_state() const { return allocate_state_; }

  // The state kinds the plug-in keeps for options() (empty for plain SGD),
  // and the buffer of kind `kind` (index into state_kinds()) for region
  // `region`: length elements of the kind's dtype. Writable for checkpoint
  // loading.
  const std::vector<OptimizerStateKind>& state_kinds() const;   // empty for plain SGD
  const Buffer& state(int kind, int region) const;
  Buffer& mutable_state(int kind, int region);

 private:
  struct Segment {
    int64_t offset = 0;  // within the region
    int64_t length = 0;
    ParamGroup group;
  };
  ShardedOptimizer() = default;
  absl::Status StepRegion(int region, float* master, const float* grads, float lr, int64_t step);

  OptimizerOptions options_;
  const Optimizer* optimizer_ = nullptr;
  kernels::KernelContext ctx_;
  std::vector<OptimizerStateKind> kinds_;
  std::vector<OptimizerRegion> regions_;
  std::vector<std::vector<Segment>> segments_;  // per region
  std::vector<std::vector<Buffer>> state_;      // [kind][region]
  bool allocate_state_ = true;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_SHARDED_OPTIMIZER_H_
