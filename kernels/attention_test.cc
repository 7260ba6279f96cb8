#include "kernels/attention.h"

#include <cmath>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

struct RefAttentionOut {
  std::vector<double> out, lse;
};

// Straightforward f64 causal attention over qkv (B,T,3C).
RefAttentionOut RefAttention(const std::vector<double>& qkv, int64_t b_n, int64_t t_n, int64_t c, int64_t nh) {
  const int64_t hs = c / nh;
  const double scale = 1 / std::sqrt(static_cast<double>(hs));
  RefAttentionOut o{std::vector<double>(b_n * t_n * c, 0.0), std::vector<double>(b_n * nh * t_n, 0.0)};
  for (int64_t b = 0; b < b_n; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t t = 0; t < t_n; ++t) {
        std::vector<double> s(t + 1);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < hs; ++i) {
            dot += qkv[(b * t_n + t) * 3 * c + h * hs + i] * qkv[(b * t_n + j) * 3 * c + c + h * hs + i];
          }
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
        o.lse[(b * nh + h) * t_n + t] = mx + std::log(sum);
        for (int64_t j = 0; j <= t; ++j) {
          const double p = s[j] / sum;
          for (int64_t i = 0; i < hs; ++i) {
            o.out[(b * t_n + t) * c + h * hs + i] += p * qkv[(b * t_n + j) * 3 * c + 2 * c + h * hs + i];
          }
        }
      }
    }
  }
  return o;
}

class AttentionTest : public ::testing::TestWithParam<DType> {};

TEST_P(AttentionTest, ForwardMatchesF64) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t b = 2, t = 7, c = 12, nh = 3;
  HostTensor qkv = HostTensor::From(dtype, rng.Uniform(b * t * 3 * c, -2, 2));
  HostTensor out = HostTensor::Poisoned(dtype, b * t * c);
  std::vector<float> lse(b * nh * t, NAN);
  ASSERT_TRUE(AttentionForward(KernelContext::Cpu(), out.data(), lse.data(), qkv.data(), b, t, c, nh, dtype).ok());
  RefAttentionOut ref = RefAttention(qkv.Values(), b, t, c, nh);
  const double tol = 1e-5 + 2 * testing::Epsilon(dtype);
  ExpectAllClose(out.Values(), ref.out, tol, tol, "out");
  // lse is f32 for every dtype, from the dtype inputs.
  ExpectAllClose(std::vector<double>(lse.begin(), lse.end()), ref.lse, 1e-6, 1e-5, "lse");
}

TEST_P(AttentionTest, BackwardMatchesFiniteDifferences) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t b = 2, t = 5, c = 8, nh = 2;
  HostTensor qkv = HostTensor::From(dtype, rng.Uniform(b * t * 3 * c, -1.5, 1.5));
  HostTensor dout = HostTensor::From(dtype, rng.Uniform(b * t * c, -1, 1));
  HostTensor out = HostTensor::Poisoned(dtype, b * t * c);
  std::vector<float> lse(b * nh * t), scratch(AttentionBackwardScratchElements(b, t, nh), NAN);
  ASSERT_TRUE(AttentionForward(KernelContext::Cpu(), out.data(), lse.data(), qkv.data(), b, t, c, nh, dtype).ok());
  HostTensor dqkv = HostTensor::Poisoned(dtype, b * t * 3 * c);
  ASSERT_TRUE(AttentionBackward(KernelContext::Cpu(), dqkv.data(), scratch.data(), dout.data(), qkv.data(),
                                out.data(), lse.data(), b, t, c, nh, dtype)
                  .ok());
  std::vector<double> xv = qkv.Values(), dyv = dout.Values();
  auto loss = [&] { return testing::Dot(RefAttention(xv, b, t, c, nh).out, dyv); };
  std::vector<double> expected = testing::NumericGrad(xv, loss);
  // Probabilities are recomputed from dtype inputs in f32; gradients are O(1).
  const double tol = 1e-4 + 8 * testing::Epsilon(dtype);
  ExpectAllClose(dqkv.Values(), expected, tol, tol, "dqkv");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(Attention, ThreadCountIndependent) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  testing::Rng rng(testing::TestSeed());
  const int64_t b = 3, t = 16, c = 32, nh = 4;
  HostTensor qkv = HostTensor::From(DType::kF32, rng.Uniform(b * t * 3 * c, -2, 2));
  HostTensor dout = HostTensor::From(DType::kF32, rng.Uniform(b * t * c, -1, 1));
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 5}) {
    const KernelContext ctx = KernelContext::Cpu(threads);
    HostTensor out = HostTensor::Poisoned(DType::kF32, b * t * c), dqkv = HostTensor::Poisoned(DType::kF32, b * t * 3 * c);
    std::vector<float> lse(b * nh * t), scratch(AttentionBackwardScratchElements(b, t, nh));
    ASSERT_TRUE(AttentionForward(ctx, out.data(), lse.data(), qkv.data(), b, t, c, nh, DType::kF32).ok());
    ASSERT_TRUE(AttentionBackward(ctx, dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(), lse.data(), b,
                                  t, c, nh, DType::kF32)
                    .ok());
    std::vector<double> all = out.Values();
    for (double v : dqkv.Values()) all.push_back(v);
    for (float v : lse) all.push_back(v);
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(AttentionErrors, HeadsMustDivideChannels) {
  float buf[64] = {};
  absl::Status s = AttentionForward(KernelContext::Cpu(), buf, buf, buf, 1, 2, 10, 3, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "AttentionForward: channels = 10 is not a multiple of num_heads = 3");
  s = AttentionBackward(KernelContext::Cpu(), buf, nullptr, buf, buf, buf, buf, 1, 2, 4, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "AttentionBackward: scratch is null");
  s = AttentionBackward(KernelContext::Cpu(), buf, buf, buf, buf, nullptr, buf, 1, 2, 4, 2, DType::kF32);
  EXPECT_EQ(s.message(), "AttentionBackward: out is null");
}

}  // namespace
}  // namespace zeroshard::kernels
