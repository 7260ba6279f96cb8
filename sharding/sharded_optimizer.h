// ShardedOptimizer: AdamW or SGD over the regions of the flat parameter
// buffers a rank owns (its shard under ZeRO 1-3, the whole padded buffer
// under stage 0), with a weight-decay and learning-rate multiplier per
// parameter (its optimizer group).
//
// Each region is cut into the parameter segments it contains
// (FlatParamLayout::SegmentsInRange); each segment is updated by the
// element-wise kernels of kernels/optimizer.h with its parameter's group. Padding elements are never touched, so they stay zero.
// Because the kernels are element-wise, updating a shard gives bitwise the
// same values as updating the whole tensor: the basis of the stage 0-3
// equality.
//
// State (AdamW m and v, SGD momentum; f32, zeroed) is allocated at Create in
// MemoryCategory::kOptimizerState: 8 bytes per region element for AdamW,
// 4 for SGD with momentum, 0 for plain SGD. Not thread-safe.
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
#include "sharding/weight_decay_policy.h"

namespace zeroshard {

enum class OptimizerType { kAdamW, kSgd };

struct OptimizerOptions {
  OptimizerType type = OptimizerType::kAdamW;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  // AdamW: decoupled (p *= 1 - lr*wd); SGD: L2 added to the gradient.
  float weight_decay = 0.0f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  bool nesterov = false;
  // Empty: the model's ParamSpec::no_weight_decay marks (weight_decay_policy.h).
  std::vector<std::string> no_decay_patterns;
};

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
  // kInvalidArgument for a region outside its layout's padded buffer, or
  // options PyTorch rejects (betas outside [0,1), eps <= 0, negative weight
  // decay or momentum, Nesterov without momentum or with dampening).
  static absl::StatusOr<std::unique_ptr<ShardedOptimizer>> Create(const OptimizerOptions& options,
                                                                  std::vector<OptimizerRegion> regions,
                                                                  MemoryTracker* tracker,
                                                                  const kernels::KernelContext& ctx);

  // One update of every region: master[i] and grads[i] point at region i's
  // first element (length elements each). `step` is the 1-based count of
  // updates including this one (AdamW bias correction; SGD initialises its
  // momentum when step == 1). kInvalidArgument when the span sizes differ
  // from the number of regions; the kernels' errors otherwise.
  absl::Status Step(absl::Span<float* const> master, absl::Span<const float* const> grads, float lr,
                    int64_t step);

  const OptimizerOptions& options() const { return options_; }
  int num_regions() const { return static_cast<int>(regions_.size()); }
  // State buffers of region i (empty when the optimizer keeps none).
  const Buffer& exp_avg(int i) const { return state_[i].first; }
  const Buffer& exp_avg_sq(int i) const { return state_[i].second; }
  const Buffer& momentum(int i) const { return state_[i].first; }
  // Writable state, for checkpoint loading.
  Buffer& mutable_exp_avg(int i) { return state_[i].first; }
  Buffer& mutable_exp_avg_sq(int i) { return state_[i].second; }
  Buffer& mutable_momentum(int i) { return state_[i].first; }

 private:
  struct Segment {
    int64_t offset = 0;  // within the region
    int64_t length = 0;
    ParamGroup group;
  };
  ShardedOptimizer() = default;

  OptimizerOptions options_;
  kernels::KernelContext ctx_;
  std::vector<OptimizerRegion> regions_;
  std::vector<std::vector<Segment>> segments_;            // per region
  std::vector<std::pair<Buffer, Buffer>> state_;          // AdamW (m, v); SGD (momentum, -)
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_SHARDED_OPTIMIZER_H_
