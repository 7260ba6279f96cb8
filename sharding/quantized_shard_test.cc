#include "sharding/quantized_shard.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// A LayerNorm-like unit: gain (8), bias (8), weight (50) = 66 elements,
// padded to 96 over dp 2 (shards of 48 at alignment 16).
FlatParamLayout Unit() {
  return *FlatParamLayout::Create("u", 0, {{"ln.weight", {8}}, {"ln.bias", {8}}, {"w", {5, 10}}}, 2);
}

TEST(QuantizationRuns, CutAtParameterBordersAndPadding) {
  const FlatParamLayout l = Unit();
  ASSERT_EQ(l.shard_numel(), 48);
  EXPECT_EQ(QuantizationRuns(l, 0), (std::vector<int64_t>{8, 8, 32}));  // w's first 32
  EXPECT_EQ(QuantizationRuns(l, 1), (std::vector<int64_t>{18, 30}));    // w's last 18, then padding
  const FlatParamLayout empty = *FlatParamLayout::Create("e", 0, {}, 2);
  EXPECT_TRUE(QuantizationRuns(empty, 0).empty());
}

TEST(QuantizationRuns, PackedBytesPerRunAndTheLargestRank) {
  const FlatParamLayout l = Unit();
  // Rank 0: 3 runs of 8, 8, 32 values (each a multiple of 4) + 3 scales.
  EXPECT_EQ(PackedShardBytes(QuantizationRuns(l, 0), 32), 8 + 8 + 32 + 3 * 4);
  // Rank 1: 18 -> 20 bytes + 1 scale, 30 -> 32 bytes + 1 scale.
  EXPECT_EQ(PackedShardBytes(QuantizationRuns(l, 1), 32), 20 + 4 + 32 + 4);
  EXPECT_EQ(MaxPackedShardBytes(l, 32), 60);
  // Block 4: the 32-run takes 8 scales.
  EXPECT_EQ(PackedShardBytes({32}, 4), 32 + 8 * 4);
}

TEST(QuantizeShard, EveryParameterKeepsItsOwnScale) {
  const FlatParamLayout l = Unit();
  const std::vector<int64_t> runs = QuantizationRuns(l, 0);
  std::vector<float> shard(48);
  for (int i = 0; i < 8; ++i) shard[i] = 1.0f + 0.01f * i;             // gains near 1
  for (int i = 8; i < 16; ++i) shard[i] = 1e-3f * (i - 12);            // small biases
  for (int i = 16; i < 48; ++i) shard[i] = 0.02f * std::sin(1.0f * i);  // weights
  const auto ctx = kernels::KernelContext::Cpu(1);
  std::vector<char> packed(PackedShardBytes(runs, 2048));
  ASSERT_TRUE(QuantizeShard(ctx, packed.data(), shard.data(), DType::kF32, runs, 2048,
                            kernels::NonFiniteInput::kReject)
                  .ok());
  std::vector<float> out(48, -1.0f);
  ASSERT_TRUE(DequantizeShard(ctx, out.data(), DType::kF32, packed.data(), runs, 2048).ok());
  // Each run's error is within half its own scale (amax / 254), so the
  // biases are resolved to 4e-3 / 254, not to the gains' 1.07 / 254.
  const int64_t begin[] = {0, 8, 16}, end[] = {8, 16, 48};
  for (int r = 0; r < 3; ++r) {
    double amax = 0;
    for (int64_t i = begin[r]; i < end[r]; ++i) amax = std::max(amax, std::fabs(static_cast<double>(shard[i])));
    for (int64_t i = begin[r]; i < end[r]; ++i) {
      EXPECT_LE(std::fabs(out[i] - shard[i]), amax / 254 * (1 + 1e-6)) << "element " << i;
    }
  }
  // Accumulating adds the same values.
  std::vector<float> acc(48, 1.0f);
  ASSERT_TRUE(DequantizeShardAccumulate(ctx, acc.data(), packed.data(), runs, 2048).ok());
  for (int i = 0; i < 48; ++i) EXPECT_FLOAT_EQ(acc[i], 1.0f + out[i]);
}

TEST(QuantizeShard, ResidualAdvancesWithTheRuns) {
  const std::vector<int64_t> runs = {3, 5};
  std::vector<float> x = {0.5f, -0.25f, 0.125f, 3.0f, 1.0f, -1.0f, 0.3f, 0.7f};
  std::vector<float> residual(8, 0.0f);
  std::vector<char> packed(PackedShardBytes(runs, 32));
  const auto ctx = kernels::KernelContext::Cpu(1);
  ASSERT_TRUE(QuantizeShard(ctx, packed.data(), x.data(), DType::kF32, runs, 32, kernels::NonFiniteInput::kReject,
                            residual.data())
                  .ok());
  std::vector<float> out(8);
  ASSERT_TRUE(DequantizeShard(ctx, out.data(), DType::kF32, packed.data(), runs, 32).ok());
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(residual[i], x[i] - out[i]) << i;
}

}  // namespace
}  // namespace zeroshard
