// BackgroundWriter: one job in flight, Wait returns its result or its error,
// done() tells a finished job from a running one, and the destructor waits.
#include "checkpoint/background_writer.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

CheckpointFile Named(const std::string& path) {
  CheckpointFile f;
  f.set_path(path);
  return f;
}

TEST(BackgroundWriterTest, WaitReturnsTheJobsRecord) {
  BackgroundWriter w;
  EXPECT_FALSE(w.in_flight());
  ASSERT_TRUE(w.Start([] { return absl::StatusOr<CheckpointFile>(Named("rank_0.safetensors")); }).ok());
  EXPECT_TRUE(w.in_flight());
  absl::StatusOr<CheckpointFile> r = w.Wait();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path(), "rank_0.safetensors");
  EXPECT_FALSE(w.in_flight());
  EXPECT_FALSE(w.done());
}

TEST(BackgroundWriterTest, OneJobInFlightAndDoneOnlyOnceItReturned) {
  BackgroundWriter w;
  absl::Notification release;
  ASSERT_TRUE(w.Start([&] {
                 release.WaitForNotification();
                 return absl::StatusOr<CheckpointFile>(Named("first"));
               }).ok());
  EXPECT_TRUE(w.in_flight());
  EXPECT_FALSE(w.done());
  absl::Status second = w.Start([] { return absl::StatusOr<CheckpointFile>(Named("second")); });
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.message(), "a background write is in flight; Wait for it before starting another");
  release.Notify();
  while (!w.done()) std::this_thread::yield();
  EXPECT_TRUE(w.in_flight());  // done, result not taken yet
  absl::StatusOr<CheckpointFile> r = w.Wait();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->path(), "first");
  // Taken: the next job may start.
  ASSERT_TRUE(w.Start([] { return absl::StatusOr<CheckpointFile>(Named("third")); }).ok());
  EXPECT_EQ(w.Wait()->path(), "third");
}

TEST(BackgroundWriterTest, TheJobsErrorComesBackFromWait) {
  BackgroundWriter w;
  ASSERT_TRUE(w.Start([] {
                 return absl::StatusOr<CheckpointFile>(absl::ResourceExhaustedError("disk full"));
               }).ok());
  absl::StatusOr<CheckpointFile> r = w.Wait();
  EXPECT_EQ(r.status(), absl::ResourceExhaustedError("disk full"));
  EXPECT_FALSE(w.in_flight());
}

TEST(BackgroundWriterTest, WaitWithNothingInFlightIsAnError) {
  BackgroundWriter w;
  absl::StatusOr<CheckpointFile> r = w.Wait();
  EXPECT_EQ(r.status(), absl::FailedPreconditionError("no background write is in flight"));
}

TEST(BackgroundWriterTest, DestructorWaitsForARunningJob) {
  std::atomic<bool> finished{false};
  absl::Notification started;
  {
    BackgroundWriter w;
    ASSERT_TRUE(w.Start([&] {
                   started.Notify();
                   std::this_thread::sleep_for(std::chrono::milliseconds(50));
                   finished = true;
                   return absl::StatusOr<CheckpointFile>(Named("x"));
                 }).ok());
    started.WaitForNotification();
  }
  EXPECT_TRUE(finished.load());
}

}  // namespace
}  // namespace zeroshard
