#include "sharding/grad_clip.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(GradClipTest, SumOfSquaresMatchesDirectSum) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> x(1001);
  double expected = 0;
  for (float& v : x) {
    v = dist(rng);
    expected += static_cast<double>(v) * v;
  }
  EXPECT_EQ(SumOfSquares(x.data(), x.size()), expected);
  EXPECT_EQ(SumOfSquares(x.data(), 0), 0.0);
  const float three_four[] = {3.0f, -4.0f};
  EXPECT_EQ(SumOfSquares(three_four, 2), 25.0);
}

TEST(GradClipTest, CoefficientLikePyTorch) {
  EXPECT_EQ(ClipCoefficient(0.5f, 1.0f), 1.0f);
  EXPECT_EQ(ClipCoefficient(4.0f, 1.0f), 1.0f / (4.0f + 1e-6f));
  EXPECT_EQ(ClipCoefficient(1.0f, 1.0f), 1.0f / (1.0f + 1e-6f));  // just below 1
  EXPECT_EQ(ClipCoefficient(100.0f, 0.0f), 1.0f);               // clipping off
  EXPECT_TRUE(std::isnan(ClipCoefficient(std::numeric_limits<float>::quiet_NaN(), 1.0f)));
  EXPECT_TRUE(std::isinf(ClipCoefficient(std::numeric_limits<float>::infinity(), 1.0f)));
}

}  // namespace
}  // namespace zeroshard
