#include "nn/cross_entropy.h"

#include <cmath>

#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

using testing::ExpectAllClose;
using testing::HostView;

// Sum of the losses of the rows with a target (>= 0), in f64.
double RefLossSum(const std::vector<double>& logits, const std::vector<int32_t>& targets, int64_t n, int64_t v,
                  std::vector<double>* losses = nullptr) {
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (targets[r] < 0) {
      if (losses) losses->push_back(0.0);
      continue;
    }
    double mx = -1e300;
    for (int64_t i = 0; i < v; ++i) mx = std::max(mx, logits[r * v + i]);
    double z = 0;
    for (int64_t i = 0; i < v; ++i) z += std::exp(logits[r * v + i] - mx);
    const double loss = std::log(z) + mx - logits[r * v + targets[r]];
    if (losses) losses->push_back(loss);
    total += loss;
  }
  return total;
}

TEST(CrossEntropyTest, ForwardAndBackwardMatchF64ReferenceAndFiniteDifferences) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 6, v = 11;
  ComputeContext ctx;
  CrossEntropy ce(v);
  auto logits = testing::RandomFloats(rng, n * v, 2.0f);
  std::vector<int32_t> targets(n);
  for (auto& t : targets) t = static_cast<int32_t>(rng() % v);
  targets[2] = -100;  // ignored
  auto losses = testing::Poisoned(n), lse = testing::Poisoned(n), sums = testing::Poisoned(2);
  ASSERT_TRUE(ce.Forward(ctx, HostView(logits, {n, v}), HostView(targets, {n}), HostView(losses, {n}),
                         HostView(lse, {n}), HostView(sums, {2})).ok());
  const auto ld = testing::ToDouble(logits);
  std::vector<double> ref_losses;
  const double ref_sum = RefLossSum(ld, targets, n, v, &ref_losses);
  ExpectAllClose(losses, ref_losses, 1e-6, 1e-6, "losses");
  ExpectAllClose({sums[0]}, {ref_sum}, 1e-6, 1e-6, "loss sum");
  EXPECT_EQ(sums[1], 5.0f);

  const float dloss = 0.7f;  // gradient per valid row's loss
  auto dlogits = testing::Poisoned(n * v);
  ASSERT_TRUE(ce.Backward(ctx, HostView(logits, {n, v}), HostView(lse, {n}), HostView(targets, {n}), dloss,
                          HostView(dlogits, {n, v})).ok());
  for (int64_t i = 0; i < v; ++i) EXPECT_EQ(dlogits[2 * v + i], 0.0f) << "ignored row, logit " << i;
  const auto objective = [&](const auto& x) { return dloss * RefLossSum(x, targets, n, v); };
  ExpectAllClose(dlogits, testing::NumericalGradient(objective, ld), 1e-7, 1e-4, "dlogits");
}

TEST(CrossEntropyTest, LossSumsMustHoldTwoFloats) {
  ComputeContext ctx;
  CrossEntropy ce(5);
  std::vector<float> logits(10), losses(2), lse(2), mean(1);
  std::vector<int32_t> targets = {0, 1};
  absl::Status s = ce.Forward(ctx, HostView(logits, {2, 5}), HostView(targets, {2}), HostView(losses, {2}),
                              HostView(lse, {2}), HostView(mean, {1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "loss sums: got f32[1] on cpu, expected f32[2] on cpu");
}

TEST(CrossEntropyTest, TargetsMustBeI32Rows) {
  ComputeContext ctx;
  CrossEntropy ce(5);
  std::vector<float> logits(10), losses(2), lse(2), sums(2), targets(2);
  absl::Status s = ce.Forward(ctx, HostView(logits, {2, 5}), HostView(targets, {2}), HostView(losses, {2}),
                              HostView(lse, {2}), HostView(sums, {2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "targets: got f32[2] on cpu, expected i32[2] on cpu");
}

}  // namespace
}  // namespace zeroshard
