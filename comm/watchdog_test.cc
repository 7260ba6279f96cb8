#include "comm/watchdog.h"

#include <atomic>
#include <optional>
#include <vector>

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

// Entry r: what rank r last started; nullopt: it did not answer.
using Started = std::vector<std::optional<int64_t>>;

TEST(DescribeArrivalsTest, RanksBelowTheSequenceNeverArrived) {
  EXPECT_EQ(DescribeArrivals(2, Started{2, 2, 2, 1}), "rank that never arrived: 3");
  EXPECT_EQ(DescribeArrivals(5, Started{5, 4, 5, 0}), "ranks that never arrived: 1,3");
  // A rank past the collective left it early (e.g. a broadcast root): it arrived.
  EXPECT_EQ(DescribeArrivals(5, Started{5, 6, 5}), "every rank arrived, the transfer itself stalled");
  EXPECT_EQ(DescribeArrivals(1, Started{1}), "every rank arrived, the transfer itself stalled");
}

TEST(DescribeArrivalsTest, SilentRanksAreNamedApart) {
  EXPECT_EQ(DescribeArrivals(2, Started{2, 2, 2, std::nullopt}), "rank 3 did not answer (dead or stuck)");
  EXPECT_EQ(DescribeArrivals(2, Started{std::nullopt, 2, std::nullopt, 2}),
            "ranks 0,2 did not answer (dead or stuck)");
  EXPECT_EQ(DescribeArrivals(7, Started{7, 6, std::nullopt, 7}),
            "rank that never arrived: 1; rank 2 did not answer (dead or stuck)");
  EXPECT_EQ(DescribeArrivals(7, Started{3, 6, std::nullopt, 7, std::nullopt}),
            "ranks that never arrived: 0,1; ranks 2,4 did not answer (dead or stuck)");
}

// Ranks 0,1 on zs-h0, 2,3 on zs-h1, rank 4's host unknown.
std::string TwoHosts(int rank) { return rank < 2 ? "zs-h0" : rank < 4 ? "zs-h1" : ""; }

TEST(DescribeArrivalsTest, HostsNamedWithTheirRanks) {
  EXPECT_EQ(DescribeArrivals(9, Started{9, 9, std::nullopt, std::nullopt}, TwoHosts),
            "ranks 2,3 on zs-h1 did not answer (dead or stuck)");
  EXPECT_EQ(DescribeArrivals(9, Started{9, 8, 9, 8}, TwoHosts), "ranks that never arrived: 1 on zs-h0, 3 on zs-h1");
  EXPECT_EQ(DescribeArrivals(9, Started{8, 9, 9, 9, std::nullopt}, TwoHosts),
            "rank that never arrived: 0 on zs-h0; rank 4 did not answer (dead or stuck)");
  EXPECT_EQ(DescribeArrivals(9, Started{9, 9, 9, 9}, TwoHosts), "every rank arrived, the transfer itself stalled");
}

// Counts peer queries and answers with a fixed table.
class FakePeers {
 public:
  explicit FakePeers(Started answers) : answers_(std::move(answers)) {}
  CollectiveWatchdog::PeerQueryFn Fn() {
    return [this] {
      calls_.fetch_add(1);
      return answers_;
    };
  }
  int calls() const { return calls_.load(); }

 private:
  const Started answers_;
  std::atomic<int> calls_{0};
};

TEST(WatchdogTest, AsksThePeersOnlyWhenItFiresWithoutArrivals) {
  RecordingAbort abort;
  FakePeers peers(Started{2, 2, 2, 1});
  CollectiveWatchdog dog("world", 4, absl::Milliseconds(50), abort.Fn(), peers.Fn());
  for (int i = 0; i < 3; ++i) {  // in time: nobody is asked
    dog.Begin(Collective(1, CommOp::kAllReduce, 1024), false);
    dog.End();
  }
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(peers.calls(), 0);
  dog.Begin(Collective(2, CommOp::kAllReduce, 1024), false);
  absl::SleepFor(absl::Milliseconds(300));
  dog.End();
  const auto messages = abort.messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0],
            "collective #2 AllReduce(f32, 1024) in group world did not finish within 50ms; rank that never "
            "arrived: 3");
  EXPECT_EQ(peers.calls(), 1);
}

TEST(WatchdogTest, TrackedArrivalsWinOverThePeerQuery) {
  RecordingAbort abort;
  FakePeers peers(Started{1, 1, 1});
  CollectiveWatchdog dog("tp", 3, absl::Seconds(2), abort.Fn(), peers.Fn());
  dog.Begin(Collective(4, CommOp::kBarrier, 0), true);
  dog.MarkArrived(0);
  dog.MarkArrived(2);
  EXPECT_EQ(dog.TimeoutMessage(),
            "collective #4 Barrier() in group tp did not finish within 2s; rank that never arrived: 1");
  EXPECT_EQ(peers.calls(), 0);
  dog.Begin(Collective(5, CommOp::kBarrier, 0), false);
  EXPECT_EQ(dog.TimeoutMessage(),
            "collective #5 Barrier() in group tp did not finish within 2s; ranks that never arrived: 0,1,2");
  EXPECT_EQ(peers.calls(), 1);
  dog.End();
}

TEST(WatchdogTest, SilentPeerNamedInTheAbortMessage) {
  RecordingAbort abort;
  FakePeers peers(Started{3, std::nullopt});
  CollectiveWatchdog dog("pp", 2, absl::Milliseconds(30), abort.Fn(), peers.Fn());
  dog.Begin(Collective(3, CommOp::kAllGather, 8), false);
  absl::SleepFor(absl::Milliseconds(200));
  dog.End();
  const auto messages = abort.messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0],
            "collective #3 AllGather(f32, 8) in group pp did not finish within 30ms; rank 1 did not "
            "answer (dead or stuck)");
}

TEST(WatchdogTest, AbortMessageNamesTheHostsOfTheRanks) {
  RecordingAbort abort;
  FakePeers peers(Started{5, 5, std::nullopt, std::nullopt});
  CollectiveWatchdog dog("dp", 4, absl::Milliseconds(30), abort.Fn(), peers.Fn(), TwoHosts);
  dog.Begin(Collective(5, CommOp::kReduceScatter, 64), false);
  // Wait for the abort (bounded: a loaded machine delays the watchdog thread).
  for (int i = 0; i < 500 && abort.messages().empty(); ++i) absl::SleepFor(absl::Milliseconds(10));
  dog.End();
  const auto messages = abort.messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0],
            "collective #5 ReduceScatter(f32, 64) in group dp did not finish within 30ms; ranks 2,3 on zs-h1 did "
            "not answer (dead or stuck)");
  // Tracked arrivals name hosts too.
  dog.Begin(Collective(6, CommOp::kBarrier, 0), true);
  dog.MarkArrived(0);
  dog.MarkArrived(1);
  dog.MarkArrived(3);
  EXPECT_EQ(dog.TimeoutMessage(),
            "collective #6 Barrier() in group dp did not finish within 30ms; rank that never arrived: 2 on zs-h1");
  dog.End();
}

}  // namespace
}  // namespace zeroshard
