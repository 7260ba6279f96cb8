// Learning-rate schedules: constant, warmup + cosine decay, warmup + linear
// decay (llm.c / GPT-2 style).
//
// Steps are 1-based: LearningRate(1) is the rate of the first optimizer step.
// With W = warmup_steps, D = decay_steps, peak = lr, floor = min_lr:
//   s <= W:       peak * s / W                (the W-th step reaches peak)
//   W < s < D:    p = (s - W) / (D - W);
//                 cosine: floor + (peak - floor) * 0.5 * (1 + cos(pi * p))
//                 linear: floor + (peak - floor) * (1 - p)
//   s >= D:       floor
// CONSTANT warms up the same way, then stays at peak (decay_steps unused).
#ifndef ZEROSHARD_SHARDING_LR_SCHEDULE_H_
#define ZEROSHARD_SHARDING_LR_SCHEDULE_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace zeroshard {

enum class LrScheduleType { kConstant, kWarmupCosine, kWarmupLinear };

struct LrScheduleOptions {
  LrScheduleType type = LrScheduleType::kConstant;
  double lr = 3e-4;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  // Step at which decay reaches min_lr; must exceed warmup_steps for the
  // decaying types (resolve "0 = the run's steps" before building this).
  int64_t decay_steps = 0;
};

class LrSchedule {
 public:
  // kInvalidArgument naming the field for lr <= 0, min_lr outside [0, lr],
  // warmup_steps < 0, or decay_steps <= warmup_steps for a decaying type.
  static absl::StatusOr<LrSchedule> Create(const LrScheduleOptions& options);

  // Rate for 1-based optimizer step `step` (step >= 1).
  double LearningRate(int64_t step) const;

  const LrScheduleOptions& options() const { return options_; }

 private:
  explicit LrSchedule(const LrScheduleOptions& options) : options_(options) {}
  LrScheduleOptions options_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_LR_SCHEDULE_H_
