#include "engine/testing/mpi_grids.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>

#include "absl/time/time.h"
#include "comm/mpi_communicator.h"
#include "gtest/gtest.h"

namespace zeroshard {

int MpiWorldSize() {
  static const int n = [] {
    auto world = CreateMpiWorld(CommOptions{});
    return world.ok() ? (*world)->size() : 1;
  }();
  return n;
}

ProcessGrid& CachedGrid(const GridShape& shape) {
  static std::map<std::tuple<int, int, int, int>, std::unique_ptr<ProcessGrid>> grids;
  auto& g = grids[{shape.dp, shape.tp, shape.pp, shape.dp_shard}];
  if (g == nullptr) {
    CommOptions options;
    options.timeout = absl::Seconds(120);
    auto world = CreateMpiWorld(options);
    EXPECT_TRUE(world.ok()) << world.status();
    if (!world.ok()) std::abort();
    auto grid = ProcessGrid::Create(std::move(world).value(), shape);
    EXPECT_TRUE(grid.ok()) << grid.status();
    if (!grid.ok()) std::abort();
    g = std::make_unique<ProcessGrid>(std::move(grid).value());
  }
  return *g;
}

}  // namespace zeroshard
