#include "core/testing/test_seed.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/hash.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

constexpr uint64_t kSeedMask = 0x7fffffffull;

std::string CurrentTestName() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return "";
  return absl::StrCat(info->test_suite_name(), ".", info->name());
}

// ZS_TEST_SEED: "random" -> drawn; N -> N; unset -> from the scope's name.
uint64_t BaseSeed(absl::string_view scope) {
  const char* env = std::getenv("ZS_TEST_SEED");
  const absl::string_view value = env == nullptr ? "" : env;
  uint64_t replay = 0;
  if (value == "random") return std::random_device{}() & kSeedMask;
  if (absl::SimpleAtoi(value, &replay)) return replay;
  if (!value.empty()) {
    std::fprintf(stderr, "ZS_TEST_SEED=%s is neither a number nor \"random\"; using the fixed seed\n", env);
  }
  return Mix64(Fnv1a64(scope)) & kSeedMask;
}

struct ScopeSeeds {
  std::mutex mu;
  bool started = false;
  std::string scope;
  uint64_t base = 0;
  uint64_t calls = 0;
};

}  // namespace

uint64_t TestSeedFor(absl::string_view scope, SeedLog log) {
  static ScopeSeeds* const state = new ScopeSeeds;
  std::lock_guard<std::mutex> lock(state->mu);
  if (!state->started || state->scope != scope) {
    state->started = true;
    state->scope = std::string(scope);
    state->base = BaseSeed(scope);
    state->calls = 0;
    if (log == SeedLog::kPrint) {
      std::printf("[ seed ] ZS_TEST_SEED=%llu\n", static_cast<unsigned long long>(state->base));
      std::fflush(stdout);
    }
  }
  const uint64_t index = state->calls++;
  return index == 0 ? state->base : SplitMix64(state->base ^ (index * 0x9e3779b97f4a7c15ull)) & kSeedMask;
}

uint64_t TestSeed(SeedLog log) { return TestSeedFor(CurrentTestName(), log); }

}  // namespace zeroshard
