// Builds a ProcessGrid for every dp × tp × pp shape of the world and checks
// that every member of every group agrees on who is in it.
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/process_grid.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::vector<GridShape> ShapesOf(int n) {
  std::vector<GridShape> shapes;
  for (int dp = 1; dp <= n; ++dp) {
    for (int tp = 1; tp <= n; ++tp) {
      if (n % (dp * tp) == 0) shapes.push_back({dp, tp, n / (dp * tp)});
    }
  }
  return shapes;
}

// The members of this rank's group along `axis`, gathered over the group.
std::vector<int> GatherMembers(Communicator& group, int world_rank) {
  std::vector<int32_t> members(group.size(), -1);
  int32_t mine = world_rank;
  EXPECT_TRUE(group.AllGather(&mine, members.data(), 1, DType::kI32)->Wait().ok());
  return std::vector<int>(members.begin(), members.end());
}

TEST(ProcessGridMpiTest, EveryShapeAgreesOnGroupMembership) {
  CommOptions options;
  options.timeout = absl::Seconds(60);
  options.debug_checks = true;
  auto probe = CreateMpiWorld(options);
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int n = (*probe)->size();
  const int world_rank = (*probe)->rank();
  probe->reset();
  for (const GridShape& shape : ShapesOf(n)) {
    SCOPED_TRACE(testing::Message() << "dp=" << shape.dp << " tp=" << shape.tp << " pp=" << shape.pp);
    auto world = CreateMpiWorld(options);
    ASSERT_TRUE(world.ok()) << world.status();
    auto grid = ProcessGrid::Create(std::move(world).value(), shape);
    ASSERT_TRUE(grid.ok()) << grid.status();
    EXPECT_EQ(grid->coords(), CoordsOfRank(shape, world_rank));
    EXPECT_EQ(grid->world().rank(), world_rank);
    for (GridAxis axis : {GridAxis::kTp, GridAxis::kDp, GridAxis::kPp}) {
      Communicator& group = grid->group(axis);
      EXPECT_EQ(group.name(), GridAxisName(axis));
      const std::vector<int> members = GatherMembers(group, world_rank);
      std::vector<int> expected;
      for (const auto& g : GroupsAlong(shape, axis)) {
        for (int r : g) {
          if (r == world_rank) expected = g;
        }
      }
      EXPECT_EQ(members, expected) << GridAxisName(axis);
      const int coord = axis == GridAxis::kDp ? grid->dp_rank() : axis == GridAxis::kTp ? grid->tp_rank()
                                                                                         : grid->pp_rank();
      EXPECT_EQ(group.rank(), coord) << GridAxisName(axis);
      // The control duplicate: the same members in the same order, its own name.
      Communicator& control = grid->control(axis);
      EXPECT_EQ(control.name(), absl::StrCat(GridAxisName(axis), ".control"));
      EXPECT_EQ(GatherMembers(control, world_rank), expected) << "control " << GridAxisName(axis);
      EXPECT_EQ(control.rank(), coord);
    }
    // The embedding group: the first and last stage of this (dp, tp).
    const std::vector<int> embed = GatherMembers(grid->embedding(), world_rank);
    std::vector<int> expected_embed = {world_rank};
    if (grid->pp_rank() == 0 || grid->pp_rank() == shape.pp - 1) {
      GridCoords first = grid->coords(), last = grid->coords();
      first.pp = 0;
      last.pp = shape.pp - 1;
      expected_embed = {RankOfCoords(shape, first)};
      if (shape.pp > 1) expected_embed.push_back(RankOfCoords(shape, last));
    }
    EXPECT_EQ(embed, expected_embed);
    EXPECT_EQ(GatherMembers(grid->embedding_control(), world_rank), expected_embed);
    EXPECT_EQ(grid->world_control().name(), "world.control");
    EXPECT_EQ(grid->world_control().rank(), world_rank);
    EXPECT_EQ(grid->world_control().size(), n);
  }
}

// Control traffic does not queue behind data traffic: with a data
// all-reduce held back on one rank, the others' control collectives still
// complete (each communicator has its own progress thread and message space).
TEST(ProcessGridMpiTest, ControlCollectivesCompleteWhileADataCollectiveWaits) {
  auto world = CreateMpiWorld(CommOptions{});
  ASSERT_TRUE(world.ok()) << world.status();
  const int n = (*world)->size();
  auto grid = ProcessGrid::Create(std::move(world).value(), {n, 1, 1});
  ASSERT_TRUE(grid.ok()) << grid.status();
  int32_t data = 1, control = grid->dp_rank();
  std::unique_ptr<Work> pending;
  if (grid->dp_rank() != 0) pending = grid->dp().AllReduce(&data, 1, DType::kI32, ReduceOp::kSum);
  // Rank 0 issues its data all-reduce only after the control one completed.
  ASSERT_TRUE(grid->control(GridAxis::kDp).AllReduce(&control, 1, DType::kI32, ReduceOp::kMax)->Wait().ok());
  EXPECT_EQ(control, n - 1);
  if (grid->dp_rank() == 0) pending = grid->dp().AllReduce(&data, 1, DType::kI32, ReduceOp::kSum);
  ASSERT_TRUE(pending->Wait().ok());
  EXPECT_EQ(data, n);
}

TEST(ProcessGridMpiTest, ShapeThatDoesNotFitIsRejected) {
  auto world = CreateMpiWorld(CommOptions{});
  ASSERT_TRUE(world.ok()) << world.status();
  const int n = (*world)->size();
  auto grid = ProcessGrid::Create(std::move(world).value(), {n + 1, 1, 1});
  EXPECT_EQ(grid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(grid.status().message(), "grid shape dp=" + std::to_string(n + 1) + " tp=1 pp=1 needs " +
                                         std::to_string(n + 1) + " ranks but the world has " + std::to_string(n));
}

}  // namespace
}  // namespace zeroshard
