// LossScaler: the loss scale for low-precision (f16) gradients and the
// bookkeeping of overflowing steps (engine.precision.loss_scale in
// docs/config_reference.md).
//
// The engine multiplies d(loss) by scale() before backward, unscales the
// reduced gradient by 1/scale(), and calls Update() once per step with
// whether ANY rank saw a non-finite gradient (one all-reduced flag), so every
// rank's scaler walks the same sequence.
//
// Dynamic rule (DeepSpeed's DynamicLossScaler with consecutive_hysteresis,
// which equals PyTorch's GradScaler when hysteresis = 1):
//   overflow: if hysteresis_left > 1, hysteresis_left -= 1 (scale kept);
//             else scale = max(scale * backoff_factor, min_scale), except that
//             an overflow due for a backoff while scale == min_scale is
//             kFailedPrecondition unless continue_at_min_scale.
//             The clean streak restarts at 0.
//   clean:    hysteresis_left = hysteresis (it counts overflows IN A ROW);
//             after growth_interval clean steps in a row scale *= growth_factor
//             and the streak restarts.
// Where the references differ: PyTorch has no hysteresis and no floor (its
// scale may shrink without bound); DeepSpeed by default
// (consecutive_hysteresis=False) refills the hysteresis only when the scale
// grows, so isolated overflows far apart still add up; we refill on every
// clean step, which is what "overflowing steps in a row" in config.proto says.
// DeepSpeed raises at the floor; PyTorch never stops. Static: the scale never
// changes; an overflowing step is still skipped and counted.
//
// Disabled (f32/bf16 compute): scale() is 1 and Update only counts.
// Thread-compatible.
#ifndef ZEROSHARD_SHARDING_LOSS_SCALER_H_
#define ZEROSHARD_SHARDING_LOSS_SCALER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zeroshard {

enum class LossScaleType { kNone, kStatic, kDynamic };

struct LossScalerOptions {
  LossScaleType type = LossScaleType::kNone;
  double initial_scale = 65536;
  double growth_factor = 2;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
  int hysteresis = 2;
  double min_scale = 1;
  bool continue_at_min_scale = false;
};

class LossScaler {
 public:
  // kInvalidArgument naming the option when a value is out of its range
  // (initial_scale > 0, growth_factor > 1, backoff_factor in (0, 1),
  // growth_interval >= 1, hysteresis >= 1, 0 < min_scale <= initial_scale).
  static absl::StatusOr<LossScaler> Create(const LossScalerOptions& options);

  // The scale for the next step (1 when disabled).
  double scale() const { return scale_; }

  // Records one step's outcome and moves the scale as described above.
  // kFailedPrecondition (naming the scale) for an overflow at the floor
  // without continue_at_min_scale; the counters still record the step.
  absl::Status Update(bool overflow);

  int64_t overflows() const { return overflows_; }
  int hysteresis_left() const { return hysteresis_left_; }
  int64_t clean_streak() const { return clean_streak_; }
  const LossScalerOptions& options() const { return options_; }

  // For checkpoint restore: the scale and the counters.
  void Restore(double scale, int64_t clean_streak, int hysteresis_left, int64_t overflows);

 private:
  LossScaler() = default;

  LossScalerOptions options_;
  double scale_ = 1;
  int64_t clean_streak_ = 0;
  int hysteresis_left_ = 1;
  int64_t overflows_ = 0;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_SHARDING_LOSS_SCALER_H_
