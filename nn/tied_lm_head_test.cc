#include "nn/tied_lm_head.h"

#include <cstring>

#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

using testing::ExpectAllClose;
using testing::HostView;

std::vector<double> RefLogits(const std::vector<double>& x, const std::vector<double>& wte, int64_t n, int64_t c,
                              int64_t v) {
  std::vector<double> l(n * v, 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < v; ++j)
      for (int64_t k = 0; k < c; ++k) l[r * v + j] += x[r * c + k] * wte[j * c + k];
  return l;
}

TEST(TiedLmHeadTest, ForwardAndBackwardMatchF64ReferenceAndFiniteDifferences) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 4, c = 6, v = 9;
  ComputeContext ctx;
  TiedLmHead head(v, c);
  auto x = testing::RandomFloats(rng, n * c, 1.0f), wte = testing::RandomFloats(rng, v * c, 1.0f);
  auto logits = testing::Poisoned(n * v);
  ASSERT_TRUE(head.Forward(ctx, HostView(wte, {v, c}), HostView(x, {n, c}), HostView(logits, {n, v})).ok());
  const auto xd = testing::ToDouble(x), wd = testing::ToDouble(wte);
  ExpectAllClose(logits, RefLogits(xd, wd, n, c, v), 1e-5, 1e-5, "logits");

  auto dlogits = testing::RandomFloats(rng, n * v, 1.0f);
  auto dx = testing::Poisoned(n * c);
  auto dwte0 = testing::RandomFloats(rng, v * c, 1.0f), dwte = dwte0;
  ASSERT_TRUE(head.Backward(ctx, HostView(wte, {v, c}), HostView(x, {n, c}), HostView(dlogits, {n, v}),
                            HostView(dx, {n, c}), HostView(dwte, {v, c})).ok());
  for (size_t i = 0; i < dwte.size(); ++i) dwte[i] -= dwte0[i];
  auto objective = [&](const std::vector<double>& xx, const std::vector<double>& ww) {
    const auto l = RefLogits(xx, ww, n, c, v);
    double s = 0;
    for (size_t i = 0; i < l.size(); ++i) s += l[i] * dlogits[i];
    return s;
  };
  ExpectAllClose(dx, testing::NumericalGradient([&](const auto& a) { return objective(a, wd); }, xd), 1e-5, 1e-4, "dx");
  ExpectAllClose(dwte, testing::NumericalGradient([&](const auto& a) { return objective(xd, a); }, wd), 1e-5, 1e-4, "dwte");
}

// A null dx or dwte skips that GEMM: the other output is bitwise the full
// call's, and the input only the skipped part reads is not needed.
TEST(TiedLmHeadTest, NullOutputIsSkippedAndTheOtherIsBitwiseTheFullCall) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 5, c = 8, v = 11;
  ComputeContext ctx;
  TiedLmHead head(v, c);
  auto x = testing::RandomFloats(rng, n * c, 1.0f), wte = testing::RandomFloats(rng, v * c, 1.0f);
  auto dlogits = testing::RandomFloats(rng, n * v, 1.0f), dwte0 = testing::RandomFloats(rng, v * c, 1.0f);
  auto full_dx = testing::Poisoned(n * c), full_dwte = dwte0;
  ASSERT_TRUE(head.Backward(ctx, HostView(wte, {v, c}), HostView(x, {n, c}), HostView(dlogits, {n, v}),
                            HostView(full_dx, {n, c}), HostView(full_dwte, {v, c}))
                  .ok());
  auto dx = testing::Poisoned(n * c), dwte = dwte0;
  ASSERT_TRUE(head.Backward(ctx, HostView(wte, {v, c}), TensorView{}, HostView(dlogits, {n, v}), HostView(dx, {n, c}),
                            TensorView{})
                  .ok());
  EXPECT_EQ(std::memcmp(dx.data(), full_dx.data(), dx.size() * sizeof(float)), 0);
  ASSERT_TRUE(head.Backward(ctx, TensorView{}, HostView(x, {n, c}), HostView(dlogits, {n, v}), TensorView{},
                            HostView(dwte, {v, c}))
                  .ok());
  EXPECT_EQ(std::memcmp(dwte.data(), full_dwte.data(), dwte.size() * sizeof(float)), 0);
  absl::Status s = head.Backward(ctx, HostView(wte, {v, c}), HostView(x, {n, c}), HostView(dlogits, {n, v}),
                                 TensorView{}, TensorView{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "lm head backward: nothing to compute (input grad and wte.weight grad are null)");
}

}  // namespace
}  // namespace zeroshard
