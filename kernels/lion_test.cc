#include "kernels/lion.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

// The paper's Program 1 as a plain scalar loop, one f32 operation at a time.
void RefLion(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m, const LionHyper& h) {
  for (size_t i = 0; i < p.size(); ++i) {
    const float c = h.beta1 * m[i] + (1.0f - h.beta1) * g[i];
    const float sign = c > 0 ? 1.0f : (c < 0 ? -1.0f : 0.0f);
    p[i] = p[i] - h.lr * (sign + h.weight_decay * p[i]);
    m[i] = h.beta2 * m[i] + (1.0f - h.beta2) * g[i];
  }
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

void ExpectBitwise(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(Bits(got[i]), Bits(want[i])) << what << "[" << i << "]: " << got[i] << " vs " << want[i];
  }
}

TEST(Lion, ScalarElementsExactBits) {
  const LionHyper h{0.1f, 0.9f, 0.99f, 0.1f};
  // 0: c = 0.05 > 0; 1: c < 0; 2: g = m = 0, sign(0) = 0, only the decay;
  // 3: c = 0 from m = -0 and g = 0 with p = 0 (stays 0); 4: m and g of
  // opposite signs, c follows m.
  std::vector<float> p = {1.0f, -2.0f, 3.0f, 0.0f, 0.5f}, g = {0.5f, -1.0f, 0.0f, 0.0f, 1.0f},
                     m = {0.0f, -0.25f, 0.0f, -0.0f, -2.0f};
  std::vector<float> rp = p, rg = g, rm = m;
  ASSERT_TRUE(LionUpdate(KernelContext::Cpu(1), p.data(), g.data(), m.data(), 5, h).ok());
  RefLion(rp, rg, rm, h);
  ExpectBitwise(p, rp, "param");
  ExpectBitwise(m, rm, "exp_avg");
  // By hand, in exact arithmetic: p -= 0.1 * (sign(c) + 0.1 p).
  EXPECT_NEAR(p[0], 1 - 0.1 * 1.1, 1e-6);       // c = 0.05
  EXPECT_NEAR(p[1], -2 + 0.1 * (1 + 0.2), 1e-6);  // c = -0.225 - 0.1
  EXPECT_NEAR(p[2], 3 - 0.1 * 0.3, 1e-6);       // sign(0) = 0: decay alone
  EXPECT_EQ(p[3], 0.0f);
  EXPECT_NEAR(p[4], 0.5 - 0.1 * (-1 + 0.05), 1e-6);  // c = -1.8 + 0.1
  EXPECT_NEAR(m[0], 0.005, 1e-8);
  EXPECT_EQ(m[2], 0.0f);
  EXPECT_NEAR(m[4], 0.99 * -2 + 0.01, 1e-6);
}

TEST(Lion, ThreeStepsMatchScalarLoopBitwise) {
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 10007;
  std::vector<double> p0 = rng.Uniform(n, -1, 1);
  std::vector<float> p(p0.begin(), p0.end()), m(n, 0.0f), rp = p, rm = m;
  for (int step = 0; step < 3; ++step) {
    std::vector<double> g0 = rng.Uniform(n, -1, 1);
    std::vector<float> g(g0.begin(), g0.end());
    for (int64_t i = 0; i < n; i += 97) g[i] = 0.0f;  // some zero gradients
    const LionHyper h{1e-3f, 0.9f, 0.99f, 0.1f};
    ASSERT_TRUE(LionUpdate(KernelContext::Cpu(), p.data(), g.data(), m.data(), n, h).ok());
    RefLion(rp, g, rm, h);
  }
  ExpectBitwise(p, rp, "param");
  ExpectBitwise(m, rm, "exp_avg");
}

TEST(Lion, ThreadCountIndependent) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 100000;
  std::vector<double> p0 = rng.Uniform(n, -1, 1), g0 = rng.Uniform(n, -1, 1), m0 = rng.Uniform(n, -0.1, 0.1);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    std::vector<float> p(p0.begin(), p0.end()), g(g0.begin(), g0.end()), m(m0.begin(), m0.end());
    ASSERT_TRUE(LionUpdate(KernelContext::Cpu(threads), p.data(), g.data(), m.data(), n,
                           LionHyper{1e-4f, 0.9f, 0.99f, 0.01f})
                    .ok());
    p.insert(p.end(), m.begin(), m.end());
    results.push_back(p);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(LionErrors, NamesTheArgument) {
  float x = 0;
  absl::Status s = LionUpdate(KernelContext::Cpu(), &x, &x, nullptr, 1, LionHyper{1e-3f, 0.9f, 0.99f, 0.0f});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LionUpdate: exp_avg is null");
  s = LionUpdate(KernelContext::Cpu(), &x, &x, &x, -1, LionHyper{1e-3f, 0.9f, 0.99f, 0.0f});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(LionUpdate(KernelContext::Cpu(), nullptr, nullptr, nullptr, 0, LionHyper{}).ok());
}

}  // namespace
}  // namespace zeroshard::kernels
