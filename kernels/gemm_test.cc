#include "kernels/gemm.h"

#include <cblas.h>

#include <tuple>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/gemm_tiles.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

// f64 reference of the row-major contract in gemm.h.
std::vector<double> RefGemm(Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k, double alpha,
                            const std::vector<double>& a, int64_t lda, const std::vector<double>& b, int64_t ldb,
                            double beta, const std::vector<double>& c, int64_t ldc) {
  std::vector<double> out = c;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        double av = ta == Transpose::kNo ? a[i * lda + p] : a[p * lda + i];
        double bv = tb == Transpose::kNo ? b[p * ldb + j] : b[j * ldb + p];
        s += av * bv;
      }
      out[i * ldc + j] = alpha * s + (beta == 0 ? 0.0 : beta * c[i * ldc + j]);
    }
  }
  return out;
}

// Strided operands (ld = cols + 3), alpha/beta != 1, and a NaN-poisoned C
// for beta == 0 so unwritten elements fail; the gaps between C's rows must
// come back unchanged.
// `atol` covers f32 accumulation over k terms of size <= 1.5; then one
// rounding to dtype.
void ExpectMatchesF64Reference(DType dtype, Transpose ta, Transpose tb, int64_t m, int64_t n, int64_t k,
                               int threads, double atol) {
  testing::Rng rng(testing::TestSeed());
  const int64_t a_rows = ta == Transpose::kNo ? m : k, a_cols = ta == Transpose::kNo ? k : m;
  const int64_t b_rows = tb == Transpose::kNo ? k : n, b_cols = tb == Transpose::kNo ? n : k;
  const int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = n + 3;
  HostTensor a = HostTensor::From(dtype, rng.Uniform(a_rows * lda, -1, 1));
  HostTensor b = HostTensor::From(dtype, rng.Uniform(b_rows * ldb, -1, 1));
  for (float beta : {0.0f, 0.5f}) {
    SCOPED_TRACE(beta);
    HostTensor c = beta == 0 ? HostTensor::Poisoned(dtype, m * ldc) : HostTensor::From(dtype, rng.Uniform(m * ldc, -1, 1));
    // Gap columns hold a sentinel that must survive.
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = n; j < ldc; ++j) c.Set(i * ldc + j, 7.0);
    }
    const std::vector<double> c_before = c.Values();
    ASSERT_TRUE(Gemm(KernelContext::Cpu(threads), ta, tb, m, n, k, 1.5f, a.data(), lda, b.data(), ldb, beta,
                     c.data(), ldc, dtype)
                    .ok());
    std::vector<double> expected = RefGemm(ta, tb, m, n, k, 1.5, a.Values(), lda, b.Values(), ldb, beta, c_before, ldc);
    ExpectAllClose(c.Values(), expected, atol + 2 * testing::Epsilon(dtype), 2 * testing::Epsilon(dtype), "C");
  }
}

class GemmTest : public ::testing::TestWithParam<std::tuple<DType, Transpose, Transpose>> {};

TEST_P(GemmTest, MatchesF64Reference) {
  const auto [dtype, ta, tb] = GetParam();
  ExpectMatchesF64Reference(dtype, ta, tb, 13, 17, 19, /*threads=*/2, /*atol=*/1e-5);
}

// 2 x 2 tiles (kernels/cpu/gemm_tiles.h) on 3 threads: every tile's operand
// offsets are right for every transpose.
TEST_P(GemmTest, TiledProductMatchesF64Reference) {
  const auto [dtype, ta, tb] = GetParam();
  const cpu::GemmTiles tiles = cpu::PlanGemmTiles(600, 1040, 32);
  ASSERT_EQ(tiles.row_tiles, 2);
  ASSERT_EQ(tiles.col_tiles, 2);
  ExpectMatchesF64Reference(dtype, ta, tb, 600, 1040, 32, /*threads=*/3, /*atol=*/2e-5);
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, GemmTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                                            ::testing::Values(Transpose::kNo, Transpose::kYes),
                                            ::testing::Values(Transpose::kNo, Transpose::kYes)));

// The bitwise contract of gemm.h, on products of several tiles and of one,
// for every transpose and with accumulation (beta = 1). It holds on every
// OpenBLAS core type; tools/test --determinism runs it under each.
TEST(GemmThreads, EveryThreadCountGivesIdenticalBits) {
  testing::Rng rng(testing::TestSeed());
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape& shape : {Shape{600, 1040, 32}, Shape{96, 200, 150}, Shape{1030, 260, 48}}) {
    const auto [m, n, k] = shape;
    for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
      for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
        SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " ta " << (ta == Transpose::kYes)
                                          << " tb " << (tb == Transpose::kYes));
        HostTensor a = HostTensor::From(DType::kF32, rng.Uniform(m * k, -1, 1));
        HostTensor b = HostTensor::From(DType::kF32, rng.Uniform(k * n, -1, 1));
        const std::vector<double> c0 = rng.Uniform(m * n, -1, 1);
        std::vector<std::vector<double>> results;
        for (int threads : {1, 2, 3, 4}) {
          HostTensor c = HostTensor::From(DType::kF32, c0);
          ASSERT_TRUE(Gemm(KernelContext::Cpu(threads), ta, tb, m, n, k, 1.0f, a.data(),
                           ta == Transpose::kNo ? k : m, b.data(), tb == Transpose::kNo ? n : k, 1.0f, c.data(), n,
                           DType::kF32)
                          .ok());
          results.push_back(c.Values());
        }
        for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[0], results[i]) << "threads " << i + 1;
      }
    }
  }
}

// OpenBLAS stays single-threaded whatever the kernel thread count: its own
// threading is what made bits depend on the thread count.
TEST(GemmThreads, OpenBlasRunsSingleThreaded) {
  const int saved = CpuThreads();
  SetCpuThreads(4);
  EXPECT_EQ(CpuThreads(), 4);
  EXPECT_EQ(openblas_get_num_threads(), 1);
  SetCpuThreads(saved);
}

TEST(GemmErrors, RejectsBadArguments) {
  float a[4] = {}, b[4] = {}, c[4] = {};
  const KernelContext ctx = KernelContext::Cpu();
  absl::Status s = Gemm(ctx, Transpose::kNo, Transpose::kNo, 0, 2, 2, 1, a, 2, b, 2, 0, c, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Gemm: m = 0, expected >= 1");
  s = Gemm(ctx, Transpose::kNo, Transpose::kNo, 2, 2, 2, 1, a, 1, b, 2, 0, c, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Gemm: lda = 1, expected >= 2 (A stored [M,K])");
  s = Gemm(ctx, Transpose::kNo, Transpose::kYes, 2, 3, 1, 1, a, 1, b, 0, 0, c, 3, DType::kF32);
  EXPECT_EQ(s.message(), "Gemm: ldb = 0, expected >= 1 (B stored [N,K] for B^T)");
  s = Gemm(ctx, Transpose::kNo, Transpose::kNo, 2, 2, 2, 1, a, 2, b, 2, 0, c, 1, DType::kF32);
  EXPECT_EQ(s.message(), "Gemm: ldc = 1, expected >= 2 (C stored [M,N])");
  s = Gemm(ctx, Transpose::kNo, Transpose::kNo, 2, 2, 2, 1, a, 2, nullptr, 2, 0, c, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Gemm: b is null");
  s = Gemm(ctx, Transpose::kNo, Transpose::kNo, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2, DType::kI32);
  EXPECT_EQ(s.message(), "Gemm: dtype i32, expected f32, bf16 or f16");
  s = Gemm(ctx, Transpose::kNo, Transpose::kNo, int64_t{1} << 32, 2, 2, 1, a, 2, b, 2, 0, c, 2, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Gemm: m = 4294967296, expected <= 2147483647 (BLAS uses 32-bit sizes)");
}

}  // namespace
}  // namespace zeroshard::kernels

namespace zeroshard::kernels {
namespace {

// A CUDA context is checked before any device work: no GPU is needed here.
TEST(GemmErrors, CudaContextWithoutHandleOrCuda) {
  KernelContext ctx;
  ctx.device = Device::kCuda;
  float a[4] = {}, b[4] = {}, c[4] = {};
  absl::Status s = Gemm(ctx, Transpose::kNo, Transpose::kNo, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2, DType::kF32);
#ifdef ZEROSHARD_HAS_CUDA
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "Gemm: ctx.cublas_handle is null on cuda (see kernels/cuda/cuda_resources.h)");
#else
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "Gemm: ctx.device is cuda but zeroshard was built without CUDA");
#endif
}

}  // namespace
}  // namespace zeroshard::kernels
