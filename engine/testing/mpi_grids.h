// Process grids for multi-rank tests under mpirun: one per shape, created
// on first use over a fresh duplicate of the MPI world and kept for the
// process, so tests that ask for grids in the same order on every rank get
// matching communicators.
#ifndef ZEROSHARD_ENGINE_TESTING_MPI_GRIDS_H_
#define ZEROSHARD_ENGINE_TESTING_MPI_GRIDS_H_

#include "comm/process_grid.h"

namespace zeroshard {

// The MPI world's size (1 when MPI cannot start).
int MpiWorldSize();

// The grid of `shape` (dp, tp, pp, dp_shard), with a 120 s collective
// timeout; a creation failure fails the test and aborts.
ProcessGrid& CachedGrid(const GridShape& shape);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_MPI_GRIDS_H_
