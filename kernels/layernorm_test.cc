#include "kernels/layernorm.h"

#include <cmath>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

constexpr double kEps = 1e-5;

struct RefLayerNormOut {
  std::vector<double> y, mean, rstd;
};

RefLayerNormOut RefLayerNorm(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                             int64_t n, int64_t c) {
  RefLayerNormOut o{std::vector<double>(n * c), std::vector<double>(n), std::vector<double>(n)};
  for (int64_t r = 0; r < n; ++r) {
    double m = 0;
    for (int64_t i = 0; i < c; ++i) m += x[r * c + i];
    m /= c;
    double var = 0;
    for (int64_t i = 0; i < c; ++i) var += (x[r * c + i] - m) * (x[r * c + i] - m);
    var /= c;
    double s = 1 / std::sqrt(var + kEps);
    for (int64_t i = 0; i < c; ++i) o.y[r * c + i] = (x[r * c + i] - m) * s * w[i] + b[i];
    o.mean[r] = m;
    o.rstd[r] = s;
  }
  return o;
}

class LayerNormTest : public ::testing::TestWithParam<DType> {};

TEST_P(LayerNormTest, ForwardMatchesF64) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 6, c = 33;
  // An offset and scale per row, so the mean matters.
  std::vector<double> xs = rng.Uniform(n * c, -2, 2);
  for (int64_t i = 0; i < n * c; ++i) xs[i] = xs[i] * (1 + i / c) + 3.0;
  HostTensor x = HostTensor::From(dtype, xs);
  HostTensor w = HostTensor::From(dtype, rng.Uniform(c, 0.5, 1.5));
  HostTensor b = HostTensor::From(dtype, rng.Uniform(c, -1, 1));
  HostTensor y = HostTensor::Poisoned(dtype, n * c);
  std::vector<float> mean(n, NAN), rstd(n, NAN);
  ASSERT_TRUE(LayerNormForward(KernelContext::Cpu(), y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                               n, c, static_cast<float>(kEps), dtype)
                  .ok());
  RefLayerNormOut ref = RefLayerNorm(x.Values(), w.Values(), b.Values(), n, c);
  const double tol = 1e-5 + 4 * testing::Epsilon(dtype);  // normalized values are O(3)
  ExpectAllClose(y.Values(), ref.y, tol, tol, "out");
  ExpectAllClose(std::vector<double>(mean.begin(), mean.end()), ref.mean, 1e-5, 1e-6, "mean");
  ExpectAllClose(std::vector<double>(rstd.begin(), rstd.end()), ref.rstd, 0, 1e-5, "rstd");
}

TEST_P(LayerNormTest, BackwardMatchesFiniteDifferences) {
  const DType dtype = GetParam();
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 4, c = 10;
  HostTensor x = HostTensor::From(dtype, rng.Uniform(n * c, -2, 2));
  HostTensor w = HostTensor::From(dtype, rng.Uniform(c, 0.5, 1.5));
  HostTensor b = HostTensor::From(dtype, rng.Uniform(c, -1, 1));
  HostTensor dy = HostTensor::From(dtype, rng.Uniform(n * c, -1, 1));
  HostTensor y = HostTensor::Poisoned(dtype, n * c);
  std::vector<float> mean(n), rstd(n);
  ASSERT_TRUE(LayerNormForward(KernelContext::Cpu(), y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                               n, c, static_cast<float>(kEps), dtype)
                  .ok());
  HostTensor dx = HostTensor::Poisoned(dtype, n * c);
  HostTensor dw = HostTensor::From(dtype, rng.Uniform(c, -1, 1));
  HostTensor db = HostTensor::From(dtype, rng.Uniform(c, -1, 1));
  const std::vector<double> dw0 = dw.Values(), db0 = db.Values();
  ASSERT_TRUE(LayerNormBackward(KernelContext::Cpu(), dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                                mean.data(), rstd.data(), n, c, dtype)
                  .ok());
  std::vector<double> xv = x.Values(), wv = w.Values(), bv = b.Values(), dyv = dy.Values();
  auto loss = [&] { return testing::Dot(RefLayerNorm(xv, wv, bv, n, c).y, dyv); };
  std::vector<double> gx = testing::NumericGrad(xv, loss);
  std::vector<double> gw = testing::NumericGrad(wv, loss);
  std::vector<double> gb = testing::NumericGrad(bv, loss);
  for (int64_t i = 0; i < c; ++i) {
    gw[i] += dw0[i];
    gb[i] += db0[i];
  }
  // Input gradients are O(rstd) ~ 1; f32 intermediates, then one rounding.
  const double tol = 1e-4 + 8 * testing::Epsilon(dtype);
  ExpectAllClose(dx.Values(), gx, tol, tol, "dinp");
  ExpectAllClose(dw.Values(), gw, tol, tol, "dweight");
  ExpectAllClose(db.Values(), gb, tol, tol, "dbias");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LayerNormTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

// dinp alone and dweight + dbias alone, at 1 and 2 threads: each part is
// bitwise the full call's, the buffers of skipped outputs stay poisoned, and
// weight (read by dinp only) is null (1 thread) or NaN (2 threads) for the
// parameter gradients.
TEST_P(LayerNormTest, PartialBackwardIsBitwiseTheFullCall) {
  const DType dtype = GetParam();
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "ZS_TEST_SEED=" << seed);
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  testing::Rng rng(seed);
  const int64_t n = 45, c = 72;
  const HostTensor x = HostTensor::From(dtype, rng.Uniform(n * c, -2, 2));
  const HostTensor w = HostTensor::From(dtype, rng.Uniform(c, 0.5, 1.5));
  const HostTensor b = HostTensor::From(dtype, rng.Uniform(c, -1, 1));
  const HostTensor dy = HostTensor::From(dtype, rng.Uniform(n * c, -1, 1));
  const HostTensor dw0 = HostTensor::From(dtype, rng.Uniform(c, -1, 1));
  const HostTensor db0 = HostTensor::From(dtype, rng.Uniform(c, -1, 1));
  const HostTensor nan_w = HostTensor::Poisoned(dtype, c);
  HostTensor y = HostTensor::Poisoned(dtype, n * c);
  std::vector<float> mean(n), rstd(n);
  ASSERT_TRUE(LayerNormForward(KernelContext::Cpu(), y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                               n, c, static_cast<float>(kEps), dtype)
                  .ok());
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "threads " << threads);
    const KernelContext ctx = KernelContext::Cpu(threads);
    HostTensor full_dx = HostTensor::Poisoned(dtype, n * c), full_dw = dw0, full_db = db0;
    ASSERT_TRUE(LayerNormBackward(ctx, full_dx.data(), full_dw.data(), full_db.data(), dy.data(), x.data(), w.data(),
                                  mean.data(), rstd.data(), n, c, dtype)
                    .ok());

    HostTensor dx = HostTensor::Poisoned(dtype, n * c);
    HostTensor dw = HostTensor::Poisoned(dtype, c), db = HostTensor::Poisoned(dtype, c);
    ASSERT_TRUE(LayerNormBackward(ctx, dx.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), mean.data(),
                                  rstd.data(), n, c, dtype)
                    .ok());
    testing::ExpectBitwiseEqual(dx, full_dx, "dinp (input only)");
    testing::ExpectBitwiseEqual(dw, HostTensor::Poisoned(dtype, c), "dweight (input only)");
    testing::ExpectBitwiseEqual(db, HostTensor::Poisoned(dtype, c), "dbias (input only)");

    dx = HostTensor::Poisoned(dtype, n * c);
    dw = dw0;
    db = db0;
    ASSERT_TRUE(LayerNormBackward(ctx, nullptr, dw.data(), db.data(), dy.data(), x.data(),
                                  threads == 1 ? nullptr : nan_w.data(), mean.data(), rstd.data(), n, c, dtype)
                    .ok());
    testing::ExpectBitwiseEqual(dx, HostTensor::Poisoned(dtype, n * c), "dinp (weights only)");
    testing::ExpectBitwiseEqual(dw, full_dw, "dweight (weights only)");
    testing::ExpectBitwiseEqual(db, full_db, "dbias (weights only)");
  }
}

TEST(LayerNorm, ThreadCountIndependent) {
  cpu::ScopedMinWorkPerThread force_threads(1);  // thread even these small inputs
  testing::Rng rng(testing::TestSeed());
  const int64_t n = 67, c = 96;
  HostTensor x = HostTensor::From(DType::kF32, rng.Uniform(n * c, -2, 2));
  HostTensor w = HostTensor::From(DType::kF32, rng.Uniform(c, 0.5, 1.5));
  HostTensor b = HostTensor::From(DType::kF32, rng.Uniform(c, -1, 1));
  HostTensor dy = HostTensor::From(DType::kF32, rng.Uniform(n * c, -1, 1));
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3}) {
    const KernelContext ctx = KernelContext::Cpu(threads);
    HostTensor y = HostTensor::Poisoned(DType::kF32, n * c), dx = HostTensor::Poisoned(DType::kF32, n * c);
    HostTensor dw = HostTensor::From(DType::kF32, std::vector<double>(c, 0.0));
    HostTensor db = HostTensor::From(DType::kF32, std::vector<double>(c, 0.0));
    std::vector<float> mean(n), rstd(n);
    ASSERT_TRUE(LayerNormForward(ctx, y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c, 1e-5f,
                                 DType::kF32)
                    .ok());
    ASSERT_TRUE(LayerNormBackward(ctx, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                                  rstd.data(), n, c, DType::kF32)
                    .ok());
    std::vector<double> all = y.Values();
    for (auto* t : {&dx, &dw, &db})
      for (double v : t->Values()) all.push_back(v);
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(LayerNormErrors, RejectsNonPositiveEps) {
  float buf[4] = {};
  absl::Status s = LayerNormForward(KernelContext::Cpu(), buf, buf, buf, buf, buf, buf, 1, 4, 0.0f, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LayerNormForward: eps = 0, expected > 0");
}

TEST(LayerNormErrors, BackwardNeedsWhatItsRequestedPartsRead) {
  float dx[4] = {}, dw[4] = {}, db[4] = {}, dy[4] = {}, x[4] = {}, w[4] = {}, mean[1] = {}, rstd[1] = {1};
  const KernelContext ctx = KernelContext::Cpu();
  absl::Status s = LayerNormBackward(ctx, dx, nullptr, db, dy, x, w, mean, rstd, 1, 4, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LayerNormBackward: dweight is null but dbias is not, expected both or neither");
  s = LayerNormBackward(ctx, dx, dw, nullptr, dy, x, w, mean, rstd, 1, 4, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LayerNormBackward: dbias is null but dweight is not, expected both or neither");
  s = LayerNormBackward(ctx, nullptr, nullptr, nullptr, dy, x, w, mean, rstd, 1, 4, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LayerNormBackward: nothing to compute (dinp, dweight and dbias are all null)");
  s = LayerNormBackward(ctx, dx, nullptr, nullptr, dy, x, nullptr, mean, rstd, 1, 4, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LayerNormBackward: weight is null, expected non-null when dinp is set");
  s = LayerNormBackward(ctx, nullptr, dw, db, dy, x, w, nullptr, rstd, 1, 4, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "LayerNormBackward: mean is null");
  EXPECT_TRUE(LayerNormBackward(ctx, nullptr, dw, db, dy, x, nullptr, mean, rstd, 1, 4, DType::kF32).ok());
}

}  // namespace
}  // namespace zeroshard::kernels
