#include "sharding/lr_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleOptions& o) {
  if (!(o.lr > 0)) return absl::InvalidArgumentError(absl::StrCat("lr is ", o.lr, ", expected > 0"));
  if (!(o.min_lr >= 0 && o.min_lr <= o.lr)) {
    return absl::InvalidArgumentError(absl::StrCat("min_lr is ", o.min_lr, ", expected in [0, lr=", o.lr, "]"));
  }
  if (o.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("warmup_steps is ", o.warmup_steps, ", expected >= 0"));
  }
  if (o.type != LrScheduleType::kConstant && o.decay_steps <= o.warmup_steps) {
    return absl::InvalidArgumentError(absl::StrCat("decay_steps is ", o.decay_steps,
                                                   ", expected > warmup_steps=", o.warmup_steps));
  }
  return LrSchedule(o);
}

double LrSchedule::LearningRate(int64_t step) const {
  const LrScheduleOptions& o = options_;
  if (step <= o.warmup_steps) return o.lr * static_cast<double>(step) / static_cast<double>(o.warmup_steps);
  if (o.type == LrScheduleType::kConstant) return o.lr;
  if (step >= o.decay_steps) return o.min_lr;
  const double p = static_cast<double>(step - o.warmup_steps) / static_cast<double>(o.decay_steps - o.warmup_steps);
  const double coeff = o.type == LrScheduleType::kWarmupCosine ? 0.5 * (1.0 + std::cos(M_PI * p)) : 1.0 - p;
  return o.min_lr + (o.lr - o.min_lr) * coeff;
}

}  // namespace zeroshard
