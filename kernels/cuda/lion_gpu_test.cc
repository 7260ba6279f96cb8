// The Lion update on CUDA against the CPU on the same random inputs.
// Tolerance: none. Both devices do the same IEEE f32 operations per element
// (kernels/lion_math.h, no FMA contraction), so parameters and momentum
// must be bitwise equal after several steps. Skips (with the reason) when
// there is no usable GPU or no CUDA build.
#include <cstring>
#include <vector>

#include "core/device.h"
#include "gtest/gtest.h"
#include "kernels/lion.h"
#include "kernels/testing/device_array.h"
#include "kernels/testing/gpu_test_base.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels {
namespace {

#ifndef ZEROSHARD_HAS_CUDA

TEST(LionGpu, Skipped) { GTEST_SKIP() << "built without CUDA (--//bazel:cuda=false or no nvcc)"; }

#else

using testing::DeviceArray;

class LionGpuTest : public testing::GpuTestBase<> {};

TEST_F(LionGpuTest, MatchesCpuBitwise) {
  testing::Rng rng(testing::TestSeed());
  const int64_t n = (1 << 20) + 7;
  std::vector<double> p0 = rng.Uniform(n, -1, 1);
  std::vector<float> p(p0.begin(), p0.end()), m(n, 0.0f);
  DeviceArray gp(p), gm(m);
  for (int step = 0; step < 4; ++step) {
    std::vector<double> g0 = rng.Uniform(n, -1, 1);
    std::vector<float> g(g0.begin(), g0.end());
    for (int64_t i = 0; i < n; i += 101) g[i] = 0.0f;
    DeviceArray gg(g);
    const LionHyper h{1e-3f, 0.9f, 0.99f, 0.1f};
    ASSERT_TRUE(LionUpdate(cpu_, p.data(), g.data(), m.data(), n, h).ok());
    ASSERT_TRUE(LionUpdate(gpu_, gp.as<float>(), gg.as<float>(), gm.as<float>(), n, h).ok());
    Sync();
  }
  const std::vector<unsigned char> want_p(reinterpret_cast<unsigned char*>(p.data()),
                                          reinterpret_cast<unsigned char*>(p.data() + n));
  const std::vector<unsigned char> want_m(reinterpret_cast<unsigned char*>(m.data()),
                                          reinterpret_cast<unsigned char*>(m.data() + n));
  EXPECT_TRUE(gp.Bytes() == want_p) << "param differs";
  EXPECT_TRUE(gm.Bytes() == want_m) << "exp_avg differs";
}

#endif  // ZEROSHARD_HAS_CUDA

}  // namespace
}  // namespace zeroshard::kernels
