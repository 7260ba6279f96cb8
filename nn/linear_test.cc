#include "nn/linear.h"

#include <cstring>

#include "nn/testing/grad_check.h"

namespace zeroshard {
namespace {

using testing::ExpectAllClose;
using testing::HostView;

// f64 reference: y = x · W + b, W stored [in, out].
std::vector<double> RefLinear(const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>& b, int64_t n, int64_t in, int64_t out) {
  std::vector<double> y(n * out);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[o];
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * w[i * out + o];
      y[r * out + o] = acc;
    }
  return y;
}

double Dot(const std::vector<double>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(LinearTest, ForwardAndBackwardMatchF64ReferenceAndFiniteDifferences) {
  const uint32_t seed = testing::FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 5, in = 7, out = 6;
  ComputeContext ctx;
  Linear linear("fc", in, out);
  auto x = testing::RandomFloats(rng, n * in, 1.0f);
  auto w = testing::RandomFloats(rng, in * out, 0.5f);
  auto b = testing::RandomFloats(rng, out, 0.5f);
  auto y = testing::Poisoned(n * out);
  ASSERT_TRUE(linear.Forward(ctx, HostView(w, {in, out}), HostView(b, {out}), HostView(x, {n, in}), HostView(y, {n, out})).ok());
  ExpectAllClose(y, RefLinear(testing::ToDouble(x), testing::ToDouble(w), testing::ToDouble(b), n, in, out), 1e-5, 1e-5, "y");

  // Objective L = sum(dy * y); gradients accumulate onto random initial values.
  auto dy = testing::RandomFloats(rng, n * out, 1.0f);
  auto dx = testing::Poisoned(n * in);
  auto dw0 = testing::RandomFloats(rng, in * out, 1.0f), dw = dw0;
  auto db0 = testing::RandomFloats(rng, out, 1.0f), db = db0;
  ASSERT_TRUE(linear.Backward(ctx, HostView(w, {in, out}), HostView(x, {n, in}), HostView(dy, {n, out}),
                              HostView(dx, {n, in}), HostView(dw, {in, out}), HostView(db, {out})).ok());
  for (size_t i = 0; i < dw.size(); ++i) dw[i] -= dw0[i];
  for (size_t i = 0; i < db.size(); ++i) db[i] -= db0[i];
  const auto xd = testing::ToDouble(x), wd = testing::ToDouble(w), bd = testing::ToDouble(b);
  ExpectAllClose(dx, testing::NumericalGradient([&](const auto& v) { return Dot(RefLinear(v, wd, bd, n, in, out), dy); }, xd), 1e-5, 1e-4, "dx");
  ExpectAllClose(dw, testing::NumericalGradient([&](const auto& v) { return Dot(RefLinear(xd, v, bd, n, in, out), dy); }, wd), 1e-5, 1e-4, "dweight");
  ExpectAllClose(db, testing::NumericalGradient([&](const auto& v) { return Dot(RefLinear(xd, wd, v, n, in, out), dy); }, bd), 1e-5, 1e-4, "dbias");
}

// Null outputs are skipped (the split backward's B and W halves): the parts
// computed are bitwise the full call's; an input only a skipped part reads
// may be an empty view.
TEST(LinearTest, NullOutputsAreSkippedAndThePartsAreBitwiseTheFullCall) {
  const uint32_t seed = testing::FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 5, in = 7, out = 6;
  ComputeContext ctx;
  Linear linear("fc", in, out);
  auto x = testing::RandomFloats(rng, n * in, 1.0f), w = testing::RandomFloats(rng, in * out, 0.5f);
  auto dy = testing::RandomFloats(rng, n * out, 1.0f);
  auto dw0 = testing::RandomFloats(rng, in * out, 1.0f), db0 = testing::RandomFloats(rng, out, 1.0f);
  auto full_dx = testing::Poisoned(n * in), full_dw = dw0, full_db = db0;
  ASSERT_TRUE(linear.Backward(ctx, HostView(w, {in, out}), HostView(x, {n, in}), HostView(dy, {n, out}),
                              HostView(full_dx, {n, in}), HostView(full_dw, {in, out}), HostView(full_db, {out}))
                  .ok());
  auto dx = testing::Poisoned(n * in), dw = dw0, db = db0;
  ASSERT_TRUE(linear.Backward(ctx, HostView(w, {in, out}), TensorView{}, HostView(dy, {n, out}), HostView(dx, {n, in}),
                              TensorView{}, TensorView{})
                  .ok());
  ASSERT_TRUE(linear.Backward(ctx, TensorView{}, HostView(x, {n, in}), HostView(dy, {n, out}), TensorView{},
                              HostView(dw, {in, out}), HostView(db, {out}))
                  .ok());
  EXPECT_EQ(std::memcmp(dx.data(), full_dx.data(), dx.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(dw.data(), full_dw.data(), dw.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(db.data(), full_db.data(), db.size() * sizeof(float)), 0);
}

TEST(LinearTest, WrongWeightShapeNamesTheTensor) {
  ComputeContext ctx;
  Linear linear("h.0.attn.c_attn", 4, 12);
  std::vector<float> x(8), w(4 * 8), b(12), y(2 * 12);
  absl::Status s = linear.Forward(ctx, HostView(w, {4, 8}), HostView(b, {12}), HostView(x, {2, 4}), HostView(y, {2, 12}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "h.0.attn.c_attn.weight: got f32[4, 8] on cpu, expected f32[4, 12] on cpu");
}

}  // namespace
}  // namespace zeroshard
