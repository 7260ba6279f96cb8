#include "comm/async_work.h"

#include <chrono>
#include <optional>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(AsyncWorkTest, CompletesFromAnotherThread) {
  auto state = std::make_shared<WorkState>("AllReduce(f32, 4) in group world");
  AsyncWork work(state);
  EXPECT_FALSE(work.IsCompleted());
  std::thread producer([state] {
    absl::SleepFor(absl::Milliseconds(20));
    state->Complete(absl::OkStatus());
  });
  EXPECT_TRUE(work.Wait().ok());
  EXPECT_TRUE(work.IsCompleted());
  producer.join();
}

TEST(AsyncWorkTest, WaitTimesOutNamingTheOperationAndCanRetry) {
  auto state = std::make_shared<WorkState>("Recv(f32, 16) from rank 1 tag 0 in group pp");
  AsyncWork work(state);
  absl::Status s = work.Wait(absl::Milliseconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), "Recv(f32, 16) from rank 1 tag 0 in group pp did not finish within 10ms");
  state->Complete(absl::InternalError("boom"));
  EXPECT_EQ(work.Wait(absl::Milliseconds(10)).code(), absl::StatusCode::kInternal);
}

TEST(AsyncWorkTest, FirstCompletionWins) {
  auto state = std::make_shared<WorkState>("x");
  state->Complete(absl::InvalidArgumentError("first"));
  state->Complete(absl::OkStatus());
  EXPECT_EQ(state->Wait(absl::ZeroDuration()).message(), "first");
}

TEST(AsyncWorkTest, DoneIsAlreadyComplete) {
  auto work = AsyncWork::Done(absl::InvalidArgumentError("bad count"));
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_EQ(work->Wait(absl::ZeroDuration()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(AsyncWorkTest, ExecutedSpanRunsFromStartToCompletion) {
  auto state = std::make_shared<WorkState>("AllGather(f32, 8) in group dp");
  AsyncWork work(state);
  EXPECT_FALSE(work.ExecutedSpan().has_value());  // not completed yet
  const auto before = std::chrono::steady_clock::now();
  absl::SleepFor(absl::Milliseconds(2));
  state->MarkStarted();
  absl::SleepFor(absl::Milliseconds(5));
  state->MarkStarted();  // ignored: the first start counts
  absl::SleepFor(absl::Milliseconds(5));
  state->Complete(absl::OkStatus());
  const auto after = std::chrono::steady_clock::now();
  std::optional<WorkSpan> span = work.ExecutedSpan();
  ASSERT_TRUE(span.has_value());
  EXPECT_GT(span->start, before + std::chrono::milliseconds(2) - std::chrono::microseconds(1));
  EXPECT_GE(span->end - span->start, std::chrono::milliseconds(10));
  EXPECT_LE(span->end, after);
}

TEST(AsyncWorkTest, CompletionWithoutStartIsAZeroLengthSpan) {
  auto work = AsyncWork::Done(absl::OkStatus());
  std::optional<WorkSpan> span = work->ExecutedSpan();
  ASSERT_TRUE(span.has_value());
  EXPECT_EQ(span->start, span->end);
}

}  // namespace
}  // namespace zeroshard
