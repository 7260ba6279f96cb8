#include "core/testing/test_seed.h"

#include <cstdlib>
#include <set>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Each case sets ZS_TEST_SEED itself; the scopes are distinct so that every
// case starts a fresh base.
class TestSeedTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("ZS_TEST_SEED"); }
};

TEST_F(TestSeedTest, FixedByDefaultAndDistinctPerScope) {
  unsetenv("ZS_TEST_SEED");
  const uint64_t a = TestSeedFor("scope.a", SeedLog::kQuiet);
  const uint64_t b = TestSeedFor("scope.b", SeedLog::kQuiet);
  const uint64_t a_again = TestSeedFor("scope.a", SeedLog::kQuiet);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, a_again);  // a new scope restarts the sequence at its base
  EXPECT_LT(a, uint64_t{1} << 31);
  EXPECT_LT(b, uint64_t{1} << 31);
}

TEST_F(TestSeedTest, LaterCallsDifferFromTheBaseAndEachOther) {
  unsetenv("ZS_TEST_SEED");
  std::set<uint64_t> seen;
  for (int i = 0; i < 64; ++i) {
    const uint64_t s = TestSeedFor("scope.sequence", SeedLog::kQuiet);
    EXPECT_LT(s, uint64_t{1} << 31);
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST_F(TestSeedTest, ReplayReturnsTheGivenBaseThenTheSameSequence) {
  unsetenv("ZS_TEST_SEED");
  const uint64_t fixed_first = TestSeedFor("scope.replay", SeedLog::kQuiet);
  const uint64_t fixed_second = TestSeedFor("scope.replay", SeedLog::kQuiet);
  setenv("ZS_TEST_SEED", std::to_string(fixed_first).c_str(), 1);
  TestSeedFor("scope.other", SeedLog::kQuiet);  // leave the scope so the next call restarts it
  EXPECT_EQ(TestSeedFor("scope.replay", SeedLog::kQuiet), fixed_first);
  EXPECT_EQ(TestSeedFor("scope.replay", SeedLog::kQuiet), fixed_second);
  setenv("ZS_TEST_SEED", "12345", 1);
  TestSeedFor("scope.other", SeedLog::kQuiet);
  EXPECT_EQ(TestSeedFor("scope.replay", SeedLog::kQuiet), 12345u);
}

TEST_F(TestSeedTest, RandomDrawsAFreshBase) {
  setenv("ZS_TEST_SEED", "random", 1);
  std::set<uint64_t> bases;
  for (int i = 0; i < 8; ++i) bases.insert(TestSeedFor(i % 2 == 0 ? "scope.x" : "scope.y", SeedLog::kQuiet));
  EXPECT_GE(bases.size(), 7u);  // 8 draws from 2^31 values: a repeat is one chance in ~10^8
}

TEST_F(TestSeedTest, InsideAGtestTheScopeIsTheTestsName) {
  unsetenv("ZS_TEST_SEED");
  const uint64_t via_test = TestSeed(SeedLog::kQuiet);
  TestSeedFor("scope.elsewhere", SeedLog::kQuiet);
  EXPECT_EQ(TestSeedFor("TestSeedTest.InsideAGtestTheScopeIsTheTestsName", SeedLog::kQuiet), via_test);
}

}  // namespace
}  // namespace zeroshard
