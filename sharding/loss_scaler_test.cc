#include "sharding/loss_scaler.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

LossScalerOptions Dynamic(double initial, int interval, int hysteresis, double min_scale) {
  LossScalerOptions o;
  o.type = LossScaleType::kDynamic;
  o.initial_scale = initial;
  o.growth_interval = interval;
  o.hysteresis = hysteresis;
  o.min_scale = min_scale;
  return o;
}

// Feeds a pattern ('x' overflow, '.' clean) and returns the scale after each.
std::vector<double> Walk(LossScaler* s, const std::string& pattern) {
  std::vector<double> scales;
  for (char c : pattern) {
    EXPECT_TRUE(s->Update(c == 'x').ok()) << "at step " << scales.size();
    scales.push_back(s->scale());
  }
  return scales;
}

TEST(LossScalerTest, DisabledIsOneAndCountsOverflows) {
  absl::StatusOr<LossScaler> s = LossScaler::Create({});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Walk(&*s, "x.x"), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(s->overflows(), 2);
}

TEST(LossScalerTest, StaticNeverMoves) {
  LossScalerOptions o;
  o.type = LossScaleType::kStatic;
  o.initial_scale = 128;
  absl::StatusOr<LossScaler> s = LossScaler::Create(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Walk(&*s, "xx..x"), (std::vector<double>{128, 128, 128, 128, 128}));
  EXPECT_EQ(s->overflows(), 3);
}

TEST(LossScalerTest, HysteresisTwoBacksOffOnSecondOverflowInARow) {
  absl::StatusOr<LossScaler> s = LossScaler::Create(Dynamic(1024, 3, 2, 1));
  ASSERT_TRUE(s.ok());
  // x: hysteresis 2->1, kept; x: back off; x: back off again (still 1);
  // ...: three clean steps grow; x.x: each overflow follows a clean step, so
  // the hysteresis absorbs both.
  EXPECT_EQ(Walk(&*s, "xxx...x.x"),
            (std::vector<double>{1024, 512, 256, 256, 256, 512, 512, 512, 512}));
  EXPECT_EQ(s->overflows(), 5);
  EXPECT_EQ(s->hysteresis_left(), 1);
  EXPECT_EQ(s->clean_streak(), 0);
}

TEST(LossScalerTest, HysteresisOneIsPyTorchGradScaler) {
  LossScalerOptions o = Dynamic(65536, 2, 1, 1);
  o.growth_factor = 4;
  o.backoff_factor = 0.25;
  absl::StatusOr<LossScaler> s = LossScaler::Create(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Walk(&*s, "x..x.x.."), (std::vector<double>{16384, 16384, 65536, 16384, 16384, 4096, 4096, 16384}));
}

TEST(LossScalerTest, FloorStopsTheRunUnlessContinue) {
  absl::StatusOr<LossScaler> s = LossScaler::Create(Dynamic(4, 100, 1, 2));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->Update(true).ok());
  EXPECT_EQ(s->scale(), 2);
  absl::Status at_floor = s->Update(true);
  EXPECT_EQ(at_floor.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(at_floor.message(), "minimum loss scale 2")) << at_floor.message();
  EXPECT_EQ(s->overflows(), 2);

  LossScalerOptions o = Dynamic(4, 100, 1, 2);
  o.continue_at_min_scale = true;
  absl::StatusOr<LossScaler> c = LossScaler::Create(o);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Walk(&*c, "xxx"), (std::vector<double>{2, 2, 2}));
}

TEST(LossScalerTest, BackoffClampsToFloor) {
  LossScalerOptions o = Dynamic(10, 100, 1, 3);
  absl::StatusOr<LossScaler> s = LossScaler::Create(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Walk(&*s, "x"), (std::vector<double>{5}));
  EXPECT_EQ(Walk(&*s, "x"), (std::vector<double>{3}));
}

TEST(LossScalerTest, RejectsOutOfRangeOptions) {
  struct Case {
    LossScalerOptions o;
    const char* message;
  };
  std::vector<Case> cases;
  LossScalerOptions o = Dynamic(1024, 10, 2, 1);
  o.initial_scale = 0;
  cases.push_back({o, "loss_scale.initial_scale: 0, expected > 0"});
  o = Dynamic(1024, 10, 2, 1);
  o.growth_factor = 1;
  cases.push_back({o, "loss_scale.growth_factor: 1, expected > 1"});
  o = Dynamic(1024, 10, 2, 1);
  o.backoff_factor = 1;
  cases.push_back({o, "loss_scale.backoff_factor: 1, expected in (0, 1)"});
  cases.push_back({Dynamic(1024, 0, 2, 1), "loss_scale.growth_interval: 0, expected >= 1"});
  cases.push_back({Dynamic(1024, 10, 0, 1), "loss_scale.hysteresis: 0, expected >= 1"});
  cases.push_back({Dynamic(1024, 10, 2, 2048), "loss_scale.min_scale: 2048, expected in (0, initial_scale = 1024]"});
  for (const Case& c : cases) {
    absl::StatusOr<LossScaler> s = LossScaler::Create(c.o);
    ASSERT_FALSE(s.ok()) << c.message;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(), c.message);
  }
}

}  // namespace
}  // namespace zeroshard
