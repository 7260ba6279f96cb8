#include "core/step_profile.h"

#include <time.h>

#include <numeric>
#include <thread>

#include "gtest/gtest.h"

namespace zeroshard::step_profile {
namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Busy for `seconds` of wall time (so CPU time advances too).
void Spin(double seconds) {
  const double end = Now() + seconds;
  volatile double x = 0;
  while (Now() < end) x = x + 1;
}

double Sum(const std::array<double, kNumCategories>& a) { return std::accumulate(a.begin(), a.end(), 0.0); }

int Index(Category c) { return static_cast<int>(c); }

TEST(StepProfileTest, InnerScopeTimeIsNotChargedToTheOuterOne) {
  const double t0 = Now();
  Start();
  {
    const Scope outer(Category::kGemm);
    Spin(0.02);
    {
      const Scope inner(Category::kGelu);
      Spin(0.03);
    }
  }
  Spin(0.01);
  const Totals t = Stop();
  const double elapsed = Now() - t0;
  EXPECT_GE(t.wall_s[Index(Category::kGemm)], 0.02);
  EXPECT_GE(t.wall_s[Index(Category::kGelu)], 0.03);
  EXPECT_GE(t.wall_s[Index(Category::kOther)], 0.01);
  EXPECT_EQ(t.wall_s[Index(Category::kLayerNorm)], 0.0);
  // The categories add up to the profiled interval: time charged to both the
  // outer and the inner scope would make the sum exceed it.
  EXPECT_GE(Sum(t.wall_s), 0.06);
  EXPECT_LE(Sum(t.wall_s), elapsed);
  EXPECT_GT(t.cpu_s[Index(Category::kGelu)], 0.0);
  EXPECT_EQ(t.cpu_s[Index(Category::kLayerNorm)], 0.0);
}

TEST(StepProfileTest, KernelNamesMapToTheirCategories) {
  EXPECT_EQ(CategoryOfKernel("Gemm"), Category::kGemm);
  EXPECT_EQ(CategoryOfKernel("LinearBackward"), Category::kGemm);
  EXPECT_EQ(CategoryOfKernel("AttentionForward"), Category::kAttention);
  EXPECT_EQ(CategoryOfKernel("LayerNormBackward"), Category::kLayerNorm);
  EXPECT_EQ(CategoryOfKernel("GeluBackward"), Category::kGelu);
  EXPECT_EQ(CategoryOfKernel("CrossEntropyForward"), Category::kSoftmaxCrossEntropy);
  EXPECT_EQ(CategoryOfKernel("ResidualForward"), Category::kElementwise);
  EXPECT_EQ(CategoryOfKernel("AccumulateInto"), Category::kElementwise);
  EXPECT_EQ(CategoryOfKernel("SumOfSquaresMany"), Category::kOptimizer);
  EXPECT_STREQ(CategoryName(Category::kAllocation), "allocation / zeroing");
}

TEST(StepProfileTest, ScopesOnOtherThreadsOrWithoutStartCountNothing) {
  { const Scope unprofiled(Category::kGemm); }
  EXPECT_EQ(Sum(Stop().wall_s), 0.0);  // Stop without Start

  Start();
  std::thread other([] {
    const Scope s(Category::kLayerNorm);
    Spin(0.01);
  });
  other.join();
  const Totals t = Stop();
  EXPECT_EQ(t.wall_s[Index(Category::kLayerNorm)], 0.0);
  EXPECT_GE(t.wall_s[Index(Category::kOther)], 0.01);  // this thread waited outside any scope
}

}  // namespace
}  // namespace zeroshard::step_profile
