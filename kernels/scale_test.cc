#include "kernels/scale.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::HostTensor;

class ScaleTest : public ::testing::TestWithParam<DType> {};

TEST_P(ScaleTest, ScalesEveryElementAndReportsFinite) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 50001;
  HostTensor x = HostTensor::From(dtype, rng.Uniform(n, -100, 100));
  std::vector<double> expected = x.Values();
  for (double& v : expected) v = HostTensor::From(dtype, {static_cast<float>(v) * 0.125f}).Get(0);
  bool found = true;
  ASSERT_TRUE(ScaleInPlace(KernelContext::Cpu(), x.data(), n, dtype, 0.125f, &found).ok());
  EXPECT_FALSE(found);
  EXPECT_EQ(x.Values(), expected);
}

// A single inf or NaN anywhere (first, middle, last) is seen, and the other
// elements are still scaled.
TEST_P(ScaleTest, DetectsNonFiniteAnywhere) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  const DType dtype = GetParam();
  const int64_t n = 40000;
  for (int64_t pos : {int64_t{0}, n / 2 + 7, n - 1}) {
    for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
      HostTensor x = HostTensor::From(dtype, std::vector<double>(n, 2.0));
      x.Set(pos, bad);
      bool found = false;
      ASSERT_TRUE(ScaleInPlace(KernelContext::Cpu(3), x.data(), n, dtype, 0.5f, &found).ok());
      EXPECT_TRUE(found) << "pos " << pos << " value " << bad;
      EXPECT_EQ(x.Get(pos == 0 ? 1 : 0), 1.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ScaleTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(Scale, OverflowIsNonFinite) {
  HostTensor x = HostTensor::From(DType::kF16, {1000.0, 1.0});
  bool found = false;
  ASSERT_TRUE(ScaleInPlace(KernelContext::Cpu(), x.data(), 2, DType::kF16, 100.0f, &found).ok());
  EXPECT_TRUE(found);  // 1e5 overflows f16
  EXPECT_EQ(x.Get(1), 100.0);
}

// Without a flag it only scales (on CUDA: without waiting for the stream).
TEST(ScaleInPlaceTest, WithoutAFlagItOnlyScales) {
  float x[3] = {1, -3, std::numeric_limits<float>::infinity()};
  ASSERT_TRUE(ScaleInPlace(KernelContext::Cpu(), x, 3, DType::kF32, 2.0f, nullptr).ok());
  EXPECT_EQ(x[0], 2.0f);
  EXPECT_EQ(x[1], -6.0f);
  EXPECT_TRUE(std::isinf(x[2]));
  EXPECT_TRUE(ScaleInPlace(KernelContext::Cpu(), nullptr, 0, DType::kF32, 2.0f, nullptr).ok());
}

}  // namespace
}  // namespace zeroshard::kernels

namespace zeroshard::kernels {
namespace {

TEST(ScaleErrors, CudaNeedsAWorkspace) {
  KernelContext ctx;
  ctx.device = Device::kCuda;
  float x[1] = {1};
  bool found = false;
  absl::Status s = ScaleInPlace(ctx, x, 1, DType::kF32, 2.0f, &found);
#ifdef ZEROSHARD_HAS_CUDA
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "ScaleInPlace: ctx.cuda_workspace has 0 bytes, expected >= 1048576");
#else
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
#endif
}

}  // namespace
}  // namespace zeroshard::kernels
