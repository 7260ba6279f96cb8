#include "nn/causal_self_attention.h"

#include <cmath>

#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

using testing::ExpectAllClose;
using testing::HostView;

// f64 reference of GPT-2's attention core. Returns out (B,T,C); each row's
// log-sum-exp (B,NH,T) in lse if non-null.
std::vector<double> RefAttention(const std::vector<double>& qkv, int64_t b, int64_t t, int64_t c, int64_t nh,
                                 std::vector<double>* lse = nullptr) {
  const int64_t hs = c / nh;
  std::vector<double> out(b * t * c, 0.0);
  if (lse) lse->assign(b * nh * t, 0.0);
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < t; ++i) {
        const double* q = &qkv[(bb * t + i) * 3 * c + h * hs];
        std::vector<double> s(i + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          const double* k = &qkv[(bb * t + j) * 3 * c + c + h * hs];
          double d = 0;
          for (int64_t e = 0; e < hs; ++e) d += q[e] * k[e];
          s[j] = d / std::sqrt(static_cast<double>(hs));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (double& v : s) z += (v = std::exp(v - mx));
        if (lse) (*lse)[(bb * nh + h) * t + i] = mx + std::log(z);
        for (int64_t j = 0; j <= i; ++j) {
          const double p = s[j] / z;
          const double* v = &qkv[(bb * t + j) * 3 * c + 2 * c + h * hs];
          for (int64_t e = 0; e < hs; ++e) out[(bb * t + i) * c + h * hs + e] += p * v[e];
        }
      }
  return out;
}

TEST(CausalSelfAttentionTest, ForwardAndBackwardMatchF64ReferenceAndFiniteDifferences) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t b = 2, t = 5, c = 8, nh = 2;
  ComputeContext ctx;
  CausalSelfAttention attn(c, nh);
  auto qkv = testing::RandomFloats(rng, b * t * 3 * c, 1.0f);
  auto out = testing::Poisoned(b * t * c), lse = testing::Poisoned(b * nh * t);
  ASSERT_TRUE(attn.Forward(ctx, HostView(qkv, {b, t, 3 * c}), HostView(out, {b, t, c}), HostView(lse, {b, nh, t})).ok());
  const auto qd = testing::ToDouble(qkv);
  std::vector<double> ref_lse;
  ExpectAllClose(out, RefAttention(qd, b, t, c, nh, &ref_lse), 1e-5, 1e-5, "out");
  ExpectAllClose(lse, ref_lse, 1e-6, 1e-5, "lse");

  auto dout = testing::RandomFloats(rng, b * t * c, 1.0f);
  auto dqkv = testing::Poisoned(b * t * 3 * c);
  ASSERT_TRUE(attn.Backward(ctx, HostView(qkv, {b, t, 3 * c}), HostView(out, {b, t, c}), HostView(lse, {b, nh, t}),
                            HostView(dout, {b, t, c}), HostView(dqkv, {b, t, 3 * c}))
                  .ok());
  ExpectAllClose(dqkv, testing::NumericalGradient([&](const std::vector<double>& v) {
                   const auto o = RefAttention(v, b, t, c, nh);
                   double s = 0;
                   for (size_t i = 0; i < o.size(); ++i) s += o[i] * dout[i];
                   return s;
                 }, qd), 1e-5, 1e-4, "dqkv");
}

TEST(CausalSelfAttentionTest, LogSumExpMustBeF32OfShapeBNhT) {
  ComputeContext ctx;
  CausalSelfAttention attn(4, 2);
  std::vector<float> qkv(1 * 3 * 12), out(12), lse(2 * 3);
  absl::Status s = attn.Forward(ctx, HostView(qkv, {1, 3, 12}), HostView(out, {1, 3, 4}), HostView(lse, {1, 3, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "attention log-sum-exp: got f32[1, 3, 2] on cpu, expected f32[1, 2, 3] on cpu");
}

}  // namespace
}  // namespace zeroshard
