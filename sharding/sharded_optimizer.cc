#include "sharding/sharded_optimizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/optimizer.h"

namespace zeroshard {
namespace {

absl::Status CheckOptions(const OptimizerOptions& o) {
  if (o.type == OptimizerType::kAdamW) {
    if (!(o.beta1 >= 0 && o.beta1 < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("beta1 is ", o.beta1, ", expected in [0, 1)"));
    }
    if (!(o.beta2 >= 0 && o.beta2 < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("beta2 is ", o.beta2, ", expected in [0, 1)"));
    }
    if (!(o.eps > 0)) return absl::InvalidArgumentError(absl::StrCat("eps is ", o.eps, ", expected > 0"));
  } else {
    if (!(o.momentum >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("momentum is ", o.momentum, ", expected >= 0"));
    }
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
      return absl::InvalidArgumentError(absl::StrCat("nesterov needs momentum > 0 and dampening 0, got momentum ",
                                                     o.momentum, " and dampening ", o.dampening));
    }
  }
  if (!(o.weight_decay >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("weight_decay is ", o.weight_decay, ", expected >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardedOptimizer>> ShardedOptimizer::Create(const OptimizerOptions& options,
                                                                           std::vector<OptimizerRegion> regions,
                                                                           MemoryTracker* tracker,
                                                                           const kernels::KernelContext& ctx) {
  RETURN_IF_ERROR(CheckOptions(options));
  std::unique_ptr<ShardedOptimizer> opt(new ShardedOptimizer());
  opt->options_ = options;
  opt->ctx_ = ctx;
  if (options.type == OptimizerType::kAdamW) {
    opt->kinds_ = {{"exp_avg", DType::kF32, 4, "exp_avg"}, {"exp_avg_sq", DType::kF32, 4, "exp_avg_sq"}};
  } else if (options.momentum > 0) {
    opt->kinds_ = {{"momentum", DType::kF32, 4, "momentum"}};
  }
  const WeightDecayPolicy policy(options.no_decay_patterns);
  for (const OptimizerRegion& region : regions) {
    if (region.layout == nullptr || region.begin < 0 || region.length < 0 ||
        region.begin + region.length > region.layout->padded_numel()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer region [", region.begin, ", ", region.begin + region.length, ") is outside unit '",
          region.layout == nullptr ? "<null>" : region.layout->unit_name(), "' of ",
          region.layout == nullptr ? 0 : region.layout->padded_numel(), " elements"));
    }
    if (!region.groups.empty() && region.groups.size() != region.layout->params().size()) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer region of unit '", region.layout->unit_name(),
                                                     "' has ", region.groups.size(), " parameter groups, expected ",
                                                     region.layout->params().size()));
    }
    std::vector<Segment> segments;
    for (const ShardSegment& s : region.layout->SegmentsInRange(region.begin, region.length)) {
      ParamGroup group;
      if (region.groups.empty()) {
        group.weight_decay_mult = policy.Decays(region.layout->params()[s.param_index].name) ? 1.0f : 0.0f;
      } else {
        group = region.groups[s.param_index];
      }
      // Neighbouring pieces of one group run as one kernel call.
      if (!segments.empty() && segments.back().group.weight_decay_mult == group.weight_decay_mult &&
          segments.back().group.lr_mult == group.lr_mult &&
          segments.back().offset + segments.back().length == s.offset_in_shard) {
        segments.back().length += s.length;
      } else {
        segments.push_back(Segment{s.offset_in_shard, s.length, group});
      }
    }
    opt->segments_.push_back(std::move(segments));
    Buffer first, second;
    const bool adamw = options.type == OptimizerType::kAdamW;
    if (adamw || options.momentum > 0) {
      ASSIGN_OR_RETURN(first, Buffer::AllocateZeroed(tracker, MemoryCategory::kOptimizerState, ctx.device, DType::kF32,
                                               region.length));
    }
    if (adamw) {
      ASSIGN_OR_RETURN(second, Buffer::AllocateZeroed(tracker, MemoryCategory::kOptimizerState, ctx.device,
                                                DType::kF32, region.length));
    }
    opt->state_.emplace_back(std::move(first), std::move(second));
  }
  opt->regions_ = std::move(regions);
  return opt;
}

absl::Status ShardedOptimizer::Step(absl::Span<float* const> master, absl::Span<const float* const> grads,
                                    float lr, int64_t step) {
  if (master.size() != regions_.size() || grads.size() != regions_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer step got ", master.size(), " master and ",
                                                   grads.size(), " gradient regions, expected ",
                                                   regions_.size()));
  }
  for (size_t i = 0; i < regions_.size(); ++i) RETURN_IF_ERROR(StepRegion(static_cast<int>(i), master[i], grads[i], lr, step));
  return absl::OkStatus();
}

absl::Status ShardedOptimizer::StepRegions(absl::Span<const int> regions, absl::Span<float* const> master,
                                           absl::Span<const float* const> grads, float lr, int64_t step) {
  if (master.size() != regions.size() || grads.size() != regions.size()) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer step got ", master.size(), " master and ",
                                                   grads.size(), " gradient regions for ", regions.size(),
                                                   " region indices"));
  }
  for (size_t k = 0; k < regions.size(); ++k) {
    if (regions[k] < 0 || regions[k] >= num_regions()) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer region ", regions[k], ", expected in [0, ", num_regions(), ")"));
    }
    RETURN_IF_ERROR(StepRegion(regions[k], master[k], grads[k], lr, step));
  }
  return absl::OkStatus();
}

absl::Status ShardedOptimizer::StepRegion(int i, float* master, const float* grads, float lr, int64_t step) {
  for (const Segment& seg : segments_[i]) {
    const float wd = options_.weight_decay * seg.group.weight_decay_mult;
    const float seg_lr = lr * seg.group.lr_mult;
    float* p = master + seg.offset;
    const float* g = grads + seg.offset;
    if (options_.type == OptimizerType::kAdamW) {
      kernels::AdamWHyper h{seg_lr, options_.beta1, options_.beta2, options_.eps, wd, step};
      RETURN_IF_ERROR(kernels::AdamWUpdate(ctx_, p, g, state_[i].first.as<float>() + seg.offset,
                                           state_[i].second.as<float>() + seg.offset, seg.length, h));
    } else {
      kernels::SgdHyper h{seg_lr, options_.momentum, options_.dampening, wd, options_.nesterov, step == 1};
      float* buf = state_[i].first.empty() ? nullptr : state_[i].first.as<float>() + seg.offset;
      RETURN_IF_ERROR(kernels::SgdUpdate(ctx_, p, g, buf, seg.length, h));
    }
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
