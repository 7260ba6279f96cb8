#include "kernels/gelu.h"

#include <cmath>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/pointwise_math.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

double RefGelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

class GeluTest : public ::testing::TestWithParam<DType> {};

TEST_P(GeluTest, ForwardMatchesF64) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 100003;  // odd size, several thread blocks
  HostTensor x = HostTensor::From(dtype, rng.Uniform(n, -6, 6));
  HostTensor y = HostTensor::Poisoned(dtype, n);
  ASSERT_TRUE(GeluForward(KernelContext::Cpu(), y.data(), x.data(), n, dtype).ok());
  std::vector<double> expected(n);
  for (int64_t i = 0; i < n; ++i) expected[i] = RefGelu(x.Get(i));
  const double tol = 1e-6 + 2 * testing::Epsilon(dtype);
  ExpectAllClose(y.Values(), expected, tol, tol, "out");
}

TEST_P(GeluTest, BackwardMatchesFiniteDifferences) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 257;
  HostTensor x = HostTensor::From(dtype, rng.Uniform(n, -5, 5));
  HostTensor dy = HostTensor::From(dtype, rng.Uniform(n, -1, 1));
  HostTensor dx = HostTensor::Poisoned(dtype, n);
  ASSERT_TRUE(GeluBackward(KernelContext::Cpu(), dx.data(), x.data(), dy.data(), n, dtype).ok());
  std::vector<double> xv = x.Values(), expected(n);
  for (int64_t i = 0; i < n; ++i) {
    const double h = 1e-6;
    expected[i] = (RefGelu(xv[i] + h) - RefGelu(xv[i] - h)) / (2 * h) * dy.Get(i);
  }
  const double tol = 1e-5 + 2 * testing::Epsilon(dtype);
  ExpectAllClose(dx.Values(), expected, tol, tol, "dinp");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GeluTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(Gelu, InPlaceBackwardOverDout) {
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 64;
  HostTensor x = HostTensor::From(DType::kF32, rng.Uniform(n, -3, 3));
  HostTensor d = HostTensor::From(DType::kF32, rng.Uniform(n, -1, 1));
  HostTensor separate = HostTensor::Poisoned(DType::kF32, n);
  ASSERT_TRUE(GeluBackward(KernelContext::Cpu(), separate.data(), x.data(), d.data(), n, DType::kF32).ok());
  ASSERT_TRUE(GeluBackward(KernelContext::Cpu(), d.data(), x.data(), d.data(), n, DType::kF32).ok());
  EXPECT_EQ(d.Values(), separate.Values());
}

// The CPU loop vectorises; each element must still be the scalar formula's
// bits (kernels/pointwise_math.h), so CPU results do not depend on how the
// loop was compiled.
TEST(Gelu, CpuLoopGivesTheScalarFormulasBits) {
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 1027;
  HostTensor x = HostTensor::From(DType::kF32, rng.Uniform(n, -12, 12));
  HostTensor dy = HostTensor::From(DType::kF32, rng.Uniform(n, -1, 1));
  HostTensor y = HostTensor::Poisoned(DType::kF32, n), dx = HostTensor::Poisoned(DType::kF32, n);
  ASSERT_TRUE(GeluForward(KernelContext::Cpu(), y.data(), x.data(), n, DType::kF32).ok());
  ASSERT_TRUE(GeluBackward(KernelContext::Cpu(), dx.data(), x.data(), dy.data(), n, DType::kF32).ok());
  const float* xs = static_cast<const float*>(x.data());
  const float* dys = static_cast<const float*>(dy.data());
  const float* ys = static_cast<const float*>(y.data());
  const float* dxs = static_cast<const float*>(dx.data());
  for (int64_t i = 0; i < n; ++i) {
    volatile float xi = xs[i];  // one scalar evaluation
    ASSERT_EQ(ys[i], GeluTanh(xi)) << "x = " << xs[i];
    ASSERT_EQ(dxs[i], GeluTanhGrad(xi) * dys[i]) << "x = " << xs[i];
  }
}

TEST(GeluErrors, NegativeCount) {
  absl::Status s = GeluForward(KernelContext::Cpu(), nullptr, nullptr, -1, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "GeluForward: n = -1, expected >= 0");
  EXPECT_TRUE(GeluForward(KernelContext::Cpu(), nullptr, nullptr, 0, DType::kF32).ok());
}

}  // namespace
}  // namespace zeroshard::kernels
