#include "kernels/linear.h"

#include "gtest/gtest.h"
#include "kernels/bias.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/gelu.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

// f64 reference: y = x·W + b, x (N,C), W (C,OC).
std::vector<double> RefLinear(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                              int64_t n, int64_t c, int64_t oc) {
  std::vector<double> y(n * oc);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < oc; ++j) {
      double s = b.empty() ? 0.0 : b[j];
      for (int64_t i = 0; i < c; ++i) s += x[r * c + i] * w[i * oc + j];
      y[r * oc + j] = s;
    }
  }
  return y;
}

class LinearTest : public ::testing::TestWithParam<DType> {};

TEST_P(LinearTest, ForwardMatchesF64) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 7, c = 12, oc = 10;
  HostTensor x = HostTensor::From(dtype, rng.Uniform(n * c, -1, 1));
  HostTensor w = HostTensor::From(dtype, rng.Uniform(c * oc, -1, 1));
  HostTensor b = HostTensor::From(dtype, rng.Uniform(oc, -1, 1));
  HostTensor y = HostTensor::Poisoned(dtype, n * oc);
  ASSERT_TRUE(LinearForward(KernelContext::Cpu(), y.data(), x.data(), w.data(), b.data(), n, c, oc, dtype).ok());
  // One rounding to dtype of an f32 sum of 13 terms.
  const double tol = 1e-5 + 2 * testing::Epsilon(dtype);
  ExpectAllClose(y.Values(), RefLinear(x.Values(), w.Values(), b.Values(), n, c, oc), tol, tol, "y");
  HostTensor y_nobias = HostTensor::Poisoned(dtype, n * oc);
  ASSERT_TRUE(LinearForward(KernelContext::Cpu(), y_nobias.data(), x.data(), w.data(), nullptr, n, c, oc, dtype).ok());
  ExpectAllClose(y_nobias.Values(), RefLinear(x.Values(), w.Values(), {}, n, c, oc), tol, tol, "y (no bias)");
}

// dinp is written (poisoned before), dweight and dbias accumulate onto
// random prior values; the expected gradients are central differences of
// the f64 forward's loss sum(y * dout).
TEST_P(LinearTest, BackwardMatchesFiniteDifferences) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 5, c = 6, oc = 4;
  HostTensor x = HostTensor::From(dtype, rng.Uniform(n * c, -1, 1));
  HostTensor w = HostTensor::From(dtype, rng.Uniform(c * oc, -1, 1));
  HostTensor b = HostTensor::From(dtype, rng.Uniform(oc, -1, 1));
  HostTensor dy = HostTensor::From(dtype, rng.Uniform(n * oc, -1, 1));
  HostTensor dx = HostTensor::Poisoned(dtype, n * c);
  HostTensor dw = HostTensor::From(dtype, rng.Uniform(c * oc, -1, 1));
  HostTensor db = HostTensor::From(dtype, rng.Uniform(oc, -1, 1));
  const std::vector<double> dw0 = dw.Values(), db0 = db.Values();
  ASSERT_TRUE(LinearBackward(KernelContext::Cpu(), dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), n,
                             c, oc, dtype)
                  .ok());
  std::vector<double> xv = x.Values(), wv = w.Values(), bv = b.Values(), dyv = dy.Values();
  auto loss = [&] { return testing::Dot(RefLinear(xv, wv, bv, n, c, oc), dyv); };
  std::vector<double> gx = testing::NumericGrad(xv, loss);
  std::vector<double> gw = testing::NumericGrad(wv, loss);
  std::vector<double> gb = testing::NumericGrad(bv, loss);
  for (size_t i = 0; i < gw.size(); ++i) gw[i] += dw0[i];
  for (size_t i = 0; i < gb.size(); ++i) gb[i] += db0[i];
  // Finite differences of a linear function are exact up to ~1e-9; the
  // kernel adds f32 sums of <= 6 terms and one rounding to dtype.
  const double tol = 1e-5 + 4 * testing::Epsilon(dtype);
  ExpectAllClose(dx.Values(), gx, tol, tol, "dinp");
  ExpectAllClose(dw.Values(), gw, tol, tol, "dweight");
  ExpectAllClose(db.Values(), gb, tol, tol, "dbias");
}

// Every non-empty subset of {dinp, dweight, dbias}, at 1 and 2 threads: each
// part computed is bitwise the full call's, the buffers of skipped outputs
// stay poisoned, and an input no requested part needs is null (1 thread) or
// NaN (2 threads) without effect.
TEST_P(LinearTest, PartialBackwardIsBitwiseTheFullCall) {
  const DType dtype = GetParam();
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "ZS_TEST_SEED=" << seed);
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  testing::Rng rng(seed);
  const int64_t n = 37, c = 24, oc = 40;
  const HostTensor x = HostTensor::From(dtype, rng.Uniform(n * c, -1, 1));
  const HostTensor w = HostTensor::From(dtype, rng.Uniform(c * oc, -1, 1));
  const HostTensor dy = HostTensor::From(dtype, rng.Uniform(n * oc, -1, 1));
  const HostTensor dw0 = HostTensor::From(dtype, rng.Uniform(c * oc, -1, 1));
  const HostTensor db0 = HostTensor::From(dtype, rng.Uniform(oc, -1, 1));
  const HostTensor nan_x = HostTensor::Poisoned(dtype, n * c), nan_w = HostTensor::Poisoned(dtype, c * oc);
  for (int threads : {1, 2}) {
    const KernelContext ctx = KernelContext::Cpu(threads);
    HostTensor full_dx = HostTensor::Poisoned(dtype, n * c), full_dw = dw0, full_db = db0;
    ASSERT_TRUE(LinearBackward(ctx, full_dx.data(), full_dw.data(), full_db.data(), dy.data(), x.data(), w.data(), n,
                               c, oc, dtype)
                    .ok());
    for (int mask = 1; mask < 8; ++mask) {
      const bool want_dx = mask & 1, want_dw = mask & 2, want_db = mask & 4;
      SCOPED_TRACE(::testing::Message() << "threads " << threads << " dinp " << want_dx << " dweight " << want_dw
                                        << " dbias " << want_db);
      HostTensor dx = HostTensor::Poisoned(dtype, n * c);
      HostTensor dw = want_dw ? dw0 : HostTensor::Poisoned(dtype, c * oc);
      HostTensor db = want_db ? db0 : HostTensor::Poisoned(dtype, oc);
      const void* unused_x = threads == 1 ? nullptr : nan_x.data();
      const void* unused_w = threads == 1 ? nullptr : nan_w.data();
      ASSERT_TRUE(LinearBackward(ctx, want_dx ? dx.data() : nullptr, want_dw ? dw.data() : nullptr,
                                 want_db ? db.data() : nullptr, dy.data(), want_dw ? x.data() : unused_x,
                                 want_dx ? w.data() : unused_w, n, c, oc, dtype)
                      .ok());
      testing::ExpectBitwiseEqual(dx, want_dx ? full_dx : HostTensor::Poisoned(dtype, n * c), "dinp");
      testing::ExpectBitwiseEqual(dw, want_dw ? full_dw : HostTensor::Poisoned(dtype, c * oc), "dweight");
      testing::ExpectBitwiseEqual(db, want_db ? full_db : HostTensor::Poisoned(dtype, oc), "dbias");
    }
  }
}

// The fused entry point on the CPU is the two calls it replaces: pre and
// out bitwise LinearForward's and GeluForward's, with and without a bias,
// at 1 and 2 threads.
TEST_P(LinearTest, GeluForwardIsBitwiseLinearThenGelu) {
  const DType dtype = GetParam();
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "ZS_TEST_SEED=" << seed);
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  testing::Rng rng(seed);
  const int64_t n = 19, c = 24, oc = 36;
  const HostTensor x = HostTensor::From(dtype, rng.Uniform(n * c, -1, 1));
  const HostTensor w = HostTensor::From(dtype, rng.Uniform(c * oc, -1, 1));
  const HostTensor b = HostTensor::From(dtype, rng.Uniform(oc, -1, 1));
  for (int threads : {1, 2}) {
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "threads " << threads << " bias " << with_bias);
      const KernelContext ctx = KernelContext::Cpu(threads);
      const void* bias = with_bias ? b.data() : nullptr;
      HostTensor pre = HostTensor::Poisoned(dtype, n * oc), out = HostTensor::Poisoned(dtype, n * oc);
      ASSERT_TRUE(LinearGeluForward(ctx, out.data(), pre.data(), x.data(), w.data(), bias, n, c, oc, dtype).ok());
      HostTensor ref_pre = HostTensor::Poisoned(dtype, n * oc), ref_out = HostTensor::Poisoned(dtype, n * oc);
      ASSERT_TRUE(LinearForward(ctx, ref_pre.data(), x.data(), w.data(), bias, n, c, oc, dtype).ok());
      ASSERT_TRUE(GeluForward(ctx, ref_out.data(), ref_pre.data(), n * oc, dtype).ok());
      testing::ExpectBitwiseEqual(pre, ref_pre, "pre");
      testing::ExpectBitwiseEqual(out, ref_out, "out");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LinearTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(LinearBackward, NullDinpAndDbiasAreSkipped) {
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 3, c = 4, oc = 2;
  HostTensor x = HostTensor::From(DType::kF32, rng.Uniform(n * c, -1, 1));
  HostTensor w = HostTensor::From(DType::kF32, rng.Uniform(c * oc, -1, 1));
  HostTensor dy = HostTensor::From(DType::kF32, rng.Uniform(n * oc, -1, 1));
  HostTensor dw = HostTensor::From(DType::kF32, std::vector<double>(c * oc, 0.0));
  ASSERT_TRUE(LinearBackward(KernelContext::Cpu(), nullptr, dw.data(), nullptr, dy.data(), x.data(), w.data(), n, c,
                             oc, DType::kF32)
                  .ok());
  std::vector<double> xv = x.Values(), dyv = dy.Values(), expected(c * oc, 0.0);
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = 0; j < oc; ++j)
      for (int64_t r = 0; r < n; ++r) expected[i * oc + j] += xv[r * c + i] * dyv[r * oc + j];
  ExpectAllClose(dw.Values(), expected, 1e-6, 1e-6, "dweight");
}

TEST(LinearErrors, NamesTheBadArgument) {
  float buf[8] = {};
  absl::Status s = LinearForward(KernelContext::Cpu(), buf, buf, buf, nullptr, 2, 0, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LinearForward: in_features = 0, expected >= 1");
}

TEST(LinearErrors, GeluForwardNeedsTwoOutputs) {
  float buf[8] = {}, pre[4] = {}, out[4] = {};
  const KernelContext ctx = KernelContext::Cpu();
  absl::Status s = LinearGeluForward(ctx, out, nullptr, buf, buf, nullptr, 2, 2, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LinearGeluForward: pre is null");
  s = LinearGeluForward(ctx, pre, pre, buf, buf, nullptr, 2, 2, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LinearGeluForward: out and pre are the same buffer, expected two");
  s = LinearGeluForward(ctx, out, pre, buf, buf, nullptr, 0, 2, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LinearGeluForward: rows = 0, expected >= 1");
}

TEST(LinearErrors, BackwardNeedsWhatItsRequestedPartsRead) {
  float buf[8] = {};
  const KernelContext ctx = KernelContext::Cpu();
  absl::Status s = LinearBackward(ctx, nullptr, nullptr, nullptr, buf, buf, buf, 2, 2, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LinearBackward: nothing to compute (dinp, dweight and dbias are all null)");
  s = LinearBackward(ctx, buf, nullptr, nullptr, buf, buf, nullptr, 2, 2, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LinearBackward: weight is null, expected non-null when dinp is set");
  s = LinearBackward(ctx, nullptr, buf, nullptr, buf, nullptr, buf, 2, 2, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LinearBackward: inp is null, expected non-null when dweight is set");
  s = LinearBackward(ctx, nullptr, nullptr, buf, nullptr, buf, buf, 2, 2, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LinearBackward: dout is null");
  // dbias alone reads only dout; dweight alone no weight; dinp alone no inp.
  float out[4] = {}, dout[4] = {}, in[4] = {};
  EXPECT_TRUE(LinearBackward(ctx, nullptr, nullptr, out, dout, nullptr, nullptr, 2, 2, 2, DType::kF32).ok());
  EXPECT_TRUE(LinearBackward(ctx, nullptr, out, nullptr, dout, in, nullptr, 2, 2, 2, DType::kF32).ok());
  EXPECT_TRUE(LinearBackward(ctx, out, nullptr, nullptr, dout, nullptr, in, 2, 2, 2, DType::kF32).ok());
}

class BiasTest : public ::testing::TestWithParam<DType> {};

TEST_P(BiasTest, AddAndGradMatchF64) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 9, oc = 37;
  HostTensor y = HostTensor::From(dtype, rng.Uniform(n * oc, -1, 1));
  HostTensor b = HostTensor::From(dtype, rng.Uniform(oc, -1, 1));
  std::vector<double> expected = y.Values();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < oc; ++j) expected[r * oc + j] += b.Get(j);
  ASSERT_TRUE(BiasAdd(KernelContext::Cpu(), y.data(), b.data(), n, oc, dtype).ok());
  const double tol = 2 * testing::Epsilon(dtype);
  ExpectAllClose(y.Values(), expected, tol, tol, "out");

  HostTensor db = HostTensor::From(dtype, rng.Uniform(oc, -1, 1));
  std::vector<double> expected_db = db.Values();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < oc; ++j) expected_db[j] += y.Get(r * oc + j);
  ASSERT_TRUE(BiasGrad(KernelContext::Cpu(), db.data(), y.data(), n, oc, dtype).ok());
  ExpectAllClose(db.Values(), expected_db, 1e-5 + tol, tol, "dbias");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BiasTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

TEST(BiasGrad, ThreadCountIndependent) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 301, oc = 77;
  HostTensor dy = HostTensor::From(DType::kF32, rng.Uniform(n * oc, -1, 1));
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
    HostTensor db = HostTensor::From(DType::kF32, std::vector<double>(oc, 0.25));
    ASSERT_TRUE(BiasGrad(KernelContext::Cpu(threads), db.data(), dy.data(), n, oc, DType::kF32).ok());
    results.push_back(db.Values());
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace zeroshard::kernels
