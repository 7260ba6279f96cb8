#include "sharding/flat_param_layout.h"

#include <random>
#include <vector>

#include "core/testing/test_seed.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(FlatParamLayoutTest, HandComputedStraddlingLayout) {
  // N = 12 + 5 + 3 = 20; dp = 3, alignment 4 -> S = 8, P = 24.
  auto layout = FlatParamLayout::Create("block", 2, {{"w", {3, 4}}, {"b", {5}}, {"g", {3}}}, 3, 4);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->numel(), 20);
  EXPECT_EQ(layout->shard_numel(), 8);
  EXPECT_EQ(layout->padded_numel(), 24);
  EXPECT_EQ(layout->padding(), 4);
  EXPECT_EQ(layout->params()[1].offset, 12);
  EXPECT_EQ(layout->params()[2].offset, 17);
  // Rank 0: w[0,8).
  EXPECT_THAT(layout->SegmentsForRank(0), ::testing::ElementsAre(ShardSegment{0, 0, 0, 8}));
  // Rank 1: w[8,12) then b[0,4).
  EXPECT_THAT(layout->SegmentsForRank(1),
              ::testing::ElementsAre(ShardSegment{0, 8, 0, 4}, ShardSegment{1, 0, 4, 4}));
  // Rank 2: b[4,5), g[0,3), then 4 padding elements.
  EXPECT_THAT(layout->SegmentsForRank(2),
              ::testing::ElementsAre(ShardSegment{1, 4, 0, 1}, ShardSegment{2, 0, 1, 3}));
}

TEST(FlatParamLayoutTest, RandomLayoutsCoverEveryElementOnce) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    const int dp = 1 + rng() % 5;
    const int64_t alignment = 1 + rng() % 20;
    std::vector<FlatParamDecl> decls;
    const int nparams = rng() % 6;
    for (int i = 0; i < nparams; ++i) {
      std::vector<int64_t> shape;
      const int rank = rng() % 3;
      for (int d = 0; d < rank; ++d) shape.push_back(rng() % 9);
      decls.push_back({"p" + std::to_string(i), shape});
    }
    auto layout = FlatParamLayout::Create("u", 0, decls, dp, alignment);
    ASSERT_TRUE(layout.ok()) << layout.status();
    const int64_t s = layout->shard_numel();
    EXPECT_EQ(s % alignment, 0);
    EXPECT_GE(s * dp, layout->numel());
    EXPECT_LT((s - alignment) * dp, layout->numel()) << "S is not the smallest aligned shard";
    // Owner count per flat element.
    std::vector<int> owners(layout->padded_numel(), 0);
    for (int r = 0; r < dp; ++r) {
      int64_t last_end = -1;
      for (const ShardSegment& seg : layout->SegmentsForRank(r)) {
        const FlatParamInfo& p = layout->params()[seg.param_index];
        ASSERT_GT(seg.length, 0);
        ASSERT_LE(seg.offset_in_param + seg.length, p.numel);
        ASSERT_LE(seg.offset_in_shard + seg.length, s);
        const int64_t flat = p.offset + seg.offset_in_param;
        ASSERT_EQ(flat, layout->ShardBegin(r) + seg.offset_in_shard);
        ASSERT_GT(flat, last_end);
        last_end = flat + seg.length - 1;
        for (int64_t k = 0; k < seg.length; ++k) owners[flat + k]++;
      }
    }
    for (int64_t i = 0; i < layout->padded_numel(); ++i) {
      EXPECT_EQ(owners[i], i < layout->numel() ? 1 : 0) << "element " << i;
    }
  }
}

TEST(FlatParamLayoutTest, EmptyUnitHasEmptyShards) {
  auto layout = FlatParamLayout::Create("head", 5, {}, 4);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->numel(), 0);
  EXPECT_EQ(layout->shard_numel(), 0);
  EXPECT_TRUE(layout->SegmentsForRank(3).empty());
}

TEST(FlatParamLayoutTest, FindParam) {
  auto layout = FlatParamLayout::Create("embed", 0, {{"wte.weight", {7, 2}}, {"wpe.weight", {3, 2}}}, 2);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(*layout->FindParam("wpe.weight"), 1);
  absl::StatusOr<int> missing = layout->FindParam("wte.bias");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "unit 'embed' has no parameter 'wte.bias'");
}

TEST(FlatParamLayoutTest, RejectsBadArguments) {
  EXPECT_EQ(FlatParamLayout::Create("u", 0, {{"a", {2}}}, 0).status().message(), "dp size is 0, expected >= 1");
  EXPECT_EQ(FlatParamLayout::Create("u", 0, {{"a", {2}}}, 2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status dup = FlatParamLayout::Create("u", 0, {{"a", {2}}, {"a", {3}}}, 2).status();
  EXPECT_EQ(dup.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dup.message(), "unit 'u' declares parameter 'a' twice");
  absl::Status neg = FlatParamLayout::Create("u", 0, {{"a", {2, -1}}}, 2).status();
  EXPECT_EQ(neg.message(), "parameter 'a' has dimension -1, expected >= 0");
  EXPECT_EQ(FlatParamLayout::Create("u", 0, {{"", {2}}}, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard
