#include "engine/step_plan.h"

#include <vector>

#include "engine/data_parallel_program.h"
#include "engine/step_program.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Five one-unit buckets over units a..e at stage 2: bucket k closes at unit
// 4 - k, and each WAIT_REDUCE follows the next bucket's REDUCE.
StepProgram Program(int micro_batches, bool replicas) {
  std::vector<ProgramUnit> units(5);
  std::vector<ProgramBucket> buckets;
  for (int u = 0; u < 5; ++u) {
    units[u].name = std::string(1, static_cast<char>('a' + u));
    units[u].needs = {u};
    units[u].gather_bytes = 64;
  }
  for (int u = 4; u >= 0; --u) {
    ProgramBucket b;
    b.units = {u};
    b.reduce_bytes = 64;
    b.name = units[u].name;
    b.replica_bytes = replicas ? 64 : 0;
    buckets.push_back(b);
  }
  DataParallelProgramOptions o;
  o.zero = *ZeroPolicy::ForStage(2);
  o.micro_batches = micro_batches;
  absl::StatusOr<StepProgram> p = BuildDataParallelProgram(units, buckets, o);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : StepProgram();
}

TEST(StagingSlotsTest, TwoSlotsAlternateWhenEachWaitFreesItsBucket) {
  EXPECT_EQ(StagingSlots(Program(1, false), 5), std::vector<int>({0, 1, 0, 1, 0}));
  EXPECT_EQ(StagingSlots(Program(3, false), 5), std::vector<int>({0, 1, 0, 1, 0}));
}

// Hybrid sharding: a bucket's staging stays busy until the next WAIT_REDUCE
// completes its replica all-reduce, so three buckets are live at once (the
// pending one, the one being waited for, the one just launched).
TEST(StagingSlotsTest, ReplicaAllReducesKeepTheirSlotUntilTheNextWait) {
  EXPECT_EQ(StagingSlots(Program(1, true), 5), std::vector<int>({0, 1, 2, 0, 1}));
  // Every micro-batch's pass drains (its last bucket lands at once), so the
  // plan is the same with accumulation.
  EXPECT_EQ(StagingSlots(Program(2, true), 5), std::vector<int>({0, 1, 2, 0, 1}));
}

}  // namespace
}  // namespace zeroshard
