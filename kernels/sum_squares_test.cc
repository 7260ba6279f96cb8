#include "kernels/sum_squares.h"

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::HostTensor;

class SumSquaresTest : public ::testing::TestWithParam<DType> {};

TEST_P(SumSquaresTest, MatchesF64AndIsThreadCountIndependent) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 3 * kSumSquaresChunk + 123;  // a partial last chunk
  HostTensor x = HostTensor::From(dtype, rng.Uniform(n, -3, 3));
  long double ref = 0;
  for (double v : x.Values()) ref += static_cast<long double>(v) * v;
  std::vector<double> results;
  for (int threads : {1, 2, 3}) {
    double result = -1;
    ASSERT_TRUE(SumOfSquares(KernelContext::Cpu(threads), x.data(), n, dtype, &result).ok());
    results.push_back(result);
  }
  // Squares of dtype values are exact in f64; only the f64 additions round.
  EXPECT_NEAR(results[0], static_cast<double>(ref), 1e-12 * static_cast<double>(ref));
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SumSquaresTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(SumSquares, EmptyIsZeroAndInfPropagates) {
  double result = -1;
  ASSERT_TRUE(SumOfSquares(KernelContext::Cpu(), nullptr, 0, DType::kF32, &result).ok());
  EXPECT_EQ(result, 0.0);
  HostTensor x = HostTensor::From(DType::kF32, {1.0, std::numeric_limits<double>::infinity()});
  ASSERT_TRUE(SumOfSquares(KernelContext::Cpu(), x.data(), 2, DType::kF32, &result).ok());
  EXPECT_TRUE(std::isinf(result));
  // Exact small case: 1 + 4 + 9.
  HostTensor y = HostTensor::From(DType::kBF16, {1.0, -2.0, 3.0});
  ASSERT_TRUE(SumOfSquares(KernelContext::Cpu(), y.data(), 3, DType::kBF16, &result).ok());
  EXPECT_EQ(result, 14.0);
}

// Many spans at once give each span's SumOfSquares bit for bit.
TEST(SumSquares, ManyMatchesEachSpanAlone) {
  testing::Rng rng(testing::TestSeed());
  HostTensor a = HostTensor::From(DType::kF32, rng.Uniform(2 * kSumSquaresChunk + 7, -2, 2));
  HostTensor b = HostTensor::From(DType::kF32, rng.Uniform(5, -2, 2));
  const std::vector<SumSquaresSpan> spans = {{a.data(), 2 * kSumSquaresChunk + 7}, {nullptr, 0}, {b.data(), 5},
                                             {a.data(), 100}};
  std::vector<double> many(spans.size(), -1.0);
  ASSERT_TRUE(SumOfSquaresMany(KernelContext::Cpu(2), spans, DType::kF32, many.data()).ok());
  for (size_t i = 0; i < spans.size(); ++i) {
    double alone = -1;
    ASSERT_TRUE(SumOfSquares(KernelContext::Cpu(2), spans[i].x, spans[i].n, DType::kF32, &alone).ok());
    EXPECT_EQ(many[i], alone) << "span " << i;
  }
  EXPECT_EQ(many[1], 0.0);
}

TEST(SumSquares, ManyRejectsANullSpan) {
  double result = 0;
  const std::vector<SumSquaresSpan> spans = {{nullptr, 3}};
  absl::Status s = SumOfSquaresMany(KernelContext::Cpu(), spans, DType::kF32, &result);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "SumOfSquaresMany: x is null");
}

}  // namespace
}  // namespace zeroshard::kernels
