#include "nn/cross_entropy.h"

#include <cmath>

#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

using testing::ExpectAllClose;
using testing::HostView;

double RefMeanLoss(const std::vector<double>& logits, const std::vector<int32_t>& targets, int64_t n, int64_t v,
                   std::vector<double>* losses = nullptr) {
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    double mx = -1e300;
    for (int64_t i = 0; i < v; ++i) mx = std::max(mx, logits[r * v + i]);
    double z = 0;
    for (int64_t i = 0; i < v; ++i) z += std::exp(logits[r * v + i] - mx);
    const double loss = std::log(z) + mx - logits[r * v + targets[r]];
    if (losses) losses->push_back(loss);
    total += loss;
  }
  return total / n;
}

TEST(CrossEntropyTest, ForwardAndBackwardMatchF64ReferenceAndFiniteDifferences) {
  const uint32_t seed = testing::FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 6, v = 11;
  ComputeContext ctx;
  CrossEntropy ce(v);
  auto logits = testing::RandomFloats(rng, n * v, 2.0f);
  std::vector<int32_t> targets(n);
  for (auto& t : targets) t = static_cast<int32_t>(rng() % v);
  auto losses = testing::Poisoned(n), lse = testing::Poisoned(n), mean = testing::Poisoned(1);
  ASSERT_TRUE(ce.Forward(ctx, HostView(logits, {n, v}), HostView(targets, {n}), HostView(losses, {n}),
                         HostView(lse, {n}), HostView(mean, {1})).ok());
  const auto ld = testing::ToDouble(logits);
  std::vector<double> ref_losses;
  const double ref_mean = RefMeanLoss(ld, targets, n, v, &ref_losses);
  ExpectAllClose(losses, ref_losses, 1e-6, 1e-6, "losses");
  ExpectAllClose(mean, {ref_mean}, 1e-6, 1e-6, "mean loss");

  const float dmean = 0.7f;
  auto dlogits = testing::Poisoned(n * v);
  ASSERT_TRUE(ce.Backward(ctx, HostView(logits, {n, v}), HostView(lse, {n}), HostView(targets, {n}), dmean,
                          HostView(dlogits, {n, v})).ok());
  ExpectAllClose(dlogits, testing::NumericalGradient([&](const auto& x) { return dmean * RefMeanLoss(x, targets, n, v); }, ld),
                 1e-7, 1e-4, "dlogits");
}

TEST(CrossEntropyTest, TargetsMustBeI32Rows) {
  ComputeContext ctx;
  CrossEntropy ce(5);
  std::vector<float> logits(10), losses(2), lse(2), mean(1), targets(2);
  absl::Status s = ce.Forward(ctx, HostView(logits, {2, 5}), HostView(targets, {2}), HostView(losses, {2}),
                              HostView(lse, {2}), HostView(mean, {1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "targets: got f32[2] on cpu, expected i32[2] on cpu");
}

}  // namespace
}  // namespace zeroshard
