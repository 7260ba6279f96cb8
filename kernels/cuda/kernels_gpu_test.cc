// Every CUDA kernel against its CPU version on the same random inputs.
// Skips (with the reason) when there is no usable GPU or no CUDA build.
// Tolerances are mixed, |gpu - cpu| <= atol + rtol * |cpu|, stated per test:
// GPU and CPU sum in different orders (and cuBLAS may use other blockings),
// so agreement is to f32 rounding of the accumulations, plus one rounding
// of the output for bf16.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "gtest/gtest.h"
#include "kernels/accumulate.h"
#include "kernels/attention.h"
#include "kernels/bias.h"
#include "kernels/cast.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "kernels/linear.h"
#include "kernels/optimizer.h"
#include "kernels/residual.h"
#include "kernels/scale.h"
#include "kernels/sum_squares.h"
#include "kernels/testing/device_array.h"
#include "kernels/testing/gpu_test_base.h"
#include "kernels/testing/kernel_test_util.h"

#ifdef ZEROSHARD_HAS_CUDA
#include "kernels/cuda/cuda_resources.h"
#endif

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

#ifndef ZEROSHARD_HAS_CUDA

TEST(GpuKernels, Skipped) { GTEST_SKIP() << "built without CUDA (--//bazel:cuda=false or no nvcc)"; }

#else

// Device copy of host bytes, freed on destruction.
using testing::DeviceArray;

std::vector<double> Doubles(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

class GpuTest : public testing::GpuTestBase<::testing::Test> {
 protected:
  // Output of dtype from the GPU.
  std::vector<double> Fetch(const DeviceArray& d, DType dtype, int64_t n) {
    HostTensor t(dtype, n);
    d.CopyTo(t);
    return t.Values();
  }
  testing::Rng rng_{testing::TestSeed()};
};

class GpuKernelTest : public GpuTest, public ::testing::WithParamInterface<DType> {
 protected:
  double Tol(double f32_tol) const { return f32_tol + 2 * testing::Epsilon(GetParam()); }
};

TEST_P(GpuKernelTest, GemmAllTransposes) {
  const DType dt = GetParam();
  const int64_t m = 67, n = 45, k = 129;
  for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
    for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
      SCOPED_TRACE(::testing::Message() << "ta " << int(ta) << " tb " << int(tb));
      const int64_t lda = ta == Transpose::kNo ? k : m, ldb = tb == Transpose::kNo ? n : k;
      HostTensor a = HostTensor::From(dt, rng_.Uniform(m * k, -1, 1));
      HostTensor b = HostTensor::From(dt, rng_.Uniform(k * n, -1, 1));
      HostTensor c = HostTensor::From(dt, rng_.Uniform(m * n, -1, 1));
      DeviceArray da(a), db(b), dc(c);
      ASSERT_TRUE(Gemm(cpu_, ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 1.0f, c.data(), n, dt).ok());
      ASSERT_TRUE(Gemm(gpu_, ta, tb, m, n, k, 0.5f, da.get(), lda, db.get(), ldb, 1.0f, dc.get(), n, dt).ok());
      Sync();
      ExpectAllClose(Fetch(dc, dt, m * n), c.Values(), Tol(1e-4), Tol(1e-4), "C");
    }
  }
}

TEST_P(GpuKernelTest, LinearForwardBackward) {
  const DType dt = GetParam();
  const int64_t n = 33, c = 40, oc = 24;
  HostTensor x = HostTensor::From(dt, rng_.Uniform(n * c, -1, 1)), w = HostTensor::From(dt, rng_.Uniform(c * oc, -1, 1));
  HostTensor b = HostTensor::From(dt, rng_.Uniform(oc, -1, 1)), dy = HostTensor::From(dt, rng_.Uniform(n * oc, -1, 1));
  HostTensor y(dt, n * oc), dx(dt, n * c), dw = HostTensor::From(dt, rng_.Uniform(c * oc, -1, 1)),
      dbias = HostTensor::From(dt, rng_.Uniform(oc, -1, 1));
  DeviceArray gx(x), gw(w), gb(b), gdy(dy), gy(y), gdx(dx), gdw(dw), gdb(dbias);
  ASSERT_TRUE(LinearForward(cpu_, y.data(), x.data(), w.data(), b.data(), n, c, oc, dt).ok());
  ASSERT_TRUE(LinearForward(gpu_, gy.get(), gx.get(), gw.get(), gb.get(), n, c, oc, dt).ok());
  ASSERT_TRUE(LinearBackward(cpu_, dx.data(), dw.data(), dbias.data(), dy.data(), x.data(), w.data(), n, c, oc, dt).ok());
  ASSERT_TRUE(LinearBackward(gpu_, gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(), n, c, oc, dt).ok());
  Sync();
  ExpectAllClose(Fetch(gy, dt, n * oc), y.Values(), Tol(1e-4), Tol(1e-4), "y");
  ExpectAllClose(Fetch(gdx, dt, n * c), dx.Values(), Tol(1e-4), Tol(1e-4), "dinp");
  ExpectAllClose(Fetch(gdw, dt, c * oc), dw.Values(), Tol(1e-4), Tol(1e-4), "dweight");
  ExpectAllClose(Fetch(gdb, dt, oc), dbias.Values(), Tol(1e-4), Tol(1e-4), "dbias");
}

// The split modes (dinp only; dweight + dbias only; dbias only): the GPU
// partial calls match the CPU full call to tolerance and the GPU full call
// bitwise (the same cuBLAS calls on one stream); skipped outputs stay
// poisoned; the input a mode does not need is null.
TEST_P(GpuKernelTest, LinearBackwardParts) {
  const DType dt = GetParam();
  const int64_t n = 33, c = 40, oc = 24;
  HostTensor x = HostTensor::From(dt, rng_.Uniform(n * c, -1, 1));
  HostTensor w = HostTensor::From(dt, rng_.Uniform(c * oc, -1, 1));
  HostTensor dy = HostTensor::From(dt, rng_.Uniform(n * oc, -1, 1));
  HostTensor dw0 = HostTensor::From(dt, rng_.Uniform(c * oc, -1, 1));
  HostTensor db0 = HostTensor::From(dt, rng_.Uniform(oc, -1, 1));
  HostTensor dx = HostTensor::Poisoned(dt, n * c), dw = dw0, db = db0;
  ASSERT_TRUE(LinearBackward(cpu_, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), n, c, oc, dt).ok());
  const HostTensor nan_dx = HostTensor::Poisoned(dt, n * c), nan_dw = HostTensor::Poisoned(dt, c * oc);
  const HostTensor nan_db = HostTensor::Poisoned(dt, oc);
  DeviceArray gx(x), gw(w), gdy(dy);
  DeviceArray full_dx(nan_dx), full_dw(dw0), full_db(db0);
  ASSERT_TRUE(LinearBackward(gpu_, full_dx.get(), full_dw.get(), full_db.get(), gdy.get(), gx.get(), gw.get(), n, c, oc,
                             dt)
                  .ok());
  DeviceArray in_dx(nan_dx), in_dw(nan_dw), in_db(nan_db);  // dinp only
  ASSERT_TRUE(LinearBackward(gpu_, in_dx.get(), nullptr, nullptr, gdy.get(), nullptr, gw.get(), n, c, oc, dt).ok());
  DeviceArray wt_dx(nan_dx), wt_dw(dw0), wt_db(db0);  // dweight + dbias only
  ASSERT_TRUE(LinearBackward(gpu_, nullptr, wt_dw.get(), wt_db.get(), gdy.get(), gx.get(), nullptr, n, c, oc, dt).ok());
  DeviceArray b_db(db0);  // dbias only
  ASSERT_TRUE(LinearBackward(gpu_, nullptr, nullptr, b_db.get(), gdy.get(), nullptr, nullptr, n, c, oc, dt).ok());
  Sync();
  ExpectAllClose(Fetch(in_dx, dt, n * c), dx.Values(), Tol(1e-4), Tol(1e-4), "dinp (dinp only)");
  ExpectAllClose(Fetch(wt_dw, dt, c * oc), dw.Values(), Tol(1e-4), Tol(1e-4), "dweight (weights only)");
  ExpectAllClose(Fetch(wt_db, dt, oc), db.Values(), Tol(1e-4), Tol(1e-4), "dbias (weights only)");
  ExpectAllClose(Fetch(b_db, dt, oc), db.Values(), Tol(1e-4), Tol(1e-4), "dbias (dbias only)");
  EXPECT_EQ(Fetch(in_dx, dt, n * c), Fetch(full_dx, dt, n * c));
  EXPECT_EQ(Fetch(wt_dw, dt, c * oc), Fetch(full_dw, dt, c * oc));
  EXPECT_EQ(Fetch(wt_db, dt, oc), Fetch(full_db, dt, oc));
  EXPECT_EQ(Fetch(b_db, dt, oc), Fetch(full_db, dt, oc));
  for (double v : Fetch(in_dw, dt, c * oc)) ASSERT_TRUE(std::isnan(v)) << "dweight written in dinp-only mode";
  for (double v : Fetch(in_db, dt, oc)) ASSERT_TRUE(std::isnan(v)) << "dbias written in dinp-only mode";
  for (double v : Fetch(wt_dx, dt, n * c)) ASSERT_TRUE(std::isnan(v)) << "dinp written in weights-only mode";
}

TEST_P(GpuKernelTest, Embedding) {
  const DType dt = GetParam();
  const int64_t b = 3, t = 9, c = 70, v = 13;
  std::vector<int32_t> tokens = rng_.Ints(b * t, 0, v);
  HostTensor wte = HostTensor::From(dt, rng_.Uniform(v * c, -1, 1)), wpe = HostTensor::From(dt, rng_.Uniform(t * c, -1, 1));
  HostTensor out(dt, b * t * c), dout = HostTensor::From(dt, rng_.Uniform(b * t * c, -1, 1));
  HostTensor dwte = HostTensor::From(dt, rng_.Uniform(v * c, -1, 1)), dwpe = HostTensor::From(dt, rng_.Uniform(t * c, -1, 1));
  DeviceArray gtok(tokens), gwte(wte), gwpe(wpe), gout(out), gdout(dout), gdwte(dwte), gdwpe(dwpe);
  ASSERT_TRUE(EmbeddingForward(cpu_, out.data(), tokens.data(), wte.data(), wpe.data(), b, t, c, v, dt).ok());
  ASSERT_TRUE(EmbeddingForward(gpu_, gout.get(), gtok.as<int32_t>(), gwte.get(), gwpe.get(), b, t, c, v, dt).ok());
  ASSERT_TRUE(EmbeddingBackward(cpu_, dwte.data(), dwpe.data(), dout.data(), tokens.data(), b, t, c, v, dt).ok());
  ASSERT_TRUE(EmbeddingBackward(gpu_, gdwte.get(), gdwpe.get(), gdout.get(), gtok.as<int32_t>(), b, t, c, v, dt).ok());
  Sync();
  ExpectAllClose(Fetch(gout, dt, b * t * c), out.Values(), 0, 0, "out");  // one rounding of the same f32 sum
  // dwte: both add a token's rows in position order, rounding once (exact
  // in kernels/cuda/row_kernels_gpu_test.cc); dwpe sums in another order.
  const double tol = 1e-5 + 16 * testing::Epsilon(dt);
  ExpectAllClose(Fetch(gdwte, dt, v * c), dwte.Values(), tol, tol, "dwte");
  ExpectAllClose(Fetch(gdwpe, dt, t * c), dwpe.Values(), tol, tol, "dwpe");
}

// LayerNormBackward's two modes (dinp only; dweight + dbias only, weight
// null) against the CPU full call (tolerance) and the GPU full call
// (bitwise: the same kernels); skipped outputs stay poisoned.
TEST_P(GpuKernelTest, LayerNormBackwardParts) {
  const DType dt = GetParam();
  const int64_t n = 37, c = 200;
  HostTensor x = HostTensor::From(dt, rng_.Uniform(n * c, -2, 2)), w = HostTensor::From(dt, rng_.Uniform(c, 0.5, 1.5));
  HostTensor b = HostTensor::From(dt, rng_.Uniform(c, -1, 1)), dy = HostTensor::From(dt, rng_.Uniform(n * c, -1, 1));
  HostTensor dw0 = HostTensor::From(dt, rng_.Uniform(c, -1, 1)), db0 = HostTensor::From(dt, rng_.Uniform(c, -1, 1));
  HostTensor y(dt, n * c), dx = HostTensor::Poisoned(dt, n * c), dw = dw0, db = db0;
  std::vector<float> mean(n), rstd(n);
  ASSERT_TRUE(
      LayerNormForward(cpu_, y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c, 1e-5f, dt).ok());
  ASSERT_TRUE(LayerNormBackward(cpu_, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                                rstd.data(), n, c, dt)
                  .ok());
  const HostTensor nan_dx = HostTensor::Poisoned(dt, n * c), nan_c = HostTensor::Poisoned(dt, c);
  // The CPU's mean and rstd, so both devices differentiate the same forward.
  DeviceArray gx(x), gw(w), gdy(dy), gmean(mean), grstd(rstd);
  DeviceArray full_dx(nan_dx), full_dw(dw0), full_db(db0);
  ASSERT_TRUE(LayerNormBackward(gpu_, full_dx.get(), full_dw.get(), full_db.get(), gdy.get(), gx.get(), gw.get(),
                                gmean.as<float>(), grstd.as<float>(), n, c, dt)
                  .ok());
  DeviceArray in_dx(nan_dx), in_dw(nan_c), in_db(nan_c);
  ASSERT_TRUE(LayerNormBackward(gpu_, in_dx.get(), nullptr, nullptr, gdy.get(), gx.get(), gw.get(), gmean.as<float>(),
                                grstd.as<float>(), n, c, dt)
                  .ok());
  DeviceArray wt_dx(nan_dx), wt_dw(dw0), wt_db(db0);
  ASSERT_TRUE(LayerNormBackward(gpu_, nullptr, wt_dw.get(), wt_db.get(), gdy.get(), gx.get(), nullptr,
                                gmean.as<float>(), grstd.as<float>(), n, c, dt)
                  .ok());
  Sync();
  ExpectAllClose(Fetch(in_dx, dt, n * c), dx.Values(), Tol(1e-4), Tol(1e-4), "dinp (input only)");
  ExpectAllClose(Fetch(wt_dw, dt, c), dw.Values(), Tol(1e-4), Tol(1e-4), "dweight (weights only)");
  ExpectAllClose(Fetch(wt_db, dt, c), db.Values(), Tol(1e-4), Tol(1e-4), "dbias (weights only)");
  EXPECT_EQ(Fetch(in_dx, dt, n * c), Fetch(full_dx, dt, n * c));
  EXPECT_EQ(Fetch(wt_dw, dt, c), Fetch(full_dw, dt, c));
  EXPECT_EQ(Fetch(wt_db, dt, c), Fetch(full_db, dt, c));
  for (double v : Fetch(in_dw, dt, c)) ASSERT_TRUE(std::isnan(v)) << "dweight written in input-only mode";
  for (double v : Fetch(in_db, dt, c)) ASSERT_TRUE(std::isnan(v)) << "dbias written in input-only mode";
  for (double v : Fetch(wt_dx, dt, n * c)) ASSERT_TRUE(std::isnan(v)) << "dinp written in weights-only mode";
}

TEST_P(GpuKernelTest, ElementwiseKernels) {
  const DType dt = GetParam();
  const int64_t n = 100003;
  HostTensor x = HostTensor::From(dt, rng_.Uniform(n, -5, 5)), d = HostTensor::From(dt, rng_.Uniform(n, -1, 1));
  HostTensor gelu(dt, n), dgelu(dt, n), sum(dt, n);
  DeviceArray gx(x), gd(d), ggelu(gelu), gdgelu(dgelu), gsum(sum);
  ASSERT_TRUE(GeluForward(cpu_, gelu.data(), x.data(), n, dt).ok());
  ASSERT_TRUE(GeluForward(gpu_, ggelu.get(), gx.get(), n, dt).ok());
  ASSERT_TRUE(GeluBackward(cpu_, dgelu.data(), x.data(), d.data(), n, dt).ok());
  ASSERT_TRUE(GeluBackward(gpu_, gdgelu.get(), gx.get(), gd.get(), n, dt).ok());
  ASSERT_TRUE(ResidualForward(cpu_, sum.data(), x.data(), d.data(), n, dt).ok());
  ASSERT_TRUE(ResidualForward(gpu_, gsum.get(), gx.get(), gd.get(), n, dt).ok());
  Sync();
  // Same f32 formula; device tanhf may differ from glibc's by a few ulp.
  ExpectAllClose(Fetch(ggelu, dt, n), gelu.Values(), Tol(1e-6), Tol(1e-6), "gelu");
  ExpectAllClose(Fetch(gdgelu, dt, n), dgelu.Values(), Tol(1e-6), Tol(1e-6), "dgelu");
  ExpectAllClose(Fetch(gsum, dt, n), sum.Values(), 0, 0, "residual");

  // Casts: bit-exact with the CPU (same conversion code).
  HostTensor f32 = HostTensor::From(DType::kF32, rng_.Uniform(n, -70000, 70000));
  HostTensor half(dt, n);
  DeviceArray gf32(f32), ghalf(half);
  ASSERT_TRUE(Cast(cpu_, half.data(), dt, f32.data(), DType::kF32, n).ok());
  ASSERT_TRUE(Cast(gpu_, ghalf.get(), dt, gf32.get(), DType::kF32, n).ok());
  Sync();
  EXPECT_EQ(Fetch(ghalf, dt, n), half.Values());

  // Scale with the non-finite flag, and the sum of squares.
  bool cpu_found = true, gpu_found = true;
  ASSERT_TRUE(ScaleInPlace(cpu_, x.data(), n, dt, 0.25f, &cpu_found).ok());
  ASSERT_TRUE(ScaleInPlace(gpu_, gx.get(), n, dt, 0.25f, &gpu_found).ok());
  EXPECT_FALSE(cpu_found);
  EXPECT_FALSE(gpu_found);
  EXPECT_EQ(Fetch(gx, dt, n), x.Values());
  x.Set(n - 5, std::numeric_limits<double>::quiet_NaN());
  DeviceArray gbad(x);
  ASSERT_TRUE(ScaleInPlace(gpu_, gbad.get(), n, dt, 1.0f, &gpu_found).ok());
  EXPECT_TRUE(gpu_found);
  double cpu_sq = 0, gpu_sq = 0;
  ASSERT_TRUE(SumOfSquares(cpu_, d.data(), n, dt, &cpu_sq).ok());
  ASSERT_TRUE(SumOfSquares(gpu_, gd.get(), n, dt, &gpu_sq).ok());
  EXPECT_NEAR(gpu_sq, cpu_sq, 1e-12 * cpu_sq);
}

// The tiled kernels against the CPU at each padded head size (32, 64, 128),
// padded (hs 12, 96) and exact (hs 32, 64, 128), with rows ending mid-tile
// and mid-block; the backward from each side's own forward. Then bitwise
// repeatability.
TEST_P(GpuKernelTest, Attention) {
  const DType dt = GetParam();
  struct Shape {
    int64_t b, t, c, nh;
  };
  for (const Shape& sh : {Shape{2, 37, 48, 4}, Shape{1, 50, 64, 2}, Shape{2, 200, 128, 2}, Shape{1, 70, 192, 2},
                          Shape{1, 45, 256, 2}}) {
    const int64_t b = sh.b, t = sh.t, c = sh.c, nh = sh.nh;
    SCOPED_TRACE(::testing::Message() << "b " << b << " t " << t << " c " << c << " nh " << nh);
    HostTensor qkv = HostTensor::From(dt, rng_.Uniform(b * t * 3 * c, -2, 2));
    HostTensor dout = HostTensor::From(dt, rng_.Uniform(b * t * c, -1, 1));
    HostTensor out(dt, b * t * c), dqkv(dt, b * t * 3 * c);
    std::vector<float> lse(b * nh * t), scratch(AttentionBackwardScratchElements(b, t, nh));
    DeviceArray gqkv(qkv), gdout(dout), gout(out), gdqkv(dqkv), glse(lse), gscratch(scratch);
    ASSERT_TRUE(AttentionForward(cpu_, out.data(), lse.data(), qkv.data(), b, t, c, nh, dt).ok());
    ASSERT_TRUE(AttentionForward(gpu_, gout.get(), glse.as<float>(), gqkv.get(), b, t, c, nh, dt).ok());
    ASSERT_TRUE(AttentionBackward(cpu_, dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(), lse.data(), b,
                                  t, c, nh, dt)
                    .ok());
    ASSERT_TRUE(AttentionBackward(gpu_, gdqkv.get(), gscratch.as<float>(), gdout.get(), gqkv.get(), gout.get(),
                                  glse.as<float>(), b, t, c, nh, dt)
                    .ok());
    Sync();
    ExpectAllClose(glse.ToDoubles<float>(), Doubles(lse), 1e-5, 1e-5, "lse");
    ExpectAllClose(Fetch(gout, dt, b * t * c), out.Values(), Tol(1e-5), Tol(1e-5), "out");
    // bf16: the GPU's dout · out uses the rounded output.
    ExpectAllClose(Fetch(gdqkv, dt, b * t * 3 * c), dqkv.Values(), Tol(1e-4) + 6 * testing::Epsilon(dt),
                   Tol(1e-4) + 6 * testing::Epsilon(dt), "dqkv");

    const std::vector<double> first = Fetch(gdqkv, dt, b * t * 3 * c);
    ASSERT_TRUE(AttentionBackward(gpu_, gdqkv.get(), gscratch.as<float>(), gdout.get(), gqkv.get(), gout.get(),
                                  glse.as<float>(), b, t, c, nh, dt)
                    .ok());
    Sync();
    EXPECT_EQ(Fetch(gdqkv, dt, b * t * 3 * c), first) << "attention backward is not repeatable";
  }
}

TEST_F(GpuTest, AttentionRejectsHeadsAbove128) {
  float* none = nullptr;
  absl::Status s = AttentionForward(gpu_, &none, reinterpret_cast<float*>(&none), &none, 1, 4, 258, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "AttentionForward: head size channels / num_heads = 129 is above the CUDA kernels' maximum of 128");
}

TEST_P(GpuKernelTest, CrossEntropy) {
  const DType dt = GetParam();
  const int64_t n = 19, v = 5003;
  HostTensor z = HostTensor::From(dt, rng_.Uniform(n * v, -6, 6));
  std::vector<int32_t> targets = rng_.Ints(n, 0, v);
  for (int64_t r : {0, 7, 8, 18}) targets[r] = -100;  // ignored rows
  std::vector<float> losses(n, NAN), lse(n, NAN), sums(2, NAN);
  HostTensor dz = HostTensor::Poisoned(dt, n * v);  // copied to gdz: the GPU must write every row
  DeviceArray gz(z), gtargets(targets), glosses(losses), glse(lse), gsums(sums), gdz(dz);
  ASSERT_TRUE(
      CrossEntropyForward(cpu_, losses.data(), lse.data(), sums.data(), z.data(), targets.data(), n, v, dt).ok());
  ASSERT_TRUE(CrossEntropyForward(gpu_, glosses.as<float>(), glse.as<float>(), gsums.as<float>(), gz.get(),
                                  gtargets.as<int32_t>(), n, v, dt)
                  .ok());
  ASSERT_TRUE(CrossEntropyBackward(cpu_, dz.data(), z.data(), lse.data(), targets.data(), 0.125f, n, v, dt).ok());
  ASSERT_TRUE(CrossEntropyBackward(gpu_, gdz.get(), gz.get(), glse.as<float>(), gtargets.as<int32_t>(), 0.125f, n, v,
                                   dt)
                  .ok());
  Sync();
  ExpectAllClose(glosses.ToDoubles<float>(), Doubles(losses), 1e-5, 1e-5, "losses");
  const std::vector<double> gpu_sums = gsums.ToDoubles<float>();
  ExpectAllClose({gpu_sums[0]}, {sums[0]}, 1e-5, 1e-5, "loss sum");
  EXPECT_EQ(gpu_sums[1], n - 4);  // the count is exact
  const std::vector<double> gpu_dz = Fetch(gdz, dt, n * v);
  ExpectAllClose(gpu_dz, dz.Values(), Tol(1e-7), Tol(1e-5), "dlogits");
  for (int64_t r : {0, 7, 8, 18}) {
    for (int64_t j = 0; j < v; ++j) ASSERT_EQ(gpu_dz[r * v + j], 0.0) << "ignored row " << r << " logit " << j;
  }
}

// The reductions promise run-to-run identical bits (fixed shapes, no atomics).
TEST_P(GpuKernelTest, ReductionsAreRunToRunDeterministic) {
  const DType dt = GetParam();
  const int64_t b = 4, t = 64, c = 96, v = 50, n = b * t;
  std::vector<int32_t> tokens = rng_.Ints(n, 0, v);
  HostTensor dout = HostTensor::From(dt, rng_.Uniform(n * c, -1, 1));
  HostTensor x = HostTensor::From(dt, rng_.Uniform(n * c, -2, 2)), w = HostTensor::From(dt, rng_.Uniform(c, 0.5, 1.5));
  std::vector<float> mean(n), rstd(n);
  HostTensor y(dt, n * c);
  ASSERT_TRUE(LayerNormForward(cpu_, y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), n, c, 1e-5f, dt).ok());
  DeviceArray gtok(tokens), gdout(dout), gx(x), gw(w), gmean(mean), grstd(rstd);
  std::vector<std::vector<double>> runs;
  for (int run = 0; run < 2; ++run) {
    HostTensor zeros_v = HostTensor::From(dt, std::vector<double>(v * c, 0.0));
    HostTensor zeros_c = HostTensor::From(dt, std::vector<double>(c, 0.0));
    HostTensor zeros_t = HostTensor::From(dt, std::vector<double>(t * c, 0.0));
    HostTensor dx(dt, n * c);
    DeviceArray dwte(zeros_v), dwpe(zeros_t), dbias(zeros_c), dlw(zeros_c), dlb(zeros_c), gdx(dx);
    ASSERT_TRUE(EmbeddingBackward(gpu_, dwte.get(), dwpe.get(), gdout.get(), gtok.as<int32_t>(), b, t, c, v, dt).ok());
    ASSERT_TRUE(BiasGrad(gpu_, dbias.get(), gdout.get(), n, c, dt).ok());
    ASSERT_TRUE(LayerNormBackward(gpu_, gdx.get(), dlw.get(), dlb.get(), gdout.get(), gx.get(), gw.get(),
                                  gmean.as<float>(), grstd.as<float>(), n, c, dt)
                    .ok());
    double sq = 0;
    ASSERT_TRUE(SumOfSquares(gpu_, gdout.get(), n * c, dt, &sq).ok());
    Sync();
    std::vector<double> all = {sq};
    for (const DeviceArray* d : {&dwte, &dwpe, &dbias, &dlw, &dlb, &gdx}) {
      const int64_t count = d == &dwte ? v * c : d == &dwpe ? t * c : d == &gdx ? n * c : c;
      for (double val : Fetch(*d, dt, count)) all.push_back(val);
    }
    runs.push_back(all);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuKernelTest, ::testing::Values(DType::kF32, DType::kBF16),
                         testing::DTypeParamName);

// One f32 add of an exactly widened value: the GPU must match bit for bit
// (NaN payloads aside: the GPU makes its own NaN).
TEST_F(GpuTest, AccumulateIntoMatchesCpuExactly) {
  const int64_t n = 100003;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dt));
    std::vector<double> values = rng_.Uniform(n, -300, 300);
    values[5] = std::numeric_limits<double>::infinity();
    values[6] = -std::numeric_limits<double>::infinity();
    values[7] = std::numeric_limits<double>::quiet_NaN();
    values[n - 1] = 1e-6;  // an f16 subnormal
    HostTensor src = HostTensor::From(dt, values);
    std::vector<double> start = rng_.Uniform(n, -1e4, 1e4);
    std::vector<float> dst(start.begin(), start.end());
    dst[8] = std::numeric_limits<float>::infinity();
    dst[9] = std::numeric_limits<float>::quiet_NaN();
    DeviceArray gsrc(src), gdst(dst);
    ASSERT_TRUE(AccumulateInto(cpu_, dst.data(), src.data(), dt, n).ok());
    ASSERT_TRUE(AccumulateInto(gpu_, gdst.as<float>(), gsrc.get(), dt, n).ok());
    Sync();
    const std::vector<double> got = gdst.ToDoubles<float>();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool same = std::isnan(dst[i]) ? std::isnan(got[i]) : got[i] == dst[i];
      if (!same && bad++ < 5) ADD_FAILURE() << "element " << i << ": gpu " << got[i] << ", cpu " << dst[i];
    }
    EXPECT_EQ(bad, 0);
    EXPECT_TRUE(std::isnan(got[7]) && std::isnan(got[9]));
    EXPECT_EQ(got[5], std::numeric_limits<double>::infinity());
  }
}

TEST_F(GpuTest, AdamWAndSgdMatchCpu) {
  const int64_t n = 300007;
  std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = static_cast<float>(std::sin(i * 0.37));
    g[i] = static_cast<float>(std::cos(i * 0.11));
  }
  std::vector<float> sgd_p = p, buf(n, 0.0f);
  DeviceArray gp(p), gg(g), gm(m), gv(v), gsp(sgd_p), gbuf(buf);
  for (int64_t step = 1; step <= 3; ++step) {
    AdamWHyper h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, step};
    ASSERT_TRUE(AdamWUpdate(cpu_, p.data(), g.data(), m.data(), v.data(), n, h).ok());
    ASSERT_TRUE(AdamWUpdate(gpu_, gp.as<float>(), gg.as<float>(), gm.as<float>(), gv.as<float>(), n, h).ok());
    SgdHyper s{0.01f, 0.9f, 0.0f, 1e-4f, true, step == 1};
    ASSERT_TRUE(SgdUpdate(cpu_, sgd_p.data(), g.data(), buf.data(), n, s).ok());
    ASSERT_TRUE(SgdUpdate(gpu_, gsp.as<float>(), gg.as<float>(), gbuf.as<float>(), n, s).ok());
  }
  Sync();
  // Same per-element code; only FMA contraction by nvcc may differ.
  ExpectAllClose(gp.ToDoubles<float>(), Doubles(p), 1e-7, 1e-6, "adamw param");
  ExpectAllClose(gm.ToDoubles<float>(), Doubles(m), 1e-7, 1e-6, "adamw exp_avg");
  ExpectAllClose(gv.ToDoubles<float>(), Doubles(v), 1e-9, 1e-6, "adamw exp_avg_sq");
  ExpectAllClose(gsp.ToDoubles<float>(), Doubles(sgd_p), 1e-7, 1e-6, "sgd param");
  ExpectAllClose(gbuf.ToDoubles<float>(), Doubles(buf), 1e-7, 1e-6, "sgd momentum_buf");
}

#endif  // ZEROSHARD_HAS_CUDA

}  // namespace
}  // namespace zeroshard::kernels
