// The vocabulary-parallel CUDA kernels against their CPU versions on the
// same random inputs (a rank's range with padding, and a rank of padding
// only). Skips (with the reason) when there is no usable GPU or no CUDA
// build. Tolerances |gpu - cpu| <= atol + rtol * |cpu| are stated per check:
// lookups and masks are exact, reductions differ in summation order.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "gtest/gtest.h"
#include "kernels/testing/device_array.h"
#include "kernels/testing/gpu_test_base.h"
#include "kernels/testing/kernel_test_util.h"
#include "kernels/vocab_parallel.h"

#ifdef ZEROSHARD_HAS_CUDA
#include "kernels/cuda/cuda_resources.h"
#endif

namespace zeroshard::kernels {
namespace {

using testing::ExpectAllClose;
using testing::HostTensor;

#ifndef ZEROSHARD_HAS_CUDA

TEST(VocabParallelGpu, Skipped) { GTEST_SKIP() << "built without CUDA (--//bazel:cuda=false or no nvcc)"; }

#else

using testing::DeviceArray;

std::vector<double> Doubles(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

class VocabParallelGpuTest : public testing::GpuTestBase<::testing::TestWithParam<DType>> {
 protected:
  testing::Rng rng_{testing::TestSeed()};
};

// Vocabulary 67 over tp 4: rank 3 holds rows 51..67, the last one padding.
constexpr int64_t kVocab = 67;
constexpr VocabRange kLastRank{51, 17, 16};
constexpr VocabRange kPaddingOnly{6, 2, 0};  // vocabulary 5 over tp 4, rank 3

TEST_P(VocabParallelGpuTest, Embedding) {
  const DType dt = GetParam();
  const int64_t b = 3, t = 9, c = 70;
  for (const VocabRange range : {kLastRank, VocabRange{0, kVocab, kVocab}}) {
    SCOPED_TRACE(::testing::Message() << "range begin " << range.begin);
    std::vector<int32_t> tokens = rng_.Ints(b * t, 0, kVocab);
    tokens[0] = range.begin + range.valid - 1;  // the range holds at least one
    HostTensor wte = HostTensor::From(dt, rng_.Uniform(range.local * c, -1, 1));
    HostTensor wpe = HostTensor::From(dt, rng_.Uniform(t * c, -1, 1));
    HostTensor out = HostTensor::Poisoned(dt, b * t * c), dout = HostTensor::From(dt, rng_.Uniform(b * t * c, -1, 1));
    HostTensor dwte = HostTensor::From(dt, rng_.Uniform(range.local * c, -1, 1));
    HostTensor dwpe = HostTensor::From(dt, rng_.Uniform(t * c, -1, 1));
    DeviceArray gtok(tokens), gwte(wte), gwpe(wpe), gout(out), gdout(dout), gdwte(dwte), gdwpe(dwpe);
    ASSERT_TRUE(EmbeddingForwardVocabRange(cpu_, out.data(), tokens.data(), wte.data(), wpe.data(), b, t, c, range,
                                           kVocab, dt)
                    .ok());
    ASSERT_TRUE(EmbeddingForwardVocabRange(gpu_, gout.get(), gtok.as<int32_t>(), gwte.get(), gwpe.get(), b, t, c,
                                           range, kVocab, dt)
                    .ok());
    ASSERT_TRUE(EmbeddingBackwardVocabRange(cpu_, dwte.data(), dwpe.data(), dout.data(), tokens.data(), b, t, c,
                                            range, kVocab, dt)
                    .ok());
    ASSERT_TRUE(EmbeddingBackwardVocabRange(gpu_, gdwte.get(), gdwpe.get(), gdout.get(), gtok.as<int32_t>(), b, t, c,
                                            range, kVocab, dt)
                    .ok());
    Sync();
    ExpectAllClose(gout.Fetch(dt), out.Values(), 0, 0, "out");  // one rounding of the same f32 sum, or 0
    // GPU rounds after every scattered add for half types; CPU once per token.
    const double tol = 1e-5 + 16 * testing::Epsilon(dt);
    ExpectAllClose(gdwte.Fetch(dt), dwte.Values(), tol, tol, "dwte");
    ExpectAllClose(gdwpe.Fetch(dt), dwpe.Values(), tol, tol, "dwpe");
  }
}

TEST_P(VocabParallelGpuTest, CrossEntropyPieces) {
  const DType dt = GetParam();
  const int64_t n = 19;
  for (const VocabRange range : {kLastRank, VocabRange{0, 5003, 5003}, kPaddingOnly}) {
    SCOPED_TRACE(::testing::Message() << "range begin " << range.begin << " local " << range.local);
    const int64_t vocab = range.valid > 0 ? range.begin + range.valid : 5;  // the real vocabulary
    HostTensor z = HostTensor::From(dt, rng_.Uniform(n * range.local, -6, 6));
    std::vector<int32_t> targets = rng_.Ints(n, 0, static_cast<int32_t>(vocab));
    for (int64_t r : {0, 7, 8, 18}) targets[r] = -100;  // ignored rows
    if (range.valid > 0) targets[3] = static_cast<int32_t>(range.begin);  // a target this range holds
    std::vector<float> mx(n, NAN), sums(2 * n, NAN), losses(n, NAN), lse(n, NAN), loss_sums(2, NAN);
    HostTensor dz = HostTensor::Poisoned(dt, n * range.local);
    DeviceArray gz(z), gtargets(targets), gmx(mx), gsums(sums), glosses(losses), glse(lse), gloss_sums(loss_sums),
        gdz(dz);
    ASSERT_TRUE(VocabParallelRowMax(cpu_, mx.data(), z.data(), n, range, dt).ok());
    ASSERT_TRUE(VocabParallelRowMax(gpu_, gmx.as<float>(), gz.get(), n, range, dt).ok());
    Sync();
    const std::vector<double> gpu_mx = gmx.Fetch(DType::kF32);
    EXPECT_EQ(gpu_mx, Doubles(mx));  // exact (-inf for a rank of padding): a max of the same values
    // The rest from the CPU's max (the all-reduced one would be the same on both).
    DeviceArray gmx_cpu(mx);
    ASSERT_TRUE(
        VocabParallelSumExpAndTarget(cpu_, sums.data(), z.data(), mx.data(), targets.data(), n, range, vocab, dt).ok());
    ASSERT_TRUE(VocabParallelSumExpAndTarget(gpu_, gsums.as<float>(), gz.get(), gmx_cpu.as<float>(),
                                             gtargets.as<int32_t>(), n, range, vocab, dt)
                    .ok());
    if (range.valid == 0) {
      // exp(-inf - max) and no columns: the sums are 0; give the loss a real max.
      for (float& m : mx) m = 1.0f;
      for (int64_t r = 0; r < n; ++r) sums[r] = 2.0f;
    }
    DeviceArray gmx_loss(mx), gsums_loss(sums);
    ASSERT_TRUE(VocabParallelLoss(cpu_, losses.data(), lse.data(), loss_sums.data(), mx.data(), sums.data(),
                                  targets.data(), n)
                    .ok());
    ASSERT_TRUE(VocabParallelLoss(gpu_, glosses.as<float>(), glse.as<float>(), gloss_sums.as<float>(),
                                  gmx_loss.as<float>(), gsums_loss.as<float>(), gtargets.as<int32_t>(), n)
                    .ok());
    DeviceArray glse_cpu(lse);
    ASSERT_TRUE(VocabParallelCrossEntropyBackward(cpu_, dz.data(), z.data(), lse.data(), targets.data(), 0.125f, n,
                                                  range, dt)
                    .ok());
    ASSERT_TRUE(VocabParallelCrossEntropyBackward(gpu_, gdz.get(), gz.get(), glse_cpu.as<float>(),
                                                  gtargets.as<int32_t>(), 0.125f, n, range, dt)
                    .ok());
    Sync();
    const std::vector<double> gpu_sums = gsums.Fetch(DType::kF32);
    if (range.valid > 0) ExpectAllClose(gpu_sums, Doubles(std::vector<float>(sums)), 1e-6, 1e-5, "sums");
    if (range.valid == 0) {
      EXPECT_EQ(gpu_sums, std::vector<double>(2 * n, 0.0));
    }
    ExpectAllClose(glosses.Fetch(DType::kF32), Doubles(losses), 1e-6, 1e-6, "losses");
    ExpectAllClose(glse.Fetch(DType::kF32), Doubles(lse), 1e-6, 1e-6, "lse");
    const std::vector<double> gpu_loss_sums = gloss_sums.Fetch(DType::kF32);
    ExpectAllClose({gpu_loss_sums[0]}, {loss_sums[0]}, 1e-5, 1e-5, "loss sum");
    EXPECT_EQ(gpu_loss_sums[1], n - 4);  // the count is exact
    const std::vector<double> gpu_dz = gdz.Fetch(dt);
    ExpectAllClose(gpu_dz, dz.Values(), 1e-7 + 2 * testing::Epsilon(dt), 1e-5 + 2 * testing::Epsilon(dt), "dlogits");
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t j = 0; j < range.local; ++j) {
        if (targets[r] < 0 || j >= range.valid) {
          ASSERT_EQ(gpu_dz[r * range.local + j], 0.0) << r << ", " << j;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, VocabParallelGpuTest, ::testing::Values(DType::kF32, DType::kBF16),
                         testing::DTypeParamName);

#endif  // ZEROSHARD_HAS_CUDA

}  // namespace
}  // namespace zeroshard::kernels
