#include "bench/single_rank/step_gemm_shapes.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// The listed GEMMs are exactly 3x the forward GEMM flops (backward = 2x forward).
TEST(StepGemmShapesTest, FlopsAreThreeTimesTheForward) {
  for (const Gpt2Config& cfg : {Gpt2Config{12, 12, 768, 50257, 1024}, Gpt2Config{2, 2, 16, 64, 8}}) {
    int64_t flops = 0;
    for (const GemmShape& g : Gpt2StepGemms(cfg, 4, 64)) flops += g.flops();
    EXPECT_EQ(flops, 3 * Gpt2ForwardGemmFlops(cfg, 4, 64));
  }
}

TEST(StepGemmShapesTest, Gpt2SmallForwardFlops) {
  // 2 * (12 * (256 * 12 * 768^2 + 2 * 4 * 64^2 * 768) + 256 * 768 * 50257)
  EXPECT_EQ(Gpt2ForwardGemmFlops(Gpt2Config{12, 12, 768, 50257, 1024}, 4, 64), 2 * (12 * (INT64_C(1811939328) + 25165824) + INT64_C(9880928256)));
}

}  // namespace
}  // namespace zeroshard
