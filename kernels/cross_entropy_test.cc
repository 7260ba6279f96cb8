#include "kernels/cross_entropy.h"

#include <cmath>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

// Per-row losses log(sum exp z) - z[target], in f64.
std::vector<double> RefLosses(const std::vector<double>& z, const std::vector<int32_t>& targets, int64_t n, int64_t v) {
  std::vector<double> losses(n);
  for (int64_t r = 0; r < n; ++r) {
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
  std::vector<float> losses(n, NAN), lse(n, NAN);
  float mean = NAN;
  ASSERT_TRUE(CrossEntropyForward(KernelContext::Cpu(), losses.data(), lse.data(), &mean, z.data(), targets.data(), n,
                                  v, dtype)
                  .ok());
  std::vector<double> ref = RefLosses(z.Values(), targets, n, v);
  ExpectAllClose(std::vector<double>(losses.begin(), losses.end()), ref, 1e-5, 1e-5, "losses");
  double ref_mean = 0;
  for (double l : ref) ref_mean += l / n;
  EXPECT_NEAR(mean, ref_mean, 1e-5 * std::fabs(ref_mean) + 1e-6);
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
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 37, v = 1000;
  HostTensor z = HostTensor::From(DType::kF32, rng.Uniform(n * v, -5, 5));
  std::vector<int32_t> targets = rng.Ints(n, 0, v);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 4}) {
    std::vector<float> losses(n), lse(n);
    float mean = 0;
    ASSERT_TRUE(CrossEntropyForward(KernelContext::Cpu(threads), losses.data(), lse.data(), &mean, z.data(),
                                    targets.data(), n, v, DType::kF32)
                    .ok());
    losses.push_back(mean);
    results.push_back(losses);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(CrossEntropyErrors, TargetOutOfRange) {
  float z[6] = {}, losses[2], lse[2];
  int32_t targets[2] = {1, 3};
  absl::Status s = CrossEntropyForward(KernelContext::Cpu(), losses, lse, nullptr, z, targets, 2, 3, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "CrossEntropyForward: targets[1] = 3, expected in [0, 3)");
}

}  // namespace
}  // namespace zeroshard::kernels
