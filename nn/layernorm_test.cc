#include "nn/layernorm.h"

#include <cmath>
#include <cstring>

#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

using testing::ExpectAllClose;
using testing::HostView;

std::vector<double> RefLayerNorm(const std::vector<double>& x, const std::vector<double>& w,
                                 const std::vector<double>& b, int64_t n, int64_t c, double eps) {
  std::vector<double> y(n * c);
  for (int64_t r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < c; ++i) mean += x[r * c + i];
    mean /= c;
    for (int64_t i = 0; i < c; ++i) var += (x[r * c + i] - mean) * (x[r * c + i] - mean);
    var /= c;
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < c; ++i) y[r * c + i] = (x[r * c + i] - mean) * rstd * w[i] + b[i];
  }
  return y;
}

double Dot(const std::vector<double>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(LayerNormTest, ForwardAndBackwardMatchF64ReferenceAndFiniteDifferences) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 4, c = 8;
  const double eps = 1e-5;
  ComputeContext ctx;
  LayerNorm ln("ln_1", c, static_cast<float>(eps));
  auto x = testing::RandomFloats(rng, n * c, 1.0f, 0.5f);
  auto w = testing::RandomFloats(rng, c, 0.5f, 1.0f);
  auto b = testing::RandomFloats(rng, c, 0.5f);
  auto y = testing::Poisoned(n * c), mean = testing::Poisoned(n), rstd = testing::Poisoned(n);
  ASSERT_TRUE(ln.Forward(ctx, HostView(w, {c}), HostView(b, {c}), HostView(x, {n, c}), HostView(y, {n, c}),
                         HostView(mean, {n}), HostView(rstd, {n})).ok());
  const auto xd = testing::ToDouble(x), wd = testing::ToDouble(w), bd = testing::ToDouble(b);
  ExpectAllClose(y, RefLayerNorm(xd, wd, bd, n, c, eps), 1e-5, 1e-5, "y");

  auto dy = testing::RandomFloats(rng, n * c, 1.0f);
  auto dx = testing::Poisoned(n * c);
  auto dw0 = testing::RandomFloats(rng, c, 1.0f), dw = dw0;
  auto db0 = testing::RandomFloats(rng, c, 1.0f), db = db0;
  ASSERT_TRUE(ln.Backward(ctx, HostView(w, {c}), HostView(x, {n, c}), HostView(mean, {n}), HostView(rstd, {n}),
                          HostView(dy, {n, c}), HostView(dx, {n, c}), HostView(dw, {c}), HostView(db, {c})).ok());
  for (int64_t i = 0; i < c; ++i) dw[i] -= dw0[i], db[i] -= db0[i];
  ExpectAllClose(dx, testing::NumericalGradient([&](const auto& v) { return Dot(RefLayerNorm(v, wd, bd, n, c, eps), dy); }, xd), 1e-5, 1e-4, "dx");
  ExpectAllClose(dw, testing::NumericalGradient([&](const auto& v) { return Dot(RefLayerNorm(xd, v, bd, n, c, eps), dy); }, wd), 1e-5, 1e-4, "dweight");
  ExpectAllClose(db, testing::NumericalGradient([&](const auto& v) { return Dot(RefLayerNorm(xd, wd, v, n, c, eps), dy); }, bd), 1e-5, 1e-4, "dbias");
}

// dx.data null: the parameter gradients only (weight may be an empty view);
// dweight.data and dbias.data null: the input gradient only. Both bitwise
// the full call's.
TEST(LayerNormTest, NullOutputsAreSkippedAndThePartsAreBitwiseTheFullCall) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 4, c = 8;
  ComputeContext ctx;
  LayerNorm ln("ln_1", c, 1e-5f);
  auto x = testing::RandomFloats(rng, n * c, 1.0f, 0.5f), w = testing::RandomFloats(rng, c, 0.5f, 1.0f);
  auto b = testing::RandomFloats(rng, c, 0.5f);
  auto y = testing::Poisoned(n * c), mean = testing::Poisoned(n), rstd = testing::Poisoned(n);
  ASSERT_TRUE(ln.Forward(ctx, HostView(w, {c}), HostView(b, {c}), HostView(x, {n, c}), HostView(y, {n, c}),
                         HostView(mean, {n}), HostView(rstd, {n}))
                  .ok());
  auto dy = testing::RandomFloats(rng, n * c, 1.0f);
  auto dw0 = testing::RandomFloats(rng, c, 1.0f), db0 = testing::RandomFloats(rng, c, 1.0f);
  auto full_dx = testing::Poisoned(n * c), full_dw = dw0, full_db = db0;
  ASSERT_TRUE(ln.Backward(ctx, HostView(w, {c}), HostView(x, {n, c}), HostView(mean, {n}), HostView(rstd, {n}),
                          HostView(dy, {n, c}), HostView(full_dx, {n, c}), HostView(full_dw, {c}),
                          HostView(full_db, {c}))
                  .ok());
  auto dx = testing::Poisoned(n * c), dw = dw0, db = db0;
  ASSERT_TRUE(ln.Backward(ctx, HostView(w, {c}), HostView(x, {n, c}), HostView(mean, {n}), HostView(rstd, {n}),
                          HostView(dy, {n, c}), HostView(dx, {n, c}), TensorView{}, TensorView{})
                  .ok());
  ASSERT_TRUE(ln.Backward(ctx, TensorView{}, HostView(x, {n, c}), HostView(mean, {n}), HostView(rstd, {n}),
                          HostView(dy, {n, c}), TensorView{}, HostView(dw, {c}), HostView(db, {c}))
                  .ok());
  EXPECT_EQ(std::memcmp(dx.data(), full_dx.data(), dx.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(dw.data(), full_dw.data(), dw.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(db.data(), full_db.data(), db.size() * sizeof(float)), 0);
}

TEST(LayerNormTest, StatsMustBeF32) {
  ComputeContext ctx;
  LayerNorm ln("ln_f", 4, 1e-5f);
  std::vector<float> x(8), w(4), b(4), y(8), rstd(2);
  std::vector<int32_t> mean(2);
  absl::Status s = ln.Forward(ctx, HostView(w, {4}), HostView(b, {4}), HostView(x, {2, 4}), HostView(y, {2, 4}),
                              HostView(mean, {2}), HostView(rstd, {2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "ln_f mean: got i32[2] on cpu, expected f32[2] on cpu");
}

}  // namespace
}  // namespace zeroshard
