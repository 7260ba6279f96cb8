#include "kernels/cross_entropy.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

// Per-row losses log(sum exp z) - z[target], in f64; 0 for a negative
// (ignored) target.
std::vector<double> RefLosses(const std::vector<double>& z, const std::vector<int32_t>& targets, int64_t n, int64_t v) {
  std::vector<double> losses(n, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    if (targets[r] < 0) continue;
    double mx = -INFINITY;
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, z[r * v + j]);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(z[r * v + j] - mx);
    losses[r] = mx + std::log(sum) - z[r * v + targets[r]];
  }
  return losses;
}

class CrossEntropyTest : public ::testing::TestWithParam<DType> {};

TEST_P(CrossEntropyTest, ForwardMatchesF64) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 9, v = 301;
  HostTensor z = HostTensor::From(dtype, rng.Uniform(n * v, -8, 8));
  std::vector<int32_t> targets = rng.Ints(n, 0, v);
  std::vector<float> losses(n, NAN), lse(n, NAN), sums(2, NAN);
  ASSERT_TRUE(CrossEntropyForward(KernelContext::Cpu(), losses.data(), lse.data(), sums.data(), z.data(),
                                  targets.data(), n, v, dtype)
                  .ok());
  std::vector<double> ref = RefLosses(z.Values(), targets, n, v);
  ExpectAllClose(std::vector<double>(losses.begin(), losses.end()), ref, 1e-5, 1e-5, "losses");
  double ref_sum = 0;
  for (double l : ref) ref_sum += l;
  EXPECT_NEAR(sums[0], ref_sum, 1e-5 * std::fabs(ref_sum) + 1e-6);
  EXPECT_EQ(sums[1], static_cast<float>(n));
  // lse is what backward needs: loss + logit[target].
  std::vector<double> ref_lse(n);
  for (int64_t r = 0; r < n; ++r) ref_lse[r] = ref[r] + z.Get(r * v + targets[r]);
  ExpectAllClose(std::vector<double>(lse.begin(), lse.end()), ref_lse, 1e-5, 1e-6, "lse");
}

TEST_P(CrossEntropyTest, BackwardMatchesFiniteDifferences) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 4, v = 23;
  HostTensor z = HostTensor::From(dtype, rng.Uniform(n * v, -3, 3));
  std::vector<int32_t> targets = rng.Ints(n, 0, v);
  std::vector<float> losses(n), lse(n);
  ASSERT_TRUE(CrossEntropyForward(KernelContext::Cpu(), losses.data(), lse.data(), nullptr, z.data(), targets.data(),
                                  n, v, dtype)
                  .ok());
  const float dloss = 0.37f;  // as if the objective were 0.37 * sum of losses
  HostTensor dz = HostTensor::Poisoned(dtype, n * v);
  ASSERT_TRUE(CrossEntropyBackward(KernelContext::Cpu(), dz.data(), z.data(), lse.data(), targets.data(), dloss, n, v,
                                   dtype)
                  .ok());
  std::vector<double> zv = z.Values();
  auto loss = [&] {
    double s = 0;
    for (double l : RefLosses(zv, targets, n, v)) s += l;
    return s * dloss;
  };
  std::vector<double> expected = testing::NumericGrad(zv, loss);
  const double tol = 1e-6 + 2 * testing::Epsilon(dtype) * 0.37;
  ExpectAllClose(dz.Values(), expected, tol, 1e-5, "dlogits");
}

// Rows with a negative target: loss 0, left out of the sum and the count,
// dlogits exactly 0; the other rows are as if the ignored ones were absent.
TEST_P(CrossEntropyTest, IgnoredTargetsAreLeftOut) {
  const DType dtype = GetParam();
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "ZS_TEST_SEED=" << seed);
  testing::Rng rng(seed);
  const int64_t n = 11, v = 37;
  HostTensor z = HostTensor::From(dtype, rng.Uniform(n * v, -4, 4));
  std::vector<int32_t> targets = rng.Ints(n, 0, v);
  for (int64_t r : {0, 3, 4, 10}) targets[r] = -1;
  targets[4] = -100;  // PyTorch's default ignore_index
  targets[10] = INT32_MIN;
  const int64_t valid = n - 4;
  std::vector<float> losses(n, NAN), lse(n, NAN), sums(2, NAN);
  ASSERT_TRUE(CrossEntropyForward(KernelContext::Cpu(), losses.data(), lse.data(), sums.data(), z.data(),
                                  targets.data(), n, v, dtype)
                  .ok());
  std::vector<double> ref = RefLosses(z.Values(), targets, n, v);
  ExpectAllClose(std::vector<double>(losses.begin(), losses.end()), ref, 1e-5, 1e-5, "losses");
  double ref_sum = 0, row_order_sum = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (targets[r] < 0) {
      EXPECT_EQ(losses[r], 0.0f) << "row " << r;
      continue;
    }
    ref_sum += ref[r];
    row_order_sum += losses[r];
  }
  EXPECT_NEAR(sums[0], ref_sum, 1e-5 * std::fabs(ref_sum) + 1e-6);
  EXPECT_EQ(sums[0], static_cast<float>(row_order_sum));  // f64 in row order, rounded once
  EXPECT_EQ(sums[1], static_cast<float>(valid));

  const float dloss = 0.37f;  // the objective is 0.37 * sum of the valid losses
  HostTensor dz = HostTensor::Poisoned(dtype, n * v);
  ASSERT_TRUE(CrossEntropyBackward(KernelContext::Cpu(), dz.data(), z.data(), lse.data(), targets.data(), dloss, n, v,
                                   dtype)
                  .ok());
  for (int64_t r = 0; r < n; ++r) {
    if (targets[r] >= 0) continue;
    for (int64_t j = 0; j < v; ++j) ASSERT_EQ(dz.Get(r * v + j), 0.0) << "row " << r << " logit " << j;
  }
  std::vector<double> zv = z.Values();
  auto loss = [&] {
    double s = 0;
    for (double l : RefLosses(zv, targets, n, v)) s += l;
    return s * dloss;
  };
  const double tol = 1e-6 + 2 * testing::Epsilon(dtype) * 0.37;
  ExpectAllClose(dz.Values(), testing::NumericGrad(zv, loss), tol, 1e-5, "dlogits");
}

TEST_P(CrossEntropyTest, AllTargetsIgnored) {
  const DType dtype = GetParam();
  const int64_t n = 3, v = 5;
  HostTensor z = HostTensor::From(dtype, {1, 2, 3, 4, 5, -1, 0, 1, 0, -1, 7, 7, 7, 7, 7});
  std::vector<int32_t> targets = {-1, -1, -7};
  std::vector<float> losses(n, NAN), lse(n, NAN), sums(2, NAN);
  ASSERT_TRUE(CrossEntropyForward(KernelContext::Cpu(), losses.data(), lse.data(), sums.data(), z.data(),
                                  targets.data(), n, v, dtype)
                  .ok());
  EXPECT_EQ(losses, std::vector<float>(n, 0.0f));
  EXPECT_EQ(sums, (std::vector<float>{0.0f, 0.0f}));
  HostTensor dz = HostTensor::Poisoned(dtype, n * v);
  ASSERT_TRUE(CrossEntropyBackward(KernelContext::Cpu(), dz.data(), z.data(), lse.data(), targets.data(), 1.0f, n, v,
                                   dtype)
                  .ok());
  EXPECT_EQ(dz.Values(), std::vector<double>(n * v, 0.0));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CrossEntropyTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(CrossEntropy, BackwardInPlaceOverLogits) {
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 3, v = 50;
  HostTensor z = HostTensor::From(DType::kF32, rng.Uniform(n * v, -4, 4));
  std::vector<int32_t> targets = rng.Ints(n, 0, v);
  std::vector<float> losses(n), lse(n);
  ASSERT_TRUE(CrossEntropyForward(KernelContext::Cpu(), losses.data(), lse.data(), nullptr, z.data(), targets.data(),
                                  n, v, DType::kF32)
                  .ok());
  HostTensor separate = HostTensor::Poisoned(DType::kF32, n * v);
  ASSERT_TRUE(CrossEntropyBackward(KernelContext::Cpu(), separate.data(), z.data(), lse.data(), targets.data(), 1.0f, n,
                                   v, DType::kF32)
                  .ok());
  ASSERT_TRUE(CrossEntropyBackward(KernelContext::Cpu(), z.data(), z.data(), lse.data(), targets.data(), 1.0f, n, v,
                                   DType::kF32)
                  .ok());
  EXPECT_EQ(z.Values(), separate.Values());
}

TEST(CrossEntropy, ThreadCountIndependent) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "ZS_TEST_SEED=" << seed);
  testing::Rng rng(seed);
  const int64_t n = 37, v = 1000;
  HostTensor z = HostTensor::From(DType::kF32, rng.Uniform(n * v, -5, 5));
  std::vector<int32_t> targets = rng.Ints(n, 0, v);
  for (int64_t r = 0; r < n; r += 3) targets[r] = -1;  // masked rows spread over every thread's block
  std::vector<std::vector<float>> results;
  std::vector<std::vector<double>> grads;
  for (int threads : {1, 2, 3, 4}) {
    std::vector<float> losses(n), lse(n), sums(2);
    ASSERT_TRUE(CrossEntropyForward(KernelContext::Cpu(threads), losses.data(), lse.data(), sums.data(), z.data(),
                                    targets.data(), n, v, DType::kF32)
                    .ok());
    losses.insert(losses.end(), lse.begin(), lse.end());
    losses.insert(losses.end(), sums.begin(), sums.end());
    results.push_back(losses);
    HostTensor dz = HostTensor::Poisoned(DType::kF32, n * v);
    ASSERT_TRUE(CrossEntropyBackward(KernelContext::Cpu(threads), dz.data(), z.data(), lse.data(), targets.data(),
                                     0.5f, n, v, DType::kF32)
                    .ok());
    grads.push_back(dz.Values());
  }
  EXPECT_EQ(results.back()[2 * n + 1], static_cast<float>(n - (n + 2) / 3));
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_EQ(results[0], results[i]) << "thread setting #" << i;
    EXPECT_EQ(grads[0], grads[i]) << "thread setting #" << i;
  }
}

TEST(CrossEntropyErrors, TargetOutOfRange) {
  float z[6] = {}, losses[2], lse[2], sums[2];
  int32_t targets[2] = {-1, 3};  // the negative one is ignored, 3 == V is not a class
  absl::Status s = CrossEntropyForward(KernelContext::Cpu(), losses, lse, sums, z, targets, 2, 3, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "CrossEntropyForward: targets[1] = 3, expected in [0, 3) or negative (ignored)");
  s = CrossEntropyBackward(KernelContext::Cpu(), z, z, lse, targets, 1.0f, 2, 3, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "CrossEntropyBackward: targets[1] = 3, expected in [0, 3) or negative (ignored)");
}

}  // namespace
}  // namespace zeroshard::kernels
