#include "kernels/cpu/row_reductions.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/pointwise_math.h"

namespace zeroshard::kernels::cpu {
namespace {

int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  return std::abs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));  // both positive here
}

// Evaluated one call at a time (the loop in the kernels vectorises; values
// must not depend on that, which the array test below checks).
float ScalarExp(float x) {
  volatile float v = x;
  return ExpF32(v);
}

TEST(ExpF32, WithinOneUlpOverTheNormalRange) {
  const float lo = std::log(std::numeric_limits<float>::min()), hi = std::log(std::numeric_limits<float>::max());
  int64_t worst = 0, checked = 0;
  float worst_x = 0.0f;
  // Every 97th float of the range, both signs.
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 97) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    for (float s : {x, -x}) {
      if (!(s >= lo && s <= hi)) continue;
      const float want = static_cast<float>(std::exp(static_cast<double>(s)));
      const int64_t d = UlpDistance(ScalarExp(s), want);
      ++checked;
      if (d > worst) {
        worst = d;
        worst_x = s;
      }
    }
  }
  EXPECT_GT(checked, 10000000);
  EXPECT_LE(worst, 1) << "at x = " << worst_x;
}

TEST(ExpF32, SpecialValues) {
  EXPECT_EQ(ScalarExp(0.0f), 1.0f);
  EXPECT_EQ(ScalarExp(-0.0f), 1.0f);
  EXPECT_EQ(ScalarExp(-INFINITY), 0.0f);
  EXPECT_EQ(ScalarExp(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(ScalarExp(NAN)));
  EXPECT_EQ(ScalarExp(-88.0f), 0.0f);    // exp is subnormal there: flushed
  EXPECT_EQ(ScalarExp(-1e30f), 0.0f);
  EXPECT_EQ(ScalarExp(89.0f), INFINITY);  // above ln(FLT_MAX)
  EXPECT_EQ(ScalarExp(1e30f), INFINITY);
  EXPECT_TRUE(std::isfinite(ScalarExp(88.72f)));
  EXPECT_GT(ScalarExp(-87.33f), 0.0f);
}

TEST(ExpF32, ArrayLoopGivesTheScalarBits) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> x(1003);
  for (float& v : x) v = dist(rng);
  x[5] = NAN;
  x[6] = -INFINITY;
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = ExpF32(x[i]);  // may vectorise
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = ScalarExp(x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << i;
    } else {
      EXPECT_EQ(y[i], want) << "x = " << x[i];
    }
  }
}

std::vector<float> RandomRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-30.0f, 30.0f);
  std::vector<float> row(n);
  for (float& v : row) v = dist(rng);
  return row;
}

TEST(RowMax, IsTheSequentialMaximumAndSkipsNaN) {
  for (int64_t n : {0, 1, 7, 8, 9, 16, 37, 50257}) {
    std::vector<float> row = RandomRow(n, static_cast<uint32_t>(n));
    if (n > 3) row[3] = NAN;
    float want = -INFINITY;
    for (float v : row) want = std::fmax(want, v);
    EXPECT_EQ(RowMax(row.data(), n), want) << "n = " << n;
  }
}

TEST(RowSumExp, MatchesTheExactSumAndIgnoresAlignment) {
  for (int64_t n : {1, 7, 8, 9, 63, 50257}) {
    const std::vector<float> row = RandomRow(n, 100 + static_cast<uint32_t>(n));
    const float shift = RowMax(row.data(), n);
    long double exact = 0.0L;
    for (float v : row) exact += std::exp(static_cast<long double>(v) - shift);
    const double got = RowSumExp(row.data(), n, shift);
    EXPECT_NEAR(got / static_cast<double>(exact), 1.0, 3e-7) << "n = " << n;
    // The same row one element further into a buffer: the same bits.
    std::vector<float> shifted(n + 1);
    std::memcpy(shifted.data() + 1, row.data(), n * sizeof(float));
    EXPECT_EQ(RowSumExp(shifted.data() + 1, n, shift), got) << "n = " << n;
  }
}

}  // namespace
}  // namespace zeroshard::kernels::cpu
