#include "nn/gelu.h"

#include <cmath>

#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

using testing::ExpectAllClose;
using testing::HostView;

double RefGelu(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

TEST(GeluTest, ForwardAndBackwardMatchF64ReferenceAndFiniteDifferences) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 64;
  ComputeContext ctx;
  Gelu gelu;
  auto x = testing::RandomFloats(rng, n, 2.0f);
  auto y = testing::Poisoned(n);
  ASSERT_TRUE(gelu.Forward(ctx, HostView(x, {8, 8}), HostView(y, {8, 8})).ok());
  std::vector<double> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = RefGelu(x[i]);
  ExpectAllClose(y, ref, 1e-6, 1e-5, "y");

  auto dy = testing::RandomFloats(rng, n, 1.0f);
  auto dx = testing::Poisoned(n);
  ASSERT_TRUE(gelu.Backward(ctx, HostView(x, {8, 8}), HostView(dy, {8, 8}), HostView(dx, {8, 8})).ok());
  ExpectAllClose(dx, testing::NumericalGradient([&](const std::vector<double>& v) {
                   double s = 0;
                   for (int64_t i = 0; i < n; ++i) s += RefGelu(v[i]) * dy[i];
                   return s;
                 }, testing::ToDouble(x)), 1e-6, 1e-4, "dx");
}

TEST(GeluTest, OutputShapeMustMatchInput) {
  ComputeContext ctx;
  std::vector<float> x(8), y(8);
  absl::Status s = Gelu().Forward(ctx, HostView(x, {2, 4}), HostView(y, {4, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "gelu output: got f32[4, 2] on cpu, expected f32[2, 4] on cpu");
}

}  // namespace
}  // namespace zeroshard
