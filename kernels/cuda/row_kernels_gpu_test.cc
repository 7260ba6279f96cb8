// The row kernels' CUDA paths against their CPU versions: LayerNorm with the
// row in registers (C <= 1024) and the loop fallback (C > 1024), the one-pass
// cross-entropy forward, and the sorted embedding backward (hot token, first
// and last token, run-to-run bits). Skips (with the reason) when there is no
// usable GPU or no CUDA build. Tolerances are mixed, |gpu - cpu| <= atol +
// rtol * |cpu|: the devices sum in different orders, so they agree to f32
// rounding of the sums plus one rounding of the output for bf16.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"
#include "kernels/testing/device_array.h"
#include "kernels/testing/gpu_test_base.h"
#include "kernels/testing/kernel_test_util.h"

#ifdef ZEROSHARD_HAS_CUDA
#include "kernels/cuda/cuda_resources.h"
#endif

namespace zeroshard::kernels {
namespace {

#ifndef ZEROSHARD_HAS_CUDA

TEST(RowKernelsGpu, Skipped) { GTEST_SKIP() << "built without CUDA (--//bazel:cuda=false or no nvcc)"; }

#else

using testing::DeviceArray;
using testing::ExpectAllClose;
using testing::HostTensor;

std::vector<double> Doubles(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

std::vector<unsigned char> BytesOf(const HostTensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data());
  return std::vector<unsigned char>(p, p + t.size() * DTypeSize(t.dtype()));
}

class RowKernelsGpuTest : public testing::GpuTestBase<::testing::Test>, public ::testing::WithParamInterface<DType> {
 protected:
  std::vector<double> Fetch(const DeviceArray& d, DType dtype, int64_t n) {
    HostTensor t(dtype, n);
    d.CopyTo(t);
    return t.Values();
  }
  double Tol(double f32_tol) const { return f32_tol + 2 * testing::Epsilon(GetParam()); }
  testing::Rng rng_{testing::TestSeed()};
};

// C = 8 (lanes 8..31 idle), 64, 128, 512 (2, 4 and 16 per lane), 200 (8
// per lane, partly idle), 768 (24 per lane, exact), 1000 (32 per lane, not
// a multiple of 32) and 1536 (loop kernels); 37 rows leave a partial block.
TEST_P(RowKernelsGpuTest, LayerNormMatchesCpu) {
  const DType dt = GetParam();
  const int64_t n = 37;
  for (int64_t c : {8, 64, 128, 200, 512, 768, 1000, 1536}) {
    SCOPED_TRACE(::testing::Message() << "C = " << c);
    HostTensor x = HostTensor::From(dt, rng_.Uniform(n * c, -2, 2));
    HostTensor w = HostTensor::From(dt, rng_.Uniform(c, 0.5, 1.5)), b = HostTensor::From(dt, rng_.Uniform(c, -1, 1));
    HostTensor dy = HostTensor::From(dt, rng_.Uniform(n * c, -1, 1));
    HostTensor dw0 = HostTensor::From(dt, rng_.Uniform(c, -1, 1)), db0 = HostTensor::From(dt, rng_.Uniform(c, -1, 1));
    const HostTensor nan_nc = HostTensor::Poisoned(dt, n * c);
    HostTensor y = nan_nc, dx = nan_nc, dw = dw0, db = db0;
    std::vector<float> mean(n, NAN), rstd(n, NAN);
    DeviceArray gx(x), gw(w), gb(b), gdy(dy), gy(nan_nc), gmean(mean), grstd(rstd);
    ASSERT_TRUE(
        LayerNormForward(cpu_, y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c, 1e-5f, dt)
            .ok());
    ASSERT_TRUE(LayerNormForward(gpu_, gy.get(), gmean.as<float>(), grstd.as<float>(), gx.get(), gw.get(), gb.get(), n,
                                 c, 1e-5f, dt)
                    .ok());
    ASSERT_TRUE(LayerNormBackward(cpu_, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                                  rstd.data(), n, c, dt)
                    .ok());
    // The CPU's mean and rstd, so both devices differentiate the same forward.
    DeviceArray cmean(mean), crstd(rstd), gdx(nan_nc), gdw(dw0), gdb(db0), in_dx(nan_nc);
    ASSERT_TRUE(LayerNormBackward(gpu_, gdx.get(), gdw.get(), gdb.get(), gdy.get(), gx.get(), gw.get(),
                                  cmean.as<float>(), crstd.as<float>(), n, c, dt)
                    .ok());
    ASSERT_TRUE(LayerNormBackward(gpu_, in_dx.get(), nullptr, nullptr, gdy.get(), gx.get(), gw.get(),
                                  cmean.as<float>(), crstd.as<float>(), n, c, dt)
                    .ok());
    Sync();
    ExpectAllClose(Fetch(gy, dt, n * c), y.Values(), Tol(1e-5), Tol(1e-5), "out");
    ExpectAllClose(gmean.ToDoubles<float>(), Doubles(mean), 1e-6, 1e-5, "mean");
    ExpectAllClose(grstd.ToDoubles<float>(), Doubles(rstd), 0, 1e-5, "rstd");
    ExpectAllClose(Fetch(gdx, dt, n * c), dx.Values(), Tol(1e-4), Tol(1e-4), "dinp");
    ExpectAllClose(Fetch(gdw, dt, c), dw.Values(), Tol(1e-4), Tol(1e-4), "dweight");
    ExpectAllClose(Fetch(gdb, dt, c), db.Values(), Tol(1e-4), Tol(1e-4), "dbias");
    EXPECT_EQ(Fetch(in_dx, dt, n * c), Fetch(gdx, dt, n * c)) << "dinp-only call differs from the full call";
  }
}

// Vocabularies below one block step, not a multiple of the block size, one
// past a chunk and GPT-2's; rows with ignored targets, ascending logits (the
// running max grows at every chunk), a large logit last, and a masked (-inf)
// first half.
TEST_P(RowKernelsGpuTest, CrossEntropyForwardMatchesCpu) {
  const DType dt = GetParam();
  const int64_t n = 11;
  const std::vector<int64_t> ignored = {1, 6, 10};
  for (int64_t v : {3, 1000, 2049, 50257}) {
    SCOPED_TRACE(::testing::Message() << "V = " << v);
    std::vector<double> values = rng_.Uniform(n * v, -6, 6);
    for (int64_t j = 0; j < v; ++j) values[2 * v + j] = -6.0 + 12.0 * j / v;  // row 2: ascending
    values[3 * v + v - 1] = 20.0;                                             // row 3: large last logit
    for (int64_t j = 0; j < v / 2; ++j) values[4 * v + j] = -std::numeric_limits<double>::infinity();  // row 4
    HostTensor z = HostTensor::From(dt, values);
    std::vector<int32_t> targets = rng_.Ints(n, 0, static_cast<int32_t>(v));
    targets[4] = static_cast<int32_t>(v - 1);  // a finite logit of the masked row
    targets[ignored[0]] = -100;
    targets[ignored[1]] = -1;
    targets[ignored[2]] = -7;
    std::vector<float> losses(n, NAN), lse(n, NAN), sums(2, NAN);
    DeviceArray gz(z), gtargets(targets), glosses(losses), glse(lse), gsums(sums);
    ASSERT_TRUE(
        CrossEntropyForward(cpu_, losses.data(), lse.data(), sums.data(), z.data(), targets.data(), n, v, dt).ok());
    ASSERT_TRUE(CrossEntropyForward(gpu_, glosses.as<float>(), glse.as<float>(), gsums.as<float>(), gz.get(),
                                    gtargets.as<int32_t>(), n, v, dt)
                    .ok());
    Sync();
    const std::vector<double> gpu_losses = glosses.ToDoubles<float>();
    ExpectAllClose(gpu_losses, Doubles(losses), 1e-5, 1e-5, "losses");
    ExpectAllClose(glse.ToDoubles<float>(), Doubles(lse), 1e-5, 1e-5, "lse");
    for (int64_t r : ignored) EXPECT_EQ(gpu_losses[r], 0.0) << "ignored row " << r;
    const std::vector<double> gpu_sums = gsums.ToDoubles<float>();
    ExpectAllClose({gpu_sums[0]}, {sums[0]}, 1e-5, 1e-5, "loss sum");
    EXPECT_EQ(gpu_sums[1], static_cast<double>(n - static_cast<int64_t>(ignored.size())));
  }
}

// Tokens for the embedding tests: most positions `hot`, the rest random,
// with 0 and vocab - 1 present.
std::vector<int32_t> HotTokens(testing::Rng& rng, int64_t n, int32_t vocab, int32_t hot) {
  std::vector<int32_t> tokens = rng.Ints(n, 0, vocab);
  const std::vector<double> coin = rng.Uniform(n, 0, 1);
  for (int64_t i = 0; i < n; ++i) {
    if (coin[i] < 0.7) tokens[i] = hot;
  }
  tokens[3] = 0;
  tokens[n / 2] = vocab - 1;
  tokens[n - 1] = 0;
  return tokens;
}

// dwte is accumulated. Each token's positions are summed in (b,t) order from
// 0 in f32 and added once, as on the CPU, so dwte matches bit for bit;
// dwpe to the tolerance of kernels_gpu_test. C = 600 makes the threads
// stride over channels.
TEST_P(RowKernelsGpuTest, EmbeddingBackwardMatchesCpu) {
  const DType dt = GetParam();
  const int64_t b = 4, t = 97, c = 600;
  const int32_t v = 301;
  const std::vector<int32_t> tokens = HotTokens(rng_, b * t, v, 17);
  HostTensor dout = HostTensor::From(dt, rng_.Uniform(b * t * c, -1, 1));
  HostTensor dwte = HostTensor::From(dt, rng_.Uniform(v * c, -1, 1));
  HostTensor dwpe = HostTensor::From(dt, rng_.Uniform(t * c, -1, 1));
  DeviceArray gtok(tokens), gdout(dout), gdwte(dwte), gdwpe(dwpe), gdwte_only(dwte);
  ASSERT_TRUE(EmbeddingBackward(cpu_, dwte.data(), dwpe.data(), dout.data(), tokens.data(), b, t, c, v, dt).ok());
  ASSERT_TRUE(EmbeddingBackward(gpu_, gdwte.get(), gdwpe.get(), gdout.get(), gtok.as<int32_t>(), b, t, c, v, dt).ok());
  ASSERT_TRUE(
      EmbeddingBackward(gpu_, gdwte_only.get(), nullptr, gdout.get(), gtok.as<int32_t>(), b, t, c, v, dt).ok());
  Sync();
  ExpectAllClose(Fetch(gdwte, dt, v * c), dwte.Values(), 0, 0, "dwte");
  ExpectAllClose(Fetch(gdwte_only, dt, v * c), dwte.Values(), 0, 0, "dwte (dwpe null)");
  const double tol = 1e-5 + 16 * testing::Epsilon(dt);
  ExpectAllClose(Fetch(gdwpe, dt, t * c), dwpe.Values(), tol, tol, "dwpe");
}

// Two runs from the same start give the same bytes (sorted order, no atomics).
TEST_P(RowKernelsGpuTest, EmbeddingBackwardIsRunToRunDeterministic) {
  const DType dt = GetParam();
  const int64_t b = 8, t = 256, c = 768;
  const int32_t v = 5000;
  const std::vector<int32_t> tokens = HotTokens(rng_, b * t, v, v / 2);
  HostTensor dout = HostTensor::From(dt, rng_.Uniform(b * t * c, -1, 1));
  HostTensor dwte0 = HostTensor::From(dt, rng_.Uniform(v * c, -1, 1));
  HostTensor dwpe0 = HostTensor::From(dt, rng_.Uniform(t * c, -1, 1));
  DeviceArray gtok(tokens), gdout(dout);
  std::vector<std::vector<unsigned char>> wte_runs, wpe_runs;
  for (int run = 0; run < 3; ++run) {
    DeviceArray dwte(dwte0), dwpe(dwpe0);
    ASSERT_TRUE(EmbeddingBackward(gpu_, dwte.get(), dwpe.get(), gdout.get(), gtok.as<int32_t>(), b, t, c, v, dt).ok());
    Sync();
    wte_runs.push_back(dwte.Bytes());
    wpe_runs.push_back(dwpe.Bytes());
  }
  EXPECT_NE(wte_runs[0], BytesOf(dwte0)) << "dwte unchanged";
  for (int run = 1; run < 3; ++run) {
    EXPECT_EQ(wte_runs[run], wte_runs[0]) << "dwte, run " << run;
    EXPECT_EQ(wpe_runs[run], wpe_runs[0]) << "dwpe, run " << run;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RowKernelsGpuTest, ::testing::Values(DType::kF32, DType::kBF16),
                         testing::DTypeParamName);

#endif  // ZEROSHARD_HAS_CUDA

}  // namespace
}  // namespace zeroshard::kernels
