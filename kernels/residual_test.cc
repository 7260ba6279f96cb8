#include "kernels/residual.h"

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

class ResidualTest : public ::testing::TestWithParam<DType> {};

TEST_P(ResidualTest, ForwardAndAddInPlace) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 70001;
  HostTensor a = HostTensor::From(dtype, rng.Uniform(n, -1, 1));
  HostTensor b = HostTensor::From(dtype, rng.Uniform(n, -1, 1));
  HostTensor out = HostTensor::Poisoned(dtype, n);
  std::vector<double> expected(n);
  for (int64_t i = 0; i < n; ++i) expected[i] = a.Get(i) + b.Get(i);
  ASSERT_TRUE(ResidualForward(KernelContext::Cpu(), out.data(), a.data(), b.data(), n, dtype).ok());
  const double tol = 2 * testing::Epsilon(dtype);
  ExpectAllClose(out.Values(), expected, tol, tol, "out");
  // y += x equals the out-of-place sum bit for bit.
  ASSERT_TRUE(AddInPlace(KernelContext::Cpu(), a.data(), b.data(), n, dtype).ok());
  EXPECT_EQ(a.Values(), out.Values());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ResidualTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(ResidualErrors, NullAndDtype) {
  float x[2] = {};
  absl::Status s = ResidualForward(KernelContext::Cpu(), x, nullptr, x, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "ResidualForward: a is null");
  s = AddInPlace(KernelContext::Cpu(), x, x, 2, DType::kU16);
  EXPECT_EQ(s.message(), "AddInPlace: dtype u16, expected f32, bf16 or f16");
}

}  // namespace
}  // namespace zeroshard::kernels
