// ArrivalProbe under mpirun: every rank asks every other rank at once (each
// listener answers while its own process is querying), and the listener
// stops at MPI_Finalize even while a probe is still alive.
#include "comm/arrival_probe.h"

#include <mpi.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(ArrivalQueryBoundTest, QuarterOfTheTimeoutWithinLimits) {
  EXPECT_EQ(ArrivalQueryBound(absl::Seconds(3)), absl::Milliseconds(750));
  EXPECT_EQ(ArrivalQueryBound(absl::Minutes(5)), absl::Seconds(2));
  EXPECT_EQ(ArrivalQueryBound(absl::Milliseconds(50)), absl::Milliseconds(200));
}

TEST(ArrivalProbeTest, EveryRankLearnsWhatEveryOtherStarted) {
  auto probe_or = ArrivalProbe::Create(MPI_COMM_WORLD);
  ASSERT_TRUE(probe_or.ok()) << probe_or.status();
  std::unique_ptr<ArrivalProbe> probe = std::move(probe_or).value();
  const int rank = probe->rank();
  const int n = probe->size();

  // Nothing started yet: everyone answers 0.
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<std::optional<int64_t>> zeros = probe->QueryStarted(absl::Seconds(5));
  ASSERT_EQ(zeros.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) EXPECT_EQ(zeros[r], std::optional<int64_t>(0)) << "rank " << r;
  MPI_Barrier(MPI_COMM_WORLD);  // every query answered before anyone records

  probe->RecordStarted(10 + rank);
  MPI_Barrier(MPI_COMM_WORLD);
  const absl::Time begin = absl::Now();
  std::vector<std::optional<int64_t>> started = probe->QueryStarted(absl::Seconds(5));
  const absl::Duration took = absl::Now() - begin;
  for (int r = 0; r < n; ++r) EXPECT_EQ(started[r], std::optional<int64_t>(10 + r)) << "rank " << r;
  // It returns once everyone answered, not at the bound.
  EXPECT_LT(took, absl::Milliseconds(1500));
  MPI_Barrier(MPI_COMM_WORLD);  // nobody frees its probe while others still ask
}

// The probe is deliberately never destroyed: MPI_Finalize (in the test main)
// must still stop the listener thread, or this binary hangs at exit and the
// test times out.
TEST(ArrivalProbeTest, ListenerStopsAtFinalizeWithAProbeAlive) {
  auto probe_or = ArrivalProbe::Create(MPI_COMM_WORLD);
  ASSERT_TRUE(probe_or.ok()) << probe_or.status();
  static ArrivalProbe* leaked = std::move(probe_or).value().release();
  leaked->RecordStarted(1);
}

}  // namespace
}  // namespace zeroshard
