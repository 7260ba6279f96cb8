// Table-driven checks of the rank layout (no MPI): tp fastest, then dp, then pp.
#include "comm/process_grid.h"

#include <set>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using Groups = std::vector<std::vector<int>>;

struct LayoutCase {
  GridShape shape;
  Groups tp, dp, pp;
};

// Expected groups written out by hand, as Megatron's rank-generator test does.
const LayoutCase kCases[] = {
    {{1, 1, 1}, {{0}}, {{0}}, {{0}}},
    {{4, 1, 1}, {{0}, {1}, {2}, {3}}, {{0, 1, 2, 3}}, {{0}, {1}, {2}, {3}}},
    {{1, 4, 1}, {{0, 1, 2, 3}}, {{0}, {1}, {2}, {3}}, {{0}, {1}, {2}, {3}}},
    {{1, 1, 3}, {{0}, {1}, {2}}, {{0}, {1}, {2}}, {{0, 1, 2}}},
    {{2, 2, 1}, {{0, 1}, {2, 3}}, {{0, 2}, {1, 3}}, {{0}, {1}, {2}, {3}}},
    {{2, 1, 2}, {{0}, {1}, {2}, {3}}, {{0, 1}, {2, 3}}, {{0, 2}, {1, 3}}},
    {{1, 2, 2}, {{0, 1}, {2, 3}}, {{0}, {1}, {2}, {3}}, {{0, 2}, {1, 3}}},
    {{2, 2, 2},
     {{0, 1}, {2, 3}, {4, 5}, {6, 7}},
     {{0, 2}, {1, 3}, {4, 6}, {5, 7}},
     {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
    {{3, 2, 1}, {{0, 1}, {2, 3}, {4, 5}}, {{0, 2, 4}, {1, 3, 5}}, {{0}, {1}, {2}, {3}, {4}, {5}}},
    {{2, 3, 2},
     {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}},
     {{0, 3}, {1, 4}, {2, 5}, {6, 9}, {7, 10}, {8, 11}},
     {{0, 6}, {1, 7}, {2, 8}, {3, 9}, {4, 10}, {5, 11}}},
    {{2, 2, 4},
     {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}},
     {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}},
     {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}},
};

class GridLayoutTest : public testing::TestWithParam<LayoutCase> {};

TEST_P(GridLayoutTest, GroupsMatchTable) {
  const LayoutCase& c = GetParam();
  EXPECT_EQ(GroupsAlong(c.shape, GridAxis::kTp), c.tp);
  EXPECT_EQ(GroupsAlong(c.shape, GridAxis::kDp), c.dp);
  EXPECT_EQ(GroupsAlong(c.shape, GridAxis::kPp), c.pp);
}

TEST_P(GridLayoutTest, CoordinatesRoundTripAndPartition) {
  const GridShape s = GetParam().shape;
  std::set<std::vector<int>> seen;
  for (int r = 0; r < s.size(); ++r) {
    const GridCoords c = CoordsOfRank(s, r);
    EXPECT_EQ(RankOfCoords(s, c), r);
    EXPECT_TRUE(seen.insert({c.dp, c.tp, c.pp}).second) << "rank " << r;
    // Group rank on each axis is the coordinate along it.
    for (GridAxis axis : {GridAxis::kDp, GridAxis::kTp, GridAxis::kPp}) {
      const int coord = axis == GridAxis::kDp ? c.dp : axis == GridAxis::kTp ? c.tp : c.pp;
      int found = 0;
      for (const auto& g : GroupsAlong(s, axis)) {
        for (int i = 0; i < static_cast<int>(g.size()); ++i) {
          if (g[i] == r) {
            ++found;
            EXPECT_EQ(i, coord) << GridAxisName(axis) << " rank " << r;
          }
        }
      }
      EXPECT_EQ(found, 1) << GridAxisName(axis) << " rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GridLayoutTest, testing::ValuesIn(kCases));

TEST(GridShapeTest, Validation) {
  EXPECT_TRUE(ValidateGridShape({2, 2, 1}, 4).ok());
  absl::Status s = ValidateGridShape({2, 2, 1}, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "grid shape dp=2 tp=2 pp=1 needs 4 ranks but the world has 3");
  s = ValidateGridShape({0, 2, 1}, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "grid shape dp=0 tp=2 pp=1 has a dimension < 1");
}

TEST(ProcessGridTest, CreateRejectsShapeThatDoesNotMatchWorld) {
  auto grid = ProcessGrid::Create(nullptr, {1, 1, 1});
  EXPECT_EQ(grid.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard
