// Seeds for randomised tests.
//
// By default a test's seeds are fixed: derived from the running test's full
// name, so the suite repeats bit for bit and each test still sees its own
// data. ZS_TEST_SEED changes that:
//   ZS_TEST_SEED=random  a fresh base seed per test (seed sweeps:
//                        tools/seed-sweep);
//   ZS_TEST_SEED=N       base seed N (to replay a failure).
// The first call in a test returns the base seed itself and prints
// "[ seed ] ZS_TEST_SEED=<base>", the value that replays the whole test; later
// calls in the same test return seeds mixed from the base and the call's
// index, so two generators seeded by two calls draw different streams.
// Every seed drawn or derived is in [0, 2^31), so it fits the int32 and
// uint32 seeds tests use; a replayed N is returned as given.
#ifndef ZEROSHARD_CORE_TESTING_TEST_SEED_H_
#define ZEROSHARD_CORE_TESTING_TEST_SEED_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace zeroshard {

enum class SeedLog { kPrint, kQuiet };

// The next seed of the running gtest test (outside a test: of the scope "").
uint64_t TestSeed(SeedLog log = SeedLog::kPrint);

// The same for a named scope, for test programs that do not run under gtest
// (fixture writers, replay tools): the default base is derived from `scope`.
uint64_t TestSeedFor(absl::string_view scope, SeedLog log = SeedLog::kPrint);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_TESTING_TEST_SEED_H_
