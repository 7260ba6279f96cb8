#include "sharding/sharded_optimizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "sharding/optimizer_registry.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<ShardedOptimizer>> ShardedOptimizer::Create(const OptimizerOptions& options,
                                                                           std::vector<OptimizerRegion> regions,
                                                                           MemoryTracker* tracker,
                                                                           const kernels::KernelContext& ctx,
                                                                           bool allocate_state) {
  ASSIGN_OR_RETURN(const Optimizer* plugin, FindOptimizer(options.name));
  RETURN_IF_ERROR(plugin->Validate(options));
  std::unique_ptr<ShardedOptimizer> opt(new ShardedOptimizer());
  opt->options_ = options;
  opt->optimizer_ = plugin;
  opt->ctx_ = ctx;
  opt->allocate_state_ = allocate_state;
  opt->kinds_ = plugin->StateKinds(options);
  for (const OptimizerStateKind& k : opt->kinds_) {
    // OptimizerSegment passes state as float*.
    if (k.dtype != DType::kF32) {
      return absl::UnimplementedError(absl::StrCat("optimizer '", options.name, "' state '", k.name, "' is ",
                                                   DTypeName(k.dtype), "; only f32 state is supported"));
    }
    if (k.bytes_per_element != static_cast<int64_t>(DTypeSize(k.dtype))) {
      return absl::InternalError(absl::StrCat("optimizer '", options.name, "' state '", k.name, "' declares ",
                                              k.bytes_per_element, " bytes per element, its dtype ",
                                              DTypeName(k.dtype), " has ", DTypeSize(k.dtype)));
    }
  }
  opt->state_.resize(opt->kinds_.size());
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
    for (size_t k = 0; k < opt->kinds_.size(); ++k) {
      if (!allocate_state) {
        opt->state_[k].emplace_back();
        continue;
      }
      ASSIGN_OR_RETURN(Buffer b, Buffer::AllocateZeroed(tracker, MemoryCategory::kOptimizerState, ctx.device,
                                                        opt->kinds_[k].dtype, region.length));
      opt->state_[k].push_back(std::move(b));
    }
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
  for (size_t i = 0; i < regions_.size(); ++i) {
    RETURN_IF_ERROR(StepRegion(static_cast<int>(i), master[i], grads[i], lr, step));
  }
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

absl::Status ShardedOptimizer::StepChunk(int region, int64_t offset, int64_t length, float* master,
                                         const float* grads, absl::Span<void* const> state_by_kind, float lr,
                                         int64_t step) {
  if (region < 0 || region >= num_regions()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer region ", region, ", expected in [0, ", num_regions(), ")"));
  }
  if (offset < 0 || length < 0 || offset + length > regions_[region].length) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer chunk [", offset, ", ", offset + length,
                                                   ") outside region ", region, " of ", regions_[region].length,
                                                   " elements"));
  }
  if (state_by_kind.size() != kinds_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer chunk got ", state_by_kind.size(),
                                                   " state buffers, expected ", kinds_.size()));
  }
  std::vector<float*> state(kinds_.size());
  const int64_t end = offset + length;
  for (const Segment& seg : segments_[region]) {
    const int64_t lo = std::max(seg.offset, offset), hi = std::min(seg.offset + seg.length, end);
    if (lo >= hi) continue;
    const int64_t at = lo - offset;  // within the chunk
    for (size_t k = 0; k < kinds_.size(); ++k) state[k] = static_cast<float*>(state_by_kind[k]) + at;
    OptimizerSegment s;
    s.param = master + at;
    s.grad = grads + at;
    s.state = state;
    s.n = hi - lo;
    s.lr = lr * seg.group.lr_mult;
    s.weight_decay = options_.weight_decay * seg.group.weight_decay_mult;
    s.step = step;
    RETURN_IF_ERROR(optimizer_->Update(ctx_, options_, s));
  }
  return absl::OkStatus();
}

absl::Status ShardedOptimizer::StepRegion(int i, float* master, const float* grads, float lr, int64_t step) {
  if (!allocate_state_ && !kinds_.empty() && !segments_[i].empty()) {
    return absl::FailedPreconditionError("the optimizer holds no state buffers (allocate_state false): StepChunk");
  }
  std::vector<float*> state(kinds_.size());
  for (const Segment& seg : segments_[i]) {
    for (size_t k = 0; k < kinds_.size(); ++k) state[k] = state_[k][i].as<float>() + seg.offset;
    OptimizerSegment s;
    s.param = master + seg.offset;
    s.grad = grads + seg.offset;
    s.state = state;
    s.n = seg.length;
    s.lr = lr * seg.group.lr_mult;
    s.weight_decay = options_.weight_decay * seg.group.weight_decay_mult;
    s.step = step;
    RETURN_IF_ERROR(optimizer_->Update(ctx_, options_, s));
  }
  return absl::OkStatus();
}

const std::vector<OptimizerStateKind>& ShardedOptimizer::state_kinds() const { return kinds_; }

const Buffer& ShardedOptimizer::state(int kind, int region) const { return state_[kind][region]; }

Buffer& ShardedOptimizer::mutable_state(int kind, int region) { return state_[kind][region]; }

}  // namespace zeroshard
