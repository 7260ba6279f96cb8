// The process grid most multi-rank tests want: every rank of the MPI job in
// one dp group (tp = pp = 1), built once per test binary on first use.
// Collectives time out after 120 s, so a wedged test fails instead of hanging.
#ifndef ZEROSHARD_TESTS_DATA_PARALLEL_WORLD_H_
#define ZEROSHARD_TESTS_DATA_PARALLEL_WORLD_H_

#include "comm/process_grid.h"

namespace zeroshard {

// Aborts the test process if MPI or the grid cannot be set up (there is
// nothing to test without them). Collective on first call.
ProcessGrid& DataParallelWorld();

}  // namespace zeroshard

#endif  // ZEROSHARD_TESTS_DATA_PARALLEL_WORLD_H_
