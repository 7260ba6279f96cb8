#include "comm/traced_wait.h"

#include <chrono>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "comm/async_work.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using std::chrono::milliseconds;

// Tells the runner thread once the waiter is inside Work::Wait, so the test
// controls the order whatever the scheduler does.
class WaiterArrived : public InlineExecutor {
 public:
  void HelpUntilDone(const WorkState*) override { arrived.Notify(); }
  absl::Notification arrived;
};

TEST(TracedWaitTest, DrawsTheBlockedWaitAndWhenTheOperationRan) {
  Timeline tl;
  WaiterArrived waiter;
  auto state = std::make_shared<WorkState>("AllGather(f32, 4) in group dp");
  state->set_executor(&waiter);
  AsyncWork work(state);
  const auto issued = Timeline::Clock::now();
  std::thread runner([state, &waiter] {
    waiter.arrived.WaitForNotification();
    std::this_thread::sleep_for(milliseconds(1));
    state->MarkStarted();
    std::this_thread::sleep_for(milliseconds(3));
    state->Complete(absl::OkStatus());
  });
  ASSERT_TRUE(WaitTraced(work, &tl, "gather", "AllGather", "h.1", issued, 64).ok());
  runner.join();
  ASSERT_EQ(tl.events().size(), 2u);
  const TraceEvent& wait = tl.events()[0];
  const TraceEvent& ran = tl.events()[1];
  EXPECT_EQ(wait.name, "wait AllGather h.1");
  EXPECT_EQ(wait.track, TraceTrack::kCompute);
  EXPECT_STREQ(wait.category, "wait");
  EXPECT_EQ(ran.name, "AllGather h.1");
  EXPECT_EQ(ran.track, TraceTrack::kComm);
  EXPECT_STREQ(ran.category, "gather");
  EXPECT_EQ(ran.begin, work.ExecutedSpan()->start);
  EXPECT_EQ(ran.end, work.ExecutedSpan()->end);
  EXPECT_GE(ran.end - ran.begin, milliseconds(3));
  ASSERT_EQ(ran.args.size(), 2u);
  EXPECT_STREQ(ran.args[0].key, "bytes");
  EXPECT_EQ(ran.args[0].value, 64);
  EXPECT_STREQ(ran.args[1].key, "queued_us");
  EXPECT_GE(ran.args[1].value, 1000);
  // The wait began before the operation started and ended after it finished.
  EXPECT_LE(wait.begin, ran.begin);
  EXPECT_GE(wait.end, ran.end);
}

TEST(TracedWaitTest, AnAlreadyCompletedOperationDrawsNoWait) {
  Timeline tl;
  const auto issued = Timeline::Clock::now();
  std::unique_ptr<Work> done = AsyncWork::Done(absl::OkStatus());
  ASSERT_TRUE(WaitTraced(*done, &tl, "reduce_scatter", "ReduceScatter bucket 0", "", issued, 8).ok());
  ASSERT_EQ(tl.events().size(), 1u);
  EXPECT_EQ(tl.events()[0].track, TraceTrack::kComm);
}

TEST(TracedWaitTest, ReturnsTheOperationsErrorAndRecordsNothingWhenStopped) {
  Timeline tl;
  tl.set_recording(false);
  std::unique_ptr<Work> failed = AsyncWork::Done(absl::InternalError("link down"));
  absl::Status s = WaitTraced(*failed, &tl, "gather", "AllGather", "h.0", Timeline::Clock::now(), 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "link down");
  EXPECT_TRUE(tl.events().empty());
  EXPECT_EQ(WaitTraced(*failed, nullptr, "gather", "x", "", Timeline::Clock::now(), 8).code(),
            absl::StatusCode::kInternal);
}

// A device-side Work: WaitOn enqueues and returns; Wait would block.
class StreamWork : public Work {
 public:
  bool IsCompleted() override { return false; }
  absl::Status Wait(absl::Duration) override {
    ++host_waits;
    return absl::OkStatus();
  }
  absl::Status WaitOn(void* stream) override {
    waited_on = stream;
    return absl::OkStatus();
  }
  int host_waits = 0;
  void* waited_on = nullptr;
};

TEST(TracedWaitTest, WaitTracedOnLeavesTheWaitToTheStream) {
  Timeline tl;
  StreamWork work;
  int stream = 0;
  const auto issued = Timeline::Clock::now();
  ASSERT_TRUE(WaitTracedOn(work, &stream, &tl, "gather", "AllGather", "h.0", issued, 32).ok());
  EXPECT_EQ(work.waited_on, &stream);
  EXPECT_EQ(work.host_waits, 0);
  // No executed span known: the comm span runs from issue to the enqueued wait.
  ASSERT_EQ(tl.events().size(), 2u);
  EXPECT_EQ(tl.events()[1].name, "AllGather h.0");
  EXPECT_EQ(tl.events()[1].begin, issued);
}

TEST(TracedWaitTest, HostBackendsWaitOnTheHostForWaitOn) {
  auto state = std::make_shared<WorkState>("AllReduce(f32, 1) in group dp");
  state->Complete(absl::OkStatus());
  AsyncWork work(state);
  int stream = 0;
  EXPECT_TRUE(WaitTracedOn(work, &stream, nullptr, "allreduce", "AllReduce", "", Timeline::Clock::now(), 4).ok());
  EXPECT_TRUE(work.IsCompleted());
}

}  // namespace
}  // namespace zeroshard
