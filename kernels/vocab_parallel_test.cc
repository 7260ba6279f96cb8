// The vocabulary-parallel pieces on CPU, simulating tp ranks in one thread
// (the reductions between them done here, as the units' collectives would):
// against the unsplit EmbeddingForward/Backward and CrossEntropyForward/
// Backward on the same values, with a vocabulary that does not divide (so a
// rank holds padding) and padding logits large enough to win if included.
#include "kernels/vocab_parallel.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/context.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::ExpectBitwiseEqual;
using testing::HostTensor;

// Rank r of tp over a vocabulary of v real rows padded to a multiple of tp.
VocabRange RangeOf(int64_t v, int tp, int r) {
  const int64_t vp = (v + tp - 1) / tp * tp, local = vp / tp, begin = r * local;
  return VocabRange{begin, local, std::max<int64_t>(0, std::min<int64_t>(local, v - begin))};
}

// Rows [begin, begin + count) of a (rows, c) tensor.
HostTensor Rows(const HostTensor& t, int64_t c, int64_t begin, int64_t count) {
  HostTensor out(t.dtype(), count * c);
  const size_t e = DTypeSize(t.dtype());
  std::memcpy(out.data(), static_cast<const char*>(t.data()) + begin * c * e, count * c * e);
  return out;
}

// Columns [begin, begin + count) of a (rows, cols) tensor.
HostTensor Columns(const HostTensor& t, int64_t rows, int64_t cols, int64_t begin, int64_t count) {
  HostTensor out(t.dtype(), rows * count);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < count; ++j) out.Set(r * count + j, t.Get(r * cols + begin + j));
  }
  return out;
}

class VocabParallelTest : public ::testing::TestWithParam<DType> {
 protected:
  testing::Rng rng_{testing::TestSeed()};
  const KernelContext cpu_ = KernelContext::Cpu();
};

// Summed over the ranks, the masked lookups are EmbeddingForward's output
// bit for bit; the whole range is EmbeddingForward itself.
TEST_P(VocabParallelTest, EmbeddingLookupsSumToTheUnsplitLookup) {
  const DType dt = GetParam();
  const int64_t b = 3, t = 5, c = 7, v = 11, max_t = 6;
  std::vector<int32_t> tokens = rng_.Ints(b * t, 0, v);
  tokens[0] = v - 1;  // the last real row (next to the padding)
  HostTensor wte = HostTensor::From(dt, rng_.Uniform(v * c, -1, 1));
  HostTensor wpe = HostTensor::From(dt, rng_.Uniform(max_t * c, -1, 1));
  HostTensor want = HostTensor::Poisoned(dt, b * t * c);
  ASSERT_TRUE(EmbeddingForward(cpu_, want.data(), tokens.data(), wte.data(), wpe.data(), b, t, c, v, dt).ok());
  {
    HostTensor got = HostTensor::Poisoned(dt, b * t * c);
    ASSERT_TRUE(EmbeddingForwardVocabRange(cpu_, got.data(), tokens.data(), wte.data(), wpe.data(), b, t, c,
                                           VocabRange{0, v, v}, v, dt)
                    .ok());
    ExpectBitwiseEqual(got, want, "whole range");
  }
  for (int tp : {2, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "tp " << tp);
    std::vector<double> sum(b * t * c, 0.0);
    for (int r = 0; r < tp; ++r) {
      const VocabRange range = RangeOf(v, tp, r);
      // The padding rows of the local slice hold garbage: never read.
      HostTensor local = HostTensor::From(dt, std::vector<double>(range.local * c, 1e4));
      for (int64_t i = 0; i < range.valid * c; ++i) local.Set(i, wte.Get(range.begin * c + i));
      HostTensor part = HostTensor::Poisoned(dt, b * t * c);
      ASSERT_TRUE(EmbeddingForwardVocabRange(cpu_, part.data(), tokens.data(), local.data(), wpe.data(), b, t, c,
                                             range, v, dt)
                      .ok());
      const std::vector<double> p = part.Values();
      for (int64_t i = 0; i < b * t * c; ++i) {
        const bool mine = tokens[i / c] >= range.begin && tokens[i / c] < range.begin + range.valid;
        if (!mine) {
          ASSERT_EQ(p[i], 0.0) << "rank " << r << " element " << i;
        }
        sum[i] += p[i];
      }
    }
    ExpectBitwiseEqual(HostTensor::From(dt, sum), want, "sum over ranks");
  }
}

// Each rank's local gradient is its rows of EmbeddingBackward's, bitwise;
// padding rows are untouched; dwpe is EmbeddingBackward's on every rank.
TEST_P(VocabParallelTest, EmbeddingGradientsAreTheUnsplitGradientsRows) {
  const DType dt = GetParam();
  const int64_t b = 4, t = 6, c = 5, v = 10;
  std::vector<int32_t> tokens = rng_.Ints(b * t, 0, v);
  HostTensor dout = HostTensor::From(dt, rng_.Uniform(b * t * c, -1, 1));
  HostTensor dwte = HostTensor::From(dt, rng_.Uniform(v * c, -1, 1));
  HostTensor dwpe = HostTensor::From(dt, rng_.Uniform(t * c, -1, 1));
  HostTensor dwte0 = dwte, dwpe0 = dwpe;
  ASSERT_TRUE(EmbeddingBackward(cpu_, dwte.data(), dwpe.data(), dout.data(), tokens.data(), b, t, c, v, dt).ok());
  for (int tp : {1, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "tp " << tp);
    for (int r = 0; r < tp; ++r) {
      const VocabRange range = RangeOf(v, tp, r);
      HostTensor local = HostTensor::From(dt, std::vector<double>(range.local * c, 0.25));
      for (int64_t i = 0; i < range.valid * c; ++i) local.Set(i, dwte0.Get(range.begin * c + i));
      HostTensor pe = dwpe0;
      ASSERT_TRUE(EmbeddingBackwardVocabRange(cpu_, local.data(), pe.data(), dout.data(), tokens.data(), b, t, c,
                                              range, v, dt)
                      .ok());
      ExpectBitwiseEqual(Rows(local, c, 0, range.valid), Rows(dwte, c, range.begin, range.valid), "dwte rows");
      for (int64_t i = range.valid * c; i < range.local * c; ++i) ASSERT_EQ(local.Get(i), 0.25) << "padding " << i;
      ExpectBitwiseEqual(pe, dwpe, "dwpe");
      // dwpe may be skipped.
      ASSERT_TRUE(EmbeddingBackwardVocabRange(cpu_, local.data(), nullptr, dout.data(), tokens.data(), b, t, c, range,
                                              v, dt)
                      .ok());
    }
  }
}

// Row max, sums and target logits reduced over the ranks give
// CrossEntropyForward's loss and lse; the local gradients are its gradient's
// columns; padding columns are exactly 0 and never win the max.
TEST_P(VocabParallelTest, CrossEntropyPiecesReducedOverRanksMatchTheUnsplitLoss) {
  const DType dt = GetParam();
  const int64_t n = 9, v = 67;
  HostTensor z = HostTensor::From(dt, rng_.Uniform(n * v, -8, 8));
  std::vector<int32_t> targets = rng_.Ints(n, 0, v);
  targets[2] = -1;
  targets[5] = -100;  // ignored rows
  targets[6] = v - 1;
  targets[7] = 0;
  std::vector<float> want_losses(n), want_lse(n), want_sums(2);
  ASSERT_TRUE(CrossEntropyForward(cpu_, want_losses.data(), want_lse.data(), want_sums.data(), z.data(),
                                  targets.data(), n, v, dt)
                  .ok());
  const float dloss = 0.375f;
  HostTensor want_dz(dt, n * v);
  ASSERT_TRUE(
      CrossEntropyBackward(cpu_, want_dz.data(), z.data(), want_lse.data(), targets.data(), dloss, n, v, dt).ok());
  for (int tp : {1, 2, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "tp " << tp);
    const int64_t local = RangeOf(v, tp, 0).local;
    std::vector<HostTensor> z_local;
    std::vector<float> row_max(n, -INFINITY), sums(2 * n, 0.0f);
    for (int r = 0; r < tp; ++r) {
      const VocabRange range = RangeOf(v, tp, r);
      // Padding columns hold logits that would dominate the softmax.
      HostTensor zl = HostTensor::From(dt, std::vector<double>(n * local, 50.0));
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < range.valid; ++j) zl.Set(i * local + j, z.Get(i * v + range.begin + j));
      }
      std::vector<float> mx(n, NAN);
      ASSERT_TRUE(VocabParallelRowMax(cpu_, mx.data(), zl.data(), n, range, dt).ok());
      for (int64_t i = 0; i < n; ++i) row_max[i] = std::fmax(row_max[i], mx[i]);
      z_local.push_back(zl);
    }
    for (int r = 0; r < tp; ++r) {
      std::vector<float> s(2 * n, NAN);
      ASSERT_TRUE(VocabParallelSumExpAndTarget(cpu_, s.data(), z_local[r].data(), row_max.data(), targets.data(), n,
                                               RangeOf(v, tp, r), v, dt)
                      .ok());
      for (int64_t i = 0; i < 2 * n; ++i) sums[i] += s[i];
    }
    std::vector<float> losses(n, NAN), lse(n, NAN), loss_sums(2, NAN);
    ASSERT_TRUE(VocabParallelLoss(cpu_, losses.data(), lse.data(), loss_sums.data(), row_max.data(), sums.data(),
                                  targets.data(), n)
                    .ok());
    ExpectAllClose(std::vector<double>(losses.begin(), losses.end()),
                   std::vector<double>(want_losses.begin(), want_losses.end()), 1e-5, 1e-5, "losses");
    ExpectAllClose(std::vector<double>(lse.begin(), lse.end()), std::vector<double>(want_lse.begin(), want_lse.end()),
                   1e-5, 1e-6, "lse");
    EXPECT_EQ(losses[2], 0.0f);
    EXPECT_EQ(losses[5], 0.0f);
    EXPECT_NEAR(loss_sums[0], want_sums[0], 1e-5 * std::fabs(want_sums[0]));
    EXPECT_EQ(loss_sums[1], n - 2);
    for (int r = 0; r < tp; ++r) {
      const VocabRange range = RangeOf(v, tp, r);
      HostTensor dz = HostTensor::Poisoned(dt, n * local);
      ASSERT_TRUE(VocabParallelCrossEntropyBackward(cpu_, dz.data(), z_local[r].data(), lse.data(), targets.data(),
                                                    dloss, n, range, dt)
                      .ok());
      const HostTensor want_cols = Columns(want_dz, n, v, range.begin, range.valid);
      const HostTensor got_cols = Columns(dz, n, local, 0, range.valid);
      ExpectAllClose(got_cols.Values(), want_cols.Values(), 1e-7, 1e-5 + 2 * testing::Epsilon(dt), "dlogits");
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < local; ++j) {
          if (j >= range.valid || targets[i] < 0) {
            ASSERT_EQ(dz.Get(i * local + j), 0.0) << "row " << i << " col " << j;
          }
        }
      }
    }
  }
}

// One rank over the whole vocabulary (no padding): CrossEntropyForward's
// loss and CrossEntropyBackward's gradient bit for bit.
TEST_P(VocabParallelTest, TheWholeVocabularyIsTheUnsplitCrossEntropyBitwise) {
  const DType dt = GetParam();
  const int64_t n = 7, v = 301;
  HostTensor z = HostTensor::From(dt, rng_.Uniform(n * v, -8, 8));
  std::vector<int32_t> targets = rng_.Ints(n, 0, v);
  targets[3] = -1;
  std::vector<float> want_losses(n), want_lse(n), want_sums(2);
  ASSERT_TRUE(CrossEntropyForward(cpu_, want_losses.data(), want_lse.data(), want_sums.data(), z.data(),
                                  targets.data(), n, v, dt)
                  .ok());
  const VocabRange all{0, v, v};
  std::vector<float> row_max(n), sums(2 * n), losses(n), lse(n), loss_sums(2);
  ASSERT_TRUE(VocabParallelRowMax(cpu_, row_max.data(), z.data(), n, all, dt).ok());
  ASSERT_TRUE(VocabParallelSumExpAndTarget(cpu_, sums.data(), z.data(), row_max.data(), targets.data(), n, all, v, dt)
                  .ok());
  ASSERT_TRUE(VocabParallelLoss(cpu_, losses.data(), lse.data(), loss_sums.data(), row_max.data(), sums.data(),
                                targets.data(), n)
                  .ok());
  // The sum of exponentials is rounded to f32 before its log here (it is
  // what the ranks all-reduce), in f64 there: lse agrees to an f32 ulp.
  ExpectAllClose(std::vector<double>(lse.begin(), lse.end()), std::vector<double>(want_lse.begin(), want_lse.end()),
                 0, 3e-7, "lse");
  HostTensor want_dz(dt, n * v), dz(dt, n * v);
  ASSERT_TRUE(CrossEntropyBackward(cpu_, want_dz.data(), z.data(), want_lse.data(), targets.data(), 0.5f, n, v, dt).ok());
  ASSERT_TRUE(
      VocabParallelCrossEntropyBackward(cpu_, dz.data(), z.data(), want_lse.data(), targets.data(), 0.5f, n, all, dt)
          .ok());
  ExpectBitwiseEqual(dz, want_dz, "dlogits");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, VocabParallelTest, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         testing::DTypeParamName);

// A rank holding only padding (vocab 5 over tp 4: rank 3 holds rows 6-7):
// max -inf, sum of exponentials 0, no target, zero gradient.
TEST(VocabParallel, ARankOfPaddingOnlyContributesNothing) {
  const KernelContext cpu = KernelContext::Cpu();
  const VocabRange range = RangeOf(5, 4, 3);
  ASSERT_EQ(range.begin, 6);
  ASSERT_EQ(range.valid, 0);
  const int64_t n = 3;
  std::vector<float> z(n * range.local, 30.0f), row_max(n, NAN), sums(2 * n, NAN), dz(n * range.local, NAN);
  std::vector<int32_t> targets = {4, 0, -1};
  ASSERT_TRUE(VocabParallelRowMax(cpu, row_max.data(), z.data(), n, range, DType::kF32).ok());
  EXPECT_EQ(row_max, std::vector<float>(n, -INFINITY));
  const std::vector<float> global_max(n, 1.0f);
  ASSERT_TRUE(VocabParallelSumExpAndTarget(cpu, sums.data(), z.data(), global_max.data(), targets.data(), n, range, 5,
                                           DType::kF32)
                  .ok());
  EXPECT_EQ(sums, std::vector<float>(2 * n, 0.0f));
  const std::vector<float> lse(n, 2.0f);
  ASSERT_TRUE(VocabParallelCrossEntropyBackward(cpu, dz.data(), z.data(), lse.data(), targets.data(), 1.0f, n, range,
                                                DType::kF32)
                  .ok());
  EXPECT_EQ(dz, std::vector<float>(n * range.local, 0.0f));
  std::vector<int32_t> tokens = {4, 0, 3, 1};
  std::vector<float> wte(range.local * 2, 9.0f), wpe(4 * 2, 1.0f), out(4 * 2, NAN), dwte(range.local * 2, 0.5f);
  ASSERT_TRUE(EmbeddingForwardVocabRange(cpu, out.data(), tokens.data(), wte.data(), wpe.data(), 1, 4, 2, range, 5,
                                         DType::kF32)
                  .ok());
  EXPECT_EQ(out, std::vector<float>(8, 0.0f));
  ASSERT_TRUE(EmbeddingBackwardVocabRange(cpu, dwte.data(), nullptr, wpe.data(), tokens.data(), 1, 4, 2, range, 5,
                                          DType::kF32)
                  .ok());
  EXPECT_EQ(dwte, std::vector<float>(range.local * 2, 0.5f));
}

TEST(VocabParallel, TokensTargetsAndRangesAreChecked) {
  const KernelContext cpu = KernelContext::Cpu();
  std::vector<int32_t> tokens = {1, 7};  // 7 is padding in a vocabulary of 7 padded to 8
  std::vector<float> wte(4 * 2), wpe(2 * 2), out(2 * 2);
  absl::Status s = EmbeddingForwardVocabRange(cpu, out.data(), tokens.data(), wte.data(), wpe.data(), 1, 2, 2,
                                              VocabRange{4, 4, 3}, 7, DType::kF32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "EmbeddingForwardVocabRange: tokens[0, 1] = 7, expected in [0, 7)");
  tokens[1] = -2;
  s = EmbeddingBackwardVocabRange(cpu, wte.data(), nullptr, out.data(), tokens.data(), 1, 2, 2, VocabRange{4, 4, 3}, 7,
                                  DType::kF32);
  EXPECT_EQ(s.message(), "EmbeddingBackwardVocabRange: tokens[0, 1] = -2, expected in [0, 7)");
  std::vector<int32_t> targets = {-1, 7};
  std::vector<float> z(2 * 4), mx(2), sums(4);
  s = VocabParallelSumExpAndTarget(cpu, sums.data(), z.data(), mx.data(), targets.data(), 2, VocabRange{4, 4, 3}, 7,
                                   DType::kF32);
  EXPECT_EQ(s.message(), "VocabParallelSumExpAndTarget: targets[1] = 7, expected in [0, 7) or negative (ignored)");
  s = VocabParallelRowMax(cpu, mx.data(), z.data(), 2, VocabRange{4, 4, 5}, DType::kF32);
  EXPECT_EQ(s.message(),
            "VocabParallelRowMax: vocabulary range begin 4, local 4, valid 5, expected begin >= 0, local >= 1 and 0 "
            "<= valid <= local");
}

// Rows split over threads; every row computed the same way.
TEST(VocabParallel, BitwiseIdenticalForAnyThreadCount) {
  cpu::ScopedMinWorkPerThread force_threads(1);
  testing::Rng rng(testing::TestSeed());
  const int64_t b = 4, t = 16, c = 24, n = b * t, v = 50;
  const VocabRange range = RangeOf(v, 3, 1);
  std::vector<int32_t> tokens = rng.Ints(n, 0, v), targets = rng.Ints(n, 0, v);
  HostTensor dout = HostTensor::From(DType::kF32, rng.Uniform(n * c, -1, 1));
  HostTensor z = HostTensor::From(DType::kF32, rng.Uniform(n * range.local, -4, 4));
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2, 3, 5}) {
    const KernelContext cpu = KernelContext::Cpu(threads);
    HostTensor dwte = HostTensor::From(DType::kF32, std::vector<double>(range.local * c, 0.125));
    HostTensor dwpe = HostTensor::From(DType::kF32, std::vector<double>(t * c, 0.125));
    ASSERT_TRUE(EmbeddingBackwardVocabRange(cpu, dwte.data(), dwpe.data(), dout.data(), tokens.data(), b, t, c, range,
                                            v, DType::kF32)
                    .ok());
    std::vector<float> mx(n), sums(2 * n), lse(n), losses(n), dz(n * range.local);
    ASSERT_TRUE(VocabParallelRowMax(cpu, mx.data(), z.data(), n, range, DType::kF32).ok());
    ASSERT_TRUE(VocabParallelSumExpAndTarget(cpu, sums.data(), z.data(), mx.data(), targets.data(), n, range, v,
                                             DType::kF32)
                    .ok());
    ASSERT_TRUE(
        VocabParallelLoss(cpu, losses.data(), lse.data(), nullptr, mx.data(), sums.data(), targets.data(), n).ok());
    ASSERT_TRUE(VocabParallelCrossEntropyBackward(cpu, dz.data(), z.data(), lse.data(), targets.data(), 1.0f, n,
                                                  range, DType::kF32)
                    .ok());
    std::vector<double> all = dwte.Values();
    for (double x : dwpe.Values()) all.push_back(x);
    for (const auto* vec : {&mx, &sums, &lse, &losses, &dz}) all.insert(all.end(), vec->begin(), vec->end());
    results.push_back(all);
  }
  for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[i], results[0]) << "thread count #" << i;
}

}  // namespace
}  // namespace zeroshard::kernels
