#include "kernels/embedding.h"

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

class EmbeddingTest : public ::testing::TestWithParam<DType> {};

TEST_P(EmbeddingTest, ForwardMatchesF64) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t b = 3, t = 5, c = 8, v = 11, max_t = 7;
  std::vector<int32_t> tokens = rng.Ints(b * t, 0, v);
  HostTensor wte = HostTensor::From(dtype, rng.Uniform(v * c, -1, 1));
  HostTensor wpe = HostTensor::From(dtype, rng.Uniform(max_t * c, -1, 1));
  HostTensor out = HostTensor::Poisoned(dtype, b * t * c);
  ASSERT_TRUE(EmbeddingForward(KernelContext::Cpu(), out.data(), tokens.data(), wte.data(), wpe.data(), b, t, c, v,
                               dtype)
                  .ok());
  std::vector<double> expected(b * t * c);
  for (int64_t r = 0; r < b * t; ++r)
    for (int64_t i = 0; i < c; ++i) expected[r * c + i] = wte.Get(tokens[r] * c + i) + wpe.Get((r % t) * c + i);
  const double tol = testing::Epsilon(dtype);
  ExpectAllClose(out.Values(), expected, tol, tol, "out");
}

// Few distinct tokens so rows are hit many times; dwte/dwpe start random and
// must receive exactly the scattered sums on top. Rows of tokens that never
// occur stay bit-identical.
TEST_P(EmbeddingTest, BackwardScatterAddsOntoExistingGradients) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t b = 4, t = 6, c = 5, v = 9;
  std::vector<int32_t> tokens = rng.Ints(b * t, 0, 4);  // tokens 4..8 unused
  HostTensor dout = HostTensor::From(dtype, rng.Uniform(b * t * c, -1, 1));
  HostTensor dwte = HostTensor::From(dtype, rng.Uniform(v * c, -1, 1));
  HostTensor dwpe = HostTensor::From(dtype, rng.Uniform(t * c, -1, 1));
  std::vector<double> expected_wte = dwte.Values(), expected_wpe = dwpe.Values();
  for (int64_t r = 0; r < b * t; ++r) {
    for (int64_t i = 0; i < c; ++i) {
      expected_wte[tokens[r] * c + i] += dout.Get(r * c + i);
      expected_wpe[(r % t) * c + i] += dout.Get(r * c + i);
    }
  }
  ASSERT_TRUE(EmbeddingBackward(KernelContext::Cpu(), dwte.data(), dwpe.data(), dout.data(), tokens.data(), b, t, c, v,
                                dtype)
                  .ok());
  // f32 sums of <= 24 terms in (-1, 1), one rounding to dtype of a value < 25.
  const double tol = 1e-5 + 25 * testing::Epsilon(dtype);
  ExpectAllClose(dwte.Values(), expected_wte, tol, 2 * testing::Epsilon(dtype), "dwte");
  ExpectAllClose(dwpe.Values(), expected_wpe, tol, 2 * testing::Epsilon(dtype), "dwpe");
  for (int64_t i = 4 * c; i < v * c; ++i) EXPECT_EQ(dwte.Get(i), expected_wte[i]) << "untouched row element " << i;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, EmbeddingTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(EmbeddingBackward, BitwiseIdenticalForAnyThreadCount) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  testing::Rng rng(testing::TestSeed());
  const int64_t b = 8, t = 32, c = 48, v = 50;
  std::vector<int32_t> tokens = rng.Ints(b * t, 0, v);
  HostTensor dout = HostTensor::From(DType::kF32, rng.Uniform(b * t * c, -1, 1));
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3, 5}) {
    HostTensor dwte = HostTensor::From(DType::kF32, std::vector<double>(v * c, 0.125));
    HostTensor dwpe = HostTensor::From(DType::kF32, std::vector<double>(t * c, 0.125));
    ASSERT_TRUE(EmbeddingBackward(KernelContext::Cpu(threads), dwte.data(), dwpe.data(), dout.data(), tokens.data(), b,
                                  t, c, v, DType::kF32)
                    .ok());
    std::vector<double> both = dwte.Values();
    for (double x : dwpe.Values()) both.push_back(x);
    results.push_back(both);
  }
  for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[0], results[i]) << "thread setting " << i;
}

TEST(EmbeddingErrors, TokenOutOfRangeNamesItsPosition) {
  float table[12] = {}, out[12] = {};
  std::vector<int32_t> tokens = {0, 1, 2, 3};  // vocab 3: tokens[1, 1] = 3 is out of range
  absl::Status s =
      EmbeddingForward(KernelContext::Cpu(), out, tokens.data(), table, table, 2, 2, 3, 3, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "EmbeddingForward: tokens[1, 1] = 3, expected in [0, 3)");
  tokens[3] = -1;
  s = EmbeddingBackward(KernelContext::Cpu(), table, table, out, tokens.data(), 2, 2, 3, 3, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "EmbeddingBackward: tokens[1, 1] = -1, expected in [0, 3)");
}

}  // namespace
}  // namespace zeroshard::kernels
