#include "engine/testing/shared_seed.h"

#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard {

int32_t SharedTestSeed(Communicator& comm) {
  // Rank 0 prints the test's base seed (on the test's first draw).
  int32_t seed = static_cast<int32_t>(TestSeed(comm.rank() == 0 ? SeedLog::kPrint : SeedLog::kQuiet) & 0x7fffffff);
  EXPECT_TRUE(comm.Broadcast(&seed, 1, DType::kI32, 0)->Wait().ok());
  return seed;
}

}  // namespace zeroshard
