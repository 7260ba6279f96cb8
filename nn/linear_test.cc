#include "nn/linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "nn/gelu.h"
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
  const uint32_t seed = testing::TestSeed();
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

// A null bias: y = x · W (a row-parallel layer adds its bias after the tp
// reduction).
TEST(LinearTest, ForwardWithoutBias) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 4, in = 5, out = 3;
  ComputeContext ctx;
  Linear linear("fc", in, out);
  auto x = testing::RandomFloats(rng, n * in, 1.0f), w = testing::RandomFloats(rng, in * out, 0.5f);
  auto y = testing::Poisoned(n * out);
  ASSERT_TRUE(linear.Forward(ctx, HostView(w, {in, out}), TensorView{}, HostView(x, {n, in}), HostView(y, {n, out})).ok());
  ExpectAllClose(y, RefLinear(testing::ToDouble(x), testing::ToDouble(w), std::vector<double>(out, 0.0), n, in, out),
                 1e-5, 1e-5, "y");
}

// ForwardGelu (the GPT-2 MLP's c_fc then GELU) is bitwise Forward then
// Gelu::Forward on the CPU, with and without a bias, and checks pre's shape.
TEST(LinearTest, ForwardGeluIsBitwiseForwardThenGelu) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const int64_t n = 4, in = 5, out = 8;
  ComputeContext ctx;
  Linear linear("fc", in, out);
  Gelu gelu;
  auto x = testing::RandomFloats(rng, n * in, 1.0f), w = testing::RandomFloats(rng, in * out, 0.5f);
  auto b = testing::RandomFloats(rng, out, 0.5f);
  for (bool with_bias : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "bias " << with_bias);
    const TensorView bias = with_bias ? HostView(b, {out}) : TensorView{};
    auto pre = testing::Poisoned(n * out), y = testing::Poisoned(n * out);
    ASSERT_TRUE(linear.ForwardGelu(ctx, HostView(w, {in, out}), bias, HostView(x, {n, in}), HostView(pre, {n, out}),
                                   HostView(y, {n, out}))
                    .ok());
    auto ref_pre = testing::Poisoned(n * out), ref_y = testing::Poisoned(n * out);
    ASSERT_TRUE(
        linear.Forward(ctx, HostView(w, {in, out}), bias, HostView(x, {n, in}), HostView(ref_pre, {n, out})).ok());
    ASSERT_TRUE(gelu.Forward(ctx, HostView(ref_pre, {n, out}), HostView(ref_y, {n, out})).ok());
    EXPECT_EQ(std::memcmp(pre.data(), ref_pre.data(), pre.size() * sizeof(float)), 0) << "pre";
    EXPECT_EQ(std::memcmp(y.data(), ref_y.data(), y.size() * sizeof(float)), 0) << "y";
  }
  auto small = testing::Poisoned(n * (out - 1)), y = testing::Poisoned(n * out);
  EXPECT_FALSE(linear.ForwardGelu(ctx, HostView(w, {in, out}), TensorView{}, HostView(x, {n, in}),
                                  HostView(small, {n, out - 1}), HostView(y, {n, out}))
                   .ok());
}

// ---------------------------------------------------------------------------
// Megatron's tensor-parallel linears on one process: rank r runs a Linear on
// its slice, and the tp reduction is summed on the host in rank order (as an
// all-reduce or reduce-scatter would). Against the unsplit layer: a result
// that is a reordered f32 sum of k terms is compared element by element
// within 2·γ_k·Σ|terms| (Higham, §3.1; γ_k = k·u/(1 − k·u), u = 2^−24): both
// results lie within γ_k·Σ|terms| of the exact sum, whatever order BLAS
// adds in. A column sum over the same rows (a bias gradient) is bitwise.

constexpr int64_t kRows = 5, kIn = 12, kOut = 6;  // in and out split over 2 and 3

double Gamma(int64_t k) {
  const double u = std::ldexp(1.0, -24);
  return k * u / (1 - k * u);
}

// Every |got − want| <= bound.
void ExpectWithin(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& bound,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(got.size(), bound.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= bound[i]) && ++failures <= 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", unsplit " << want[i] << " (error " << err
                    << ", bound " << bound[i] << ")";
    }
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << got.size() << " elements out of bounds";
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Columns [c0, c0 + w) of a row-major (rows, cols) matrix, and back.
std::vector<float> Columns(const std::vector<float>& m, int64_t rows, int64_t cols, int64_t c0, int64_t w) {
  std::vector<float> out(rows * w);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(m.begin() + r * cols + c0, w, out.begin() + r * w);
  return out;
}
void SetColumns(const std::vector<float>& part, int64_t rows, int64_t cols, int64_t c0, int64_t w,
                std::vector<float>* m) {
  for (int64_t r = 0; r < rows; ++r) std::copy_n(part.begin() + r * w, w, m->begin() + r * cols + c0);
}
// Rows [r0, r0 + h) of a row-major (rows, cols) matrix.
std::vector<float> Rows(const std::vector<float>& m, int64_t cols, int64_t r0, int64_t h) {
  return std::vector<float>(m.begin() + r0 * cols, m.begin() + (r0 + h) * cols);
}

// 2·γ_k·(|c_ij| + Σ_l |a_il·b_lj|) for C + A·B, A (m, k) and B (k, n)
// given as element accessors; c may be empty (no initial term).
std::vector<double> ProductBound(int64_t m, int64_t k, int64_t n, const std::function<double(int64_t, int64_t)>& a,
                                 const std::function<double(int64_t, int64_t)>& b, const std::vector<float>& c,
                                 int64_t extra_terms) {
  std::vector<double> bound(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = c.empty() ? 0.0 : std::fabs(c[i * n + j]);
      for (int64_t l = 0; l < k; ++l) s += std::fabs(a(i, l) * b(l, j));
      bound[i * n + j] = 2 * Gamma(k + extra_terms) * s;
    }
  }
  return bound;
}

struct LinearResult {
  std::vector<float> y, dx, dw, db;
};

// The unsplit layer: y = x·W + b; dx; dW and db accumulated onto dw0, db0.
LinearResult Unsplit(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                     const std::vector<float>& dy, const std::vector<float>& dw0, const std::vector<float>& db0) {
  ComputeContext ctx;
  Linear linear("fc", kIn, kOut);
  LinearResult r{testing::Poisoned(kRows * kOut), testing::Poisoned(kRows * kIn), dw0, db0};
  std::vector<float> xc = x, wc = w, bc = b, dyc = dy;
  EXPECT_TRUE(linear.Forward(ctx, HostView(wc, {kIn, kOut}), HostView(bc, {kOut}), HostView(xc, {kRows, kIn}),
                             HostView(r.y, {kRows, kOut}))
                  .ok());
  EXPECT_TRUE(linear.Backward(ctx, HostView(wc, {kIn, kOut}), HostView(xc, {kRows, kIn}), HostView(dyc, {kRows, kOut}),
                              HostView(r.dx, {kRows, kIn}), HostView(r.dw, {kIn, kOut}), HostView(r.db, {kOut}))
                  .ok());
  return r;
}

class ParallelLinearTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    x_ = testing::RandomFloats(rng_, kRows * kIn, 1.0f);
    w_ = testing::RandomFloats(rng_, kIn * kOut, 0.5f);
    b_ = testing::RandomFloats(rng_, kOut, 0.5f);
    dy_ = testing::RandomFloats(rng_, kRows * kOut, 1.0f);
    dw0_ = testing::RandomFloats(rng_, kIn * kOut, 1.0f);
    db0_ = testing::RandomFloats(rng_, kOut, 1.0f);
    ref_ = Unsplit(x_, w_, b_, dy_, dw0_, db0_);
  }

  int tp() const { return GetParam(); }

  const uint32_t seed_ = testing::TestSeed();
  const ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__, ::testing::Message() << "seed " << seed_};
  std::mt19937 rng_{seed_};
  std::vector<float> x_, w_, b_, dy_, dw0_, db0_;
  LinearResult ref_;
};

// Column-parallel (c_attn, c_fc): rank r holds columns [r·out/tp, (r+1)·out/tp)
// of W and b and sees the whole input. Its output and dW, db are those
// columns of the unsplit layer's; its dx is partial, summed over tp.
TEST_P(ParallelLinearTest, ColumnParallelMatchesUnsplit) {
  const int64_t w_cols = kOut / tp();
  ComputeContext ctx;
  Linear local("fc", kIn, w_cols);
  std::vector<float> y(kRows * kOut), dw(kIn * kOut), db(kOut), dx(kRows * kIn, 0.0f);
  for (int r = 0; r < tp(); ++r) {
    const int64_t c0 = r * w_cols;
    std::vector<float> x = x_, wr = Columns(w_, kIn, kOut, c0, w_cols), br(b_.begin() + c0, b_.begin() + c0 + w_cols);
    std::vector<float> dyr = Columns(dy_, kRows, kOut, c0, w_cols);
    std::vector<float> yr = testing::Poisoned(kRows * w_cols), dxr = testing::Poisoned(kRows * kIn);
    std::vector<float> dwr = Columns(dw0_, kIn, kOut, c0, w_cols), dbr(db0_.begin() + c0, db0_.begin() + c0 + w_cols);
    ASSERT_TRUE(local.Forward(ctx, HostView(wr, {kIn, w_cols}), HostView(br, {w_cols}), HostView(x, {kRows, kIn}),
                              HostView(yr, {kRows, w_cols}))
                    .ok());
    ASSERT_TRUE(local.Backward(ctx, HostView(wr, {kIn, w_cols}), HostView(x, {kRows, kIn}),
                               HostView(dyr, {kRows, w_cols}), HostView(dxr, {kRows, kIn}),
                               HostView(dwr, {kIn, w_cols}), HostView(dbr, {w_cols}))
                    .ok());
    SetColumns(yr, kRows, kOut, c0, w_cols, &y);
    SetColumns(dwr, kIn, kOut, c0, w_cols, &dw);
    std::copy(dbr.begin(), dbr.end(), db.begin() + c0);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += dxr[i];  // the all-reduce
  }
  auto x = [&](int64_t i, int64_t l) { return double{x_[i * kIn + l]}; };
  auto w = [&](int64_t l, int64_t j) { return double{w_[l * kOut + j]}; };
  auto wt = [&](int64_t j, int64_t l) { return double{w_[l * kOut + j]}; };
  auto dyv = [&](int64_t i, int64_t j) { return double{dy_[i * kOut + j]}; };
  auto xt = [&](int64_t l, int64_t i) { return double{x_[i * kIn + l]}; };
  std::vector<float> bias_rows(kRows * kOut);
  for (int64_t i = 0; i < kRows; ++i) std::copy(b_.begin(), b_.end(), bias_rows.begin() + i * kOut);
  ExpectWithin(y, ref_.y, ProductBound(kRows, kIn, kOut, x, w, bias_rows, 1), "y");
  ExpectWithin(dx, ref_.dx, ProductBound(kRows, kOut, kIn, dyv, wt, {}, tp()), "dx (summed over tp)");
  ExpectWithin(dw, ref_.dw, ProductBound(kIn, kRows, kOut, xt, dyv, dw0_, 1), "dweight");
  EXPECT_TRUE(SameBits(db, ref_.db)) << "dbias";
}

// Row-parallel (attn.c_proj, mlp.c_proj): rank r holds rows
// [r·in/tp, (r+1)·in/tp) of W and the matching columns of the input; the
// partial products are summed over tp and the replicated bias added once.
// Backward from the replicated dy: dx is those columns and dW those rows of
// the unsplit layer's; every rank's db is the whole, unsplit one.
TEST_P(ParallelLinearTest, RowParallelMatchesUnsplit) {
  const int64_t w_rows = kIn / tp();
  ComputeContext ctx;
  Linear local("fc", w_rows, kOut);
  std::vector<float> y(kRows * kOut, 0.0f), dx(kRows * kIn), dw(kIn * kOut);
  for (int r = 0; r < tp(); ++r) {
    const int64_t r0 = r * w_rows;
    std::vector<float> xr = Columns(x_, kRows, kIn, r0, w_rows), wr = Rows(w_, kOut, r0, w_rows), dy = dy_;
    std::vector<float> yr = testing::Poisoned(kRows * kOut), dxr = testing::Poisoned(kRows * w_rows);
    std::vector<float> dwr = Rows(dw0_, kOut, r0, w_rows), dbr = db0_;
    ASSERT_TRUE(local.Forward(ctx, HostView(wr, {w_rows, kOut}), TensorView{}, HostView(xr, {kRows, w_rows}),
                              HostView(yr, {kRows, kOut}))
                    .ok());
    ASSERT_TRUE(local.Backward(ctx, HostView(wr, {w_rows, kOut}), HostView(xr, {kRows, w_rows}),
                               HostView(dy, {kRows, kOut}), HostView(dxr, {kRows, w_rows}),
                               HostView(dwr, {w_rows, kOut}), HostView(dbr, {kOut}))
                    .ok());
    for (size_t i = 0; i < y.size(); ++i) y[i] += yr[i];  // the all-reduce
    SetColumns(dxr, kRows, kIn, r0, w_rows, &dx);
    std::copy(dwr.begin(), dwr.end(), dw.begin() + r0 * kOut);
    EXPECT_TRUE(SameBits(dbr, ref_.db)) << "rank " << r << " dbias";
  }
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kOut; ++j) y[i * kOut + j] += b_[j];  // the bias, once
  }
  auto x = [&](int64_t i, int64_t l) { return double{x_[i * kIn + l]}; };
  auto w = [&](int64_t l, int64_t j) { return double{w_[l * kOut + j]}; };
  auto wt = [&](int64_t j, int64_t l) { return double{w_[l * kOut + j]}; };
  auto dyv = [&](int64_t i, int64_t j) { return double{dy_[i * kOut + j]}; };
  auto xt = [&](int64_t l, int64_t i) { return double{x_[i * kIn + l]}; };
  std::vector<float> bias_rows(kRows * kOut);
  for (int64_t i = 0; i < kRows; ++i) std::copy(b_.begin(), b_.end(), bias_rows.begin() + i * kOut);
  ExpectWithin(y, ref_.y, ProductBound(kRows, kIn, kOut, x, w, bias_rows, tp() + 1), "y (summed over tp, + bias)");
  ExpectWithin(dx, ref_.dx, ProductBound(kRows, kOut, kIn, dyv, wt, {}, 0), "dx");
  ExpectWithin(dw, ref_.dw, ProductBound(kIn, kRows, kOut, xt, dyv, dw0_, 1), "dweight");
}

INSTANTIATE_TEST_SUITE_P(Tp, ParallelLinearTest, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return "tp" + std::to_string(info.param); });

// Null outputs are skipped (the split backward's B and W halves): the parts
// computed are bitwise the full call's; an input only a skipped part reads
// may be an empty view.
TEST(LinearTest, NullOutputsAreSkippedAndThePartsAreBitwiseTheFullCall) {
  const uint32_t seed = testing::TestSeed();
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
