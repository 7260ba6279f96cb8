#include "engine/straggler.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

std::vector<StragglerReport> Share(const std::vector<double>& ms) {
  std::vector<std::unique_ptr<Communicator>> group = CreateThreadGroup(static_cast<int>(ms.size()));
  std::vector<StragglerReport> out(ms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ms.size(); ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<StragglerReport> s = ShareComputeTimes(*group[r], ms[r]);
      ASSERT_TRUE(s.ok()) << s.status();
      out[r] = *s;
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(StragglerTest, EveryRankNamesTheSlowestAgainstTheMedian) {
  for (const StragglerReport& r : Share({100, 350, 110})) {
    EXPECT_EQ(r.slowest_rank, 1);
    EXPECT_EQ(r.slowest_ms, 350);
    EXPECT_EQ(r.median_ms, 110);
    EXPECT_TRUE(r.Notable());
  }
  const StragglerReport even = Share({100, 110, 105, 90})[0];
  EXPECT_EQ(even.slowest_rank, 1);
  EXPECT_DOUBLE_EQ(even.median_ms, 102.5);
  EXPECT_FALSE(even.Notable());  // 110 is within 20% of the median
  EXPECT_EQ(Share({50, 50})[1].slowest_rank, 0);  // ties: the lowest rank
}

TEST(StragglerTest, SlowestOfAnEmptyGroupIsZero) {
  const StragglerReport r = SlowestOf({});
  EXPECT_EQ(r.slowest_rank, 0);
  EXPECT_EQ(r.slowest_ms, 0);
  EXPECT_FALSE(r.Notable());
}

TEST(StragglerTest, ComputeIsTheStepLessItsWaits) {
  StepTimings t;
  t.total = 1.0;
  t.gather_wait = 0.1;
  t.reduce_wait = 0.2;
  t.pipeline_wait_forward = 0.05;
  t.pipeline_wait_backward = 0.05;
  t.publish_wait = 0.1;
  EXPECT_NEAR(ComputeMs(t), 500.0, 1e-9);
}

TEST(StragglerTest, TheObserverAddsUpComputeTimeUntilTaken) {
  ComputeTimeObserver observer;
  StepResult r;
  r.timings.total = 0.5;
  r.timings.gather_wait = 0.1;
  r.timings.publish_wait = 0.15;
  observer.OnStepEnd(StepEvent{0, 0}, r);
  observer.OnStepEnd(StepEvent{1, 1}, r);
  EXPECT_DOUBLE_EQ(observer.TakeMs(), 2 * 250.0);
  EXPECT_EQ(observer.TakeMs(), 0);
}

}  // namespace
}  // namespace zeroshard
