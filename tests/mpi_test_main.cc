// gtest main for the binaries bazel/defs.bzl's mpi_test runs under mpirun.
//
// MPI is initialised with MPI_THREAD_MULTIPLE before any test (communicators
// run progress threads). Only rank 0 prints gtest progress; every rank still
// writes its XML through --gtest_output, and bazel/mpi_test.sh merges them.
// Every rank exits with the worst result of all ranks, and rank 0 says which
// ranks failed, so a failure on rank 2 is visible in rank 0's log.
#include <mpi.h>

#include <cstdio>

#include "comm/mpi_env.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  absl::Status init = zeroshard::EnsureMpiInitialized();
  if (!init.ok()) {
    std::fprintf(stderr, "mpi_test_main: %s\n", std::string(init.message()).c_str());
    return 1;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int local = RUN_ALL_TESTS() == 0 ? 0 : 1;
  std::vector<int> all(size);
  MPI_Gather(&local, 1, MPI_INT, all.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int worst = local;
  MPI_Allreduce(&local, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      if (all[r] != 0) std::printf("mpi_test_main: rank %d had failing tests (see its XML)\n", r);
    }
    std::fflush(stdout);
  }
  zeroshard::FinalizeMpi();
  return worst;
}
