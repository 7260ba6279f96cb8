#include "engine/testing/shared_seed.h"

#include <cstdio>
#include <cstdlib>
#include <random>

#include "gtest/gtest.h"

namespace zeroshard {

int32_t SharedTestSeed(Communicator& comm) {
  const char* env = std::getenv("ZS_TEST_SEED");
  const uint64_t drawn = env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  int32_t seed = static_cast<int32_t>(drawn & 0x7fffffff);
  EXPECT_TRUE(comm.Broadcast(&seed, 1, DType::kI32, 0)->Wait().ok());
  if (comm.rank() == 0) std::printf("[ seed ] ZS_TEST_SEED=%d\n", seed);
  return seed;
}

}  // namespace zeroshard
