#include "comm/watchdog.h"

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

CollectiveFingerprint Collective(int64_t seq, CommOp op, int64_t count) {
  return CollectiveFingerprint{seq, op, count, DType::kF32, -1, ReduceOp::kSum};
}

}  // namespace
}  // namespace zeroshard

namespace zeroshard {
namespace {

// Records the abort message instead of ending the process.
class RecordingAbort {
 public:
  CollectiveWatchdog::AbortFn Fn() {
    return [this](const std::string& m) {
      absl::MutexLock lock(&mu_);
      messages_.push_back(m);
    };
  }
  std::vector<std::string> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> messages_;
};

TEST(WatchdogTest, FiresOnceNamingMissingRanks) {
  RecordingAbort abort;
  CollectiveWatchdog dog("dp", 4, absl::Milliseconds(50), abort.Fn());
  dog.Begin(Collective(7, CommOp::kAllReduce, 1024), /*track_arrivals=*/true);
  dog.MarkArrived(0);
  dog.MarkArrived(3);
  absl::SleepFor(absl::Milliseconds(300));
  dog.End();
  const auto messages = abort.messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0],
            "collective #7 AllReduce(f32, 1024) in group dp did not finish within 50ms; ranks that never "
            "arrived: 1,2");
}

TEST(WatchdogTest, QuietWhenOperationsFinishInTime) {
  RecordingAbort abort;
  CollectiveWatchdog dog("world", 2, absl::Milliseconds(100), abort.Fn());
  for (int i = 0; i < 5; ++i) {
    dog.Begin(Collective(1, CommOp::kBarrier, 0), false);
    absl::SleepFor(absl::Milliseconds(20));
    dog.End();
  }
  absl::SleepFor(absl::Milliseconds(150));  // idle time does not count
  EXPECT_TRUE(abort.messages().empty());
}

TEST(WatchdogTest, MessagesWithoutArrivalsAndAfterArrivals) {
  RecordingAbort abort;
  CollectiveWatchdog dog("tp", 3, absl::Seconds(2), abort.Fn());
  dog.Begin(Collective(3, CommOp::kBarrier, 0), false);
  EXPECT_EQ(dog.TimeoutMessage(),
            "collective #3 Barrier() in group tp did not finish within 2s; ranks that never arrived: unknown "
            "(enable comm.debug_checks to find them)");
  dog.Begin(Collective(4, CommOp::kBarrier, 0), true);
  dog.MarkArrived(1);
  EXPECT_EQ(dog.TimeoutMessage(),
            "collective #4 Barrier() in group tp did not finish within 2s; ranks that never arrived: 0,2");
  dog.MarkArrived(0);
  EXPECT_EQ(dog.TimeoutMessage(),
            "collective #4 Barrier() in group tp did not finish within 2s; rank that never arrived: 2");
  dog.ArrivalsComplete();
  EXPECT_EQ(dog.TimeoutMessage(),
            "collective #4 Barrier() in group tp did not finish within 2s; every rank arrived, the transfer "
            "itself stalled");
  dog.End();
}

TEST(WatchdogTest, InfiniteTimeoutNeverFires) {
  RecordingAbort abort;
  CollectiveWatchdog dog("world", 2, absl::InfiniteDuration(), abort.Fn());
  dog.Begin(Collective(1, CommOp::kBarrier, 0), false);
  absl::SleepFor(absl::Milliseconds(30));
  dog.End();
  EXPECT_TRUE(abort.messages().empty());
}

}  // namespace
}  // namespace zeroshard
