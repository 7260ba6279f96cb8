#include "kernels/optimizer.h"

#include <cmath>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;

// PyTorch's AdamW (single-tensor path) in f64.
void RefAdamW(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m, std::vector<double>& v,
              const AdamWHyper& h) {
  const double bc1 = 1 - std::pow(static_cast<double>(h.beta1), h.step);
  const double bc2 = 1 - std::pow(static_cast<double>(h.beta2), h.step);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1 - static_cast<double>(h.lr) * h.weight_decay;
    m[i] = h.beta1 * m[i] + (1 - static_cast<double>(h.beta1)) * g[i];
    v[i] = h.beta2 * v[i] + (1 - static_cast<double>(h.beta2)) * g[i] * g[i];
    p[i] -= h.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + h.eps);
  }
}

TEST(AdamW, FirstStepByHand) {
  // m = 0.05, v = 0.00025; m_hat = 0.5, sqrt(v_hat) = 0.5, so the step is lr
  // (up to eps) after decaying p by lr * wd: 1 * (1 - 0.001) - 0.1.
  float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
  AdamWHyper h{0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  ASSERT_TRUE(AdamWUpdate(KernelContext::Cpu(), &p, &g, &m, &v, 1, h).ok());
  EXPECT_NEAR(p, 0.899, 1e-6);
  EXPECT_NEAR(m, 0.05, 1e-8);
  EXPECT_NEAR(v, 0.00025, 1e-10);
}

TEST(AdamW, FiveStepsMatchF64PyTorchSemantics) {
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 20011;
  std::vector<double> p = rng.Uniform(n, -1, 1), m(n, 0.0), v(n, 0.0);
  std::vector<float> pf(p.begin(), p.end()), mf(n, 0.0f), vf(n, 0.0f);
  for (int64_t step = 1; step <= 5; ++step) {
    std::vector<double> g = rng.Uniform(n, -2, 2);
    std::vector<float> gf(g.begin(), g.end());
    for (int64_t i = 0; i < n; ++i) g[i] = gf[i];
    AdamWHyper h{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step};
    ASSERT_TRUE(AdamWUpdate(KernelContext::Cpu(), pf.data(), gf.data(), mf.data(), vf.data(), n, h).ok());
    RefAdamW(p, g, m, v, h);
  }
  ExpectAllClose(std::vector<double>(pf.begin(), pf.end()), p, 1e-6, 1e-5, "param");
  ExpectAllClose(std::vector<double>(mf.begin(), mf.end()), m, 1e-6, 1e-5, "exp_avg");
  ExpectAllClose(std::vector<double>(vf.begin(), vf.end()), v, 1e-7, 1e-5, "exp_avg_sq");
}

TEST(AdamW, ThreadCountIndependent) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 100000;
  std::vector<double> p0 = rng.Uniform(n, -1, 1), g0 = rng.Uniform(n, -1, 1);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    std::vector<float> p(p0.begin(), p0.end()), g(g0.begin(), g0.end()), m(n, 0.1f), v(n, 0.2f);
    ASSERT_TRUE(AdamWUpdate(KernelContext::Cpu(threads), p.data(), g.data(), m.data(), v.data(), n,
                            AdamWHyper{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 3})
                    .ok());
    results.push_back(p);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(AdamWErrors, StepIsOneBased) {
  float x = 0;
  absl::Status s = AdamWUpdate(KernelContext::Cpu(), &x, &x, &x, &x, 1, AdamWHyper{1, 0.9f, 0.9f, 1e-8f, 0, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "AdamWUpdate: step = 0, expected >= 1 (1-based)");
  s = AdamWUpdate(KernelContext::Cpu(), &x, nullptr, &x, &x, 1, AdamWHyper{1, 0.9f, 0.9f, 1e-8f, 0, 1});
  EXPECT_EQ(s.message(), "AdamWUpdate: grad is null");
}

// torch.optim.SGD in f64.
void RefSgd(std::vector<double>& p, const std::vector<double>& g_in, std::vector<double>& buf, const SgdHyper& h) {
  for (size_t i = 0; i < p.size(); ++i) {
    double g = g_in[i] + static_cast<double>(h.weight_decay) * p[i];
    if (h.momentum != 0) {
      buf[i] = h.first_step ? g : h.momentum * buf[i] + (1 - static_cast<double>(h.dampening)) * g;
      g = h.nesterov ? g + h.momentum * buf[i] : buf[i];
    }
    p[i] -= h.lr * g;
  }
}

struct SgdCase {
  float momentum, dampening, weight_decay;
  bool nesterov;
};

class SgdTest : public ::testing::TestWithParam<SgdCase> {};

TEST_P(SgdTest, ThreeStepsMatchF64) {
  const SgdCase c = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 5003;
  std::vector<double> p = rng.Uniform(n, -1, 1), buf(n, 0.0);
  std::vector<float> pf(p.begin(), p.end()), buff(n, NAN);  // NaN: the first step must not read it
  for (int step = 0; step < 3; ++step) {
    std::vector<double> g = rng.Uniform(n, -1, 1);
    std::vector<float> gf(g.begin(), g.end());
    for (int64_t i = 0; i < n; ++i) g[i] = gf[i];
    SgdHyper h{0.05f, c.momentum, c.dampening, c.weight_decay, c.nesterov, step == 0};
    ASSERT_TRUE(
        SgdUpdate(KernelContext::Cpu(), pf.data(), gf.data(), c.momentum != 0 ? buff.data() : nullptr, n, h).ok());
    RefSgd(p, g, buf, h);
  }
  ExpectAllClose(std::vector<double>(pf.begin(), pf.end()), p, 1e-6, 1e-6, "param");
  if (c.momentum != 0) ExpectAllClose(std::vector<double>(buff.begin(), buff.end()), buf, 1e-6, 1e-6, "momentum_buf");
}

INSTANTIATE_TEST_SUITE_P(Variants, SgdTest,
                         ::testing::Values(SgdCase{0.0f, 0.0f, 0.0f, false}, SgdCase{0.0f, 0.0f, 0.01f, false},
                                           SgdCase{0.9f, 0.0f, 0.0f, false}, SgdCase{0.9f, 0.1f, 0.01f, false},
                                           SgdCase{0.9f, 0.0f, 0.01f, true}));

TEST(SgdErrors, NesterovNeedsMomentumWithoutDampening) {
  float x = 0;
  absl::Status s = SgdUpdate(KernelContext::Cpu(), &x, &x, &x, 1, SgdHyper{0.1f, 0.9f, 0.1f, 0.0f, true, false});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "SgdUpdate: nesterov needs momentum > 0 and dampening == 0, got momentum = 0.9, dampening = 0.1");
  s = SgdUpdate(KernelContext::Cpu(), &x, &x, nullptr, 1, SgdHyper{0.1f, 0.9f, 0.0f, 0.0f, false, false});
  EXPECT_EQ(s.message(), "SgdUpdate (momentum != 0): momentum_buf is null");
}

}  // namespace
}  // namespace zeroshard::kernels
