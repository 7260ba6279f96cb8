#include "nn/param_spec.h"

#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

ParamSpec Spec(std::vector<int64_t> shape, Partition partition) {
  ParamSpec p;
  p.name = "w";
  p.shape = std::move(shape);
  p.partition = partition;
  return p;
}

TEST(ParamSpecTest, LocalShapeSplitsOneDimension) {
  EXPECT_EQ(*LocalShape(Spec({8, 6}, Partition::Replicated()), 2), (std::vector<int64_t>{8, 6}));
  EXPECT_EQ(*LocalShape(Spec({8, 6}, Partition::Split(0)), 2), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(*LocalShape(Spec({8, 6}, Partition::Split(1, 3)), 2), (std::vector<int64_t>{8, 3}));
  EXPECT_EQ(*LocalShape(Spec({8, 6}, Partition::Split(1, 3)), 1), (std::vector<int64_t>{8, 6}));
}

TEST(ParamSpecTest, LocalShapeRejectsWhatDoesNotDivide) {
  absl::StatusOr<std::vector<int64_t>> s = LocalShape(Spec({8, 6}, Partition::Split(1, 3)), 4);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "parameter 'w' [8, 6] is split on dimension 1 in 3 block(s) over tp 4: 6 is not a multiple of 12");
  s = LocalShape(Spec({8, 6}, Partition::Split(2)), 2);
  EXPECT_EQ(s.status().message(),
            "parameter 'w' [8, 6] has partition split(dim=2, blocks=1), expected a dimension in [0, 2) and blocks >= 1");
}

TEST(ParamSpecTest, RunsOfARowSplitAreOneBlockOfRows) {
  // [4, 3] split on rows over 2: rank 1 holds rows 2-3, one run.
  const std::vector<GlobalRun> runs = LocalToGlobalRuns(Spec({4, 3}, Partition::Split(0)), 1, 2);
  EXPECT_EQ(runs, (std::vector<GlobalRun>{{0, 6, 6}}));
}

TEST(ParamSpecTest, RunsOfAColumnSplitInBlocksTakeEachBlocksSlice) {
  // [2, 6] = two rows of q|k|v blocks of 2 columns; rank 1 of 2 holds column
  // 1 of every block: global columns 1, 3, 5 of each row.
  const std::vector<GlobalRun> runs = LocalToGlobalRuns(Spec({2, 6}, Partition::Split(1, 3)), 1, 2);
  EXPECT_EQ(runs, (std::vector<GlobalRun>{{0, 1, 1}, {1, 3, 1}, {2, 5, 1}, {3, 7, 1}, {4, 9, 1}, {5, 11, 1}}));
}

TEST(ParamSpecTest, ReplicatedOrTpOneIsTheWholeTensor) {
  EXPECT_EQ(LocalToGlobalRuns(Spec({2, 6}, Partition::Split(1, 3)), 0, 1), (std::vector<GlobalRun>{{0, 0, 12}}));
  EXPECT_EQ(LocalToGlobalRuns(Spec({2, 6}, Partition::Replicated()), 1, 2), (std::vector<GlobalRun>{{0, 0, 12}}));
}

ParamSpec Padded(std::vector<int64_t> shape, std::vector<int64_t> logical) {
  ParamSpec p = Spec(std::move(shape), Partition::Split(0));
  p.logical_shape = std::move(logical);
  return p;
}

TEST(ParamSpecTest, WithoutPaddingTheLogicalShapeIsTheShape) {
  const ParamSpec p = Spec({5, 3}, Partition::Replicated());
  EXPECT_EQ(p.logical(), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(p.logical_numel(), 15);
  EXPECT_FALSE(p.padded());
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(LogicalIndex(p, i), i);
  EXPECT_EQ(LogicalToGlobalRuns(p), (std::vector<GlobalRun>{{0, 0, 15}}));
  EXPECT_TRUE(ValidateLogicalShape(p).ok());
  // A logical shape equal to the shape is no padding either.
  EXPECT_FALSE(Padded({5, 3}, {5, 3}).padded());
}

// GPT-2's wte: vocab 67 padded to 68 rows for tp 4. The real rows keep their
// flat indices; the last row is padding.
TEST(ParamSpecTest, PaddingRowsAtTheEndOfDimensionZeroKeepRealIndices) {
  const ParamSpec p = Padded({68, 4}, {67, 4});
  EXPECT_TRUE(ValidateLogicalShape(p).ok());
  EXPECT_TRUE(p.padded());
  EXPECT_EQ(p.numel(), 272);
  EXPECT_EQ(p.logical_numel(), 268);
  for (int64_t i = 0; i < 268; ++i) {
    EXPECT_EQ(LogicalIndex(p, i), i);
    EXPECT_FALSE(IsPadding(p, i));
  }
  for (int64_t i = 268; i < 272; ++i) EXPECT_TRUE(IsPadding(p, i)) << i;
  EXPECT_EQ(LogicalToGlobalRuns(p), (std::vector<GlobalRun>{{0, 0, 268}}));
  // Rank 3 of 4 holds rows 51..67: the padding row is its last.
  EXPECT_EQ(*LocalShape(p, 4), (std::vector<int64_t>{17, 4}));
  EXPECT_EQ(LocalToGlobalRuns(p, 3, 4), (std::vector<GlobalRun>{{0, 204, 68}}));
}

TEST(ParamSpecTest, PaddingInAnInnerDimensionShiftsLaterRows) {
  // [3, 4] holding a logical [2, 3]: row 2 and column 3 are padding.
  const ParamSpec p = Padded({3, 4}, {2, 3});
  const std::vector<int64_t> expected = {0, 1, 2, -1, 3, 4, 5, -1, -1, -1, -1, -1};
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(LogicalIndex(p, i), expected[i]) << i;
  EXPECT_EQ(LogicalToGlobalRuns(p), (std::vector<GlobalRun>{{0, 0, 3}, {3, 4, 3}}));
  // A padded middle dimension: runs are whole rows of the dims after it.
  const ParamSpec q = Padded({2, 3, 2}, {2, 2, 2});
  EXPECT_EQ(LogicalToGlobalRuns(q), (std::vector<GlobalRun>{{0, 0, 4}, {4, 6, 4}}));
  EXPECT_EQ(LogicalIndex(q, 4), -1);
  EXPECT_EQ(LogicalIndex(q, 6), 4);
  EXPECT_EQ(LogicalIndex(q, 9), 7);
}

TEST(ParamSpecTest, ALogicalShapeMustFitTheShape) {
  for (const auto& logical : std::vector<std::vector<int64_t>>{{4}, {5, 3}, {4, 0}, {2, 3, 1}}) {
    const absl::Status s = ValidateLogicalShape(Padded({4, 3}, logical));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << logical.size();
  }
  EXPECT_EQ(ValidateLogicalShape(Padded({4, 3}, {5, 3})).message(),
            "parameter 'w' [4, 3] has logical shape [5, 3], expected as many dimensions, each in [1, the shape's]");
}

TEST(ParamSpecTest, SlicesAndPaddingRoundTripThroughTheWholeTensor) {
  // [3, 4] holding a logical [2, 3], split in column blocks of 2 over tp 2.
  ParamSpec p = Padded({3, 4}, {2, 3});
  p.partition = Partition::Split(1, 2);
  const std::vector<float> logical = {1, 2, 3, 4, 5, 6};
  const std::vector<float> whole = AddPadding(p, logical.data());
  EXPECT_EQ(whole, (std::vector<float>{1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0}));
  EXPECT_EQ(DropPadding(p, whole.data()), logical);
  // Rank 0 holds columns 0 and 2, rank 1 columns 1 and 3.
  const std::vector<float> slice0 = {1, 3, 4, 6, 0, 0}, slice1 = {2, 0, 5, 0, 0, 0};
  std::vector<float> placed(12, -1.0f);
  PlaceLocalSlice(p, 0, 2, slice0.data(), placed.data());
  PlaceLocalSlice(p, 1, 2, slice1.data(), placed.data());
  EXPECT_EQ(placed, whole);
}

}  // namespace
}  // namespace zeroshard
