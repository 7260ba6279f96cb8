#include "sharding/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

LrSchedule Make(LrScheduleType type, double lr, double min_lr, int64_t warmup, int64_t decay) {
  LrScheduleOptions o;
  o.type = type;
  o.lr = lr;
  o.min_lr = min_lr;
  o.warmup_steps = warmup;
  o.decay_steps = decay;
  absl::StatusOr<LrSchedule> s = LrSchedule::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(LrScheduleTest, ConstantWithoutWarmup) {
  LrSchedule s = Make(LrScheduleType::kConstant, 0.5, 0, 0, 0);
  EXPECT_EQ(s.LearningRate(1), 0.5);
  EXPECT_EQ(s.LearningRate(1000000), 0.5);
}

TEST(LrScheduleTest, ConstantWithWarmup) {
  LrSchedule s = Make(LrScheduleType::kConstant, 0.5, 0, 4, 0);
  EXPECT_EQ(s.LearningRate(1), 0.125);
  EXPECT_EQ(s.LearningRate(2), 0.25);
  EXPECT_EQ(s.LearningRate(4), 0.5);
  EXPECT_EQ(s.LearningRate(5), 0.5);
}

TEST(LrScheduleTest, WarmupCosineExactValues) {
  // W = 2, D = 6: decay over 4 steps from 1.0 to 0.2.
  LrSchedule s = Make(LrScheduleType::kWarmupCosine, 1.0, 0.2, 2, 6);
  EXPECT_EQ(s.LearningRate(1), 0.5);
  EXPECT_EQ(s.LearningRate(2), 1.0);
  EXPECT_DOUBLE_EQ(s.LearningRate(3), 0.2 + 0.8 * 0.5 * (1 + std::cos(M_PI * 0.25)));
  EXPECT_DOUBLE_EQ(s.LearningRate(4), 0.6);  // halfway: cos(pi/2) = 0
  EXPECT_DOUBLE_EQ(s.LearningRate(5), 0.2 + 0.8 * 0.5 * (1 + std::cos(M_PI * 0.75)));
  EXPECT_EQ(s.LearningRate(6), 0.2);
  EXPECT_EQ(s.LearningRate(60), 0.2);
}

TEST(LrScheduleTest, WarmupLinearExactValues) {
  LrSchedule s = Make(LrScheduleType::kWarmupLinear, 1.0, 0.0, 1, 5);
  EXPECT_EQ(s.LearningRate(1), 1.0);
  EXPECT_EQ(s.LearningRate(2), 0.75);
  EXPECT_EQ(s.LearningRate(3), 0.5);
  EXPECT_EQ(s.LearningRate(4), 0.25);
  EXPECT_EQ(s.LearningRate(5), 0.0);
  EXPECT_EQ(s.LearningRate(9), 0.0);
}

TEST(LrScheduleTest, RejectsBadOptions) {
  LrScheduleOptions o;
  o.lr = 0;
  EXPECT_EQ(LrSchedule::Create(o).status().message(), "lr is 0, expected > 0");
  o.lr = 1;
  o.min_lr = 2;
  EXPECT_EQ(LrSchedule::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.min_lr = 0;
  o.warmup_steps = -1;
  EXPECT_EQ(LrSchedule::Create(o).status().message(), "warmup_steps is -1, expected >= 0");
  o.warmup_steps = 10;
  o.type = LrScheduleType::kWarmupCosine;
  o.decay_steps = 10;
  EXPECT_EQ(LrSchedule::Create(o).status().message(), "decay_steps is 10, expected > warmup_steps=10");
}

}  // namespace
}  // namespace zeroshard
