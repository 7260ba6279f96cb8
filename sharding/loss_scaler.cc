#include "sharding/loss_scaler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::StatusOr<LossScaler> LossScaler::Create(const LossScalerOptions& o) {
  LossScaler s;
  s.options_ = o;
  if (o.type == LossScaleType::kNone) return s;
  if (!(o.initial_scale > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("loss_scale.initial_scale: ", o.initial_scale, ", expected > 0"));
  }
  if (o.type == LossScaleType::kDynamic) {
    if (!(o.growth_factor > 1)) {
      return absl::InvalidArgumentError(absl::StrCat("loss_scale.growth_factor: ", o.growth_factor, ", expected > 1"));
    }
    if (!(o.backoff_factor > 0 && o.backoff_factor < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("loss_scale.backoff_factor: ", o.backoff_factor, ", expected in (0, 1)"));
    }
    if (o.growth_interval < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("loss_scale.growth_interval: ", o.growth_interval, ", expected >= 1"));
    }
    if (o.hysteresis < 1) {
      return absl::InvalidArgumentError(absl::StrCat("loss_scale.hysteresis: ", o.hysteresis, ", expected >= 1"));
    }
    if (!(o.min_scale > 0 && o.min_scale <= o.initial_scale)) {
      return absl::InvalidArgumentError(absl::StrCat("loss_scale.min_scale: ", o.min_scale,
                                                     ", expected in (0, initial_scale = ", o.initial_scale, "]"));
    }
  }
  s.scale_ = o.initial_scale;
  s.hysteresis_left_ = o.hysteresis;
  return s;
}

absl::Status LossScaler::Update(bool overflow) {
  if (!overflow) {
    if (options_.type != LossScaleType::kDynamic) return absl::OkStatus();
    hysteresis_left_ = options_.hysteresis;
    if (++clean_streak_ >= options_.growth_interval) {
      scale_ *= options_.growth_factor;
      clean_streak_ = 0;
    }
    return absl::OkStatus();
  }
  ++overflows_;
  if (options_.type != LossScaleType::kDynamic) return absl::OkStatus();
  clean_streak_ = 0;
  if (hysteresis_left_ > 1) {
    --hysteresis_left_;
    return absl::OkStatus();
  }
  if (scale_ <= options_.min_scale) {
    if (options_.continue_at_min_scale) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "gradient overflow at the minimum loss scale ", scale_,
        " (engine.precision.loss_scale.min_scale); the run diverged: lower the learning rate, or set "
        "continue_at_min_scale to keep skipping steps"));
  }
  scale_ = std::max(scale_ * options_.backoff_factor, options_.min_scale);
  return absl::OkStatus();
}

void LossScaler::Restore(double scale, int64_t clean_streak, int hysteresis_left, int64_t overflows) {
  scale_ = scale;
  clean_streak_ = clean_streak;
  hysteresis_left_ = hysteresis_left;
  overflows_ = overflows;
}

}  // namespace zeroshard
