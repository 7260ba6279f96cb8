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

}  // namespace
}  // namespace zeroshard
