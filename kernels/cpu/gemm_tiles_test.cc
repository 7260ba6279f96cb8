#include "kernels/cpu/gemm_tiles.h"

#include <vector>

#include "gtest/gtest.h"

namespace zeroshard::kernels::cpu {
namespace {

// The tiles cover C exactly once, each within bounds.
void ExpectCovers(const GemmTiles& t, int64_t m, int64_t n) {
  ASSERT_GE(t.row_tiles, 1);
  ASSERT_GE(t.col_tiles, 1);
  EXPECT_GE(t.row_block * t.row_tiles, m);
  EXPECT_LT(t.row_block * (t.row_tiles - 1), m);
  EXPECT_GE(t.col_block * t.col_tiles, n);
  EXPECT_LT(t.col_block * (t.col_tiles - 1), n);
}

TEST(GemmTiles, SmallProductsAreOneCall) {
  const GemmTiles t = PlanGemmTiles(64, 64, 64);
  EXPECT_EQ(t.count(), 1);
  EXPECT_EQ(t.row_block, 64);
  EXPECT_EQ(t.col_block, 64);
  // Enough work but both sides below two minimum blocks: still one call.
  EXPECT_EQ(PlanGemmTiles(200, 200, 100000).count(), 1);
}

// GPT-2 124M shapes at 256 tokens: the longer side of C is halved while
// its blocks keep kMinBlock, up to the work's budget.
TEST(GemmTiles, Gpt2ShapesSplitTheLongerSide) {
  GemmTiles qkv = PlanGemmTiles(256, 2304, 768);  // 8 blocks of 288 columns; 128 rows would be too short
  EXPECT_EQ(qkv.row_tiles, 1);
  EXPECT_EQ(qkv.col_tiles, 8);
  EXPECT_EQ(qkv.col_block, 288);
  EXPECT_EQ(qkv.row_block, 256);
  ExpectCovers(qkv, 256, 2304);

  GemmTiles proj = PlanGemmTiles(256, 768, 768);  // work for 32, but 192 columns are too short
  EXPECT_EQ(proj.count(), 2);
  EXPECT_EQ(proj.col_block, 384);
  ExpectCovers(proj, 256, 768);

  // 9.9G multiply-adds: kMaxTiles row blocks; 800 rows (aligned) would
  // make 63 tiles, so the blocks stay 786.
  GemmTiles head_dw = PlanGemmTiles(50257, 768, 256);
  EXPECT_EQ(head_dw.row_tiles, kMaxTiles);
  EXPECT_EQ(head_dw.col_tiles, 1);
  EXPECT_EQ(head_dw.row_block, 786);
  ExpectCovers(head_dw, 50257, 768);

  // The vocabulary side likewise, for the logits.
  GemmTiles head = PlanGemmTiles(256, 50257, 768);
  EXPECT_EQ(head.col_tiles, kMaxTiles);
  ExpectCovers(head, 256, 50257);
}

TEST(GemmTiles, TileCountFollowsWorkAndIsAPowerOfTwo) {
  for (int64_t k : {1, 16, 64, 256, 4096}) {
    for (int64_t m : {1, 127, 128, 300, 1000, 5000}) {
      for (int64_t n : {1, 200, 513, 2048, 60000}) {
        SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k);
        const GemmTiles t = PlanGemmTiles(m, n, k);
        ExpectCovers(t, m, n);
        EXPECT_LE(t.count(), kMaxTiles);
        EXPECT_EQ(t.row_tiles & (t.row_tiles - 1), 0);
        EXPECT_EQ(t.col_tiles & (t.col_tiles - 1), 0);
        if (t.count() > 1) {
          EXPECT_GE(static_cast<double>(m) * n * k / t.count(), static_cast<double>(kMinTileMacs));
        }
        if (t.row_tiles > 1) {
          EXPECT_GE(m / t.row_tiles, kMinBlock);
        }
        if (t.col_tiles > 1) {
          EXPECT_GE(n / t.col_tiles, kMinBlock);
        }
      }
    }
  }
}

TEST(GemmTiles, HugeShapesDoNotOverflow) {
  const GemmTiles t = PlanGemmTiles(int64_t{1} << 30, int64_t{1} << 30, int64_t{1} << 30);
  EXPECT_EQ(t.count(), kMaxTiles);
  ExpectCovers(t, int64_t{1} << 30, int64_t{1} << 30);
}

}  // namespace
}  // namespace zeroshard::kernels::cpu
