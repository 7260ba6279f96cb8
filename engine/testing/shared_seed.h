// The data seed of a multi-rank test: every rank must draw the same data.
#ifndef ZEROSHARD_ENGINE_TESTING_SHARED_SEED_H_
#define ZEROSHARD_ENGINE_TESTING_SHARED_SEED_H_

#include <cstdint>

#include "comm/communicator.h"

namespace zeroshard {

// The test's next seed (core/testing/test_seed.h: fixed per test unless
// ZS_TEST_SEED says otherwise), rank 0's value on every rank of `comm`
// (collective), in [0, 2^31). Rank 0 prints the test's replay line.
int32_t SharedTestSeed(Communicator& comm);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_SHARED_SEED_H_
