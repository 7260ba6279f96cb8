#include "tests/data_parallel_world.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "comm/mpi_communicator.h"

namespace zeroshard {

ProcessGrid& DataParallelWorld() {
  static ProcessGrid* grid = [] {
    CommOptions options;
    options.timeout = absl::Seconds(120);
    auto world = CreateMpiWorld(options);
    if (!world.ok()) {
      std::fprintf(stderr, "DataParallelWorld: %s\n", world.status().ToString().c_str());
      std::abort();
    }
    const int n = (*world)->size();
    auto g = ProcessGrid::Create(std::move(world).value(), {n, 1, 1});
    if (!g.ok()) {
      std::fprintf(stderr, "DataParallelWorld: %s\n", g.status().ToString().c_str());
      std::abort();
    }
    return new ProcessGrid(std::move(g).value());
  }();
  return *grid;
}

}  // namespace zeroshard
